"""`minilm-frozen`: a pretrained encoder at less than the embedded model's cost per step (issue 35).

all-MiniLM-L6-v2 (larev/models/pretrained.py) as a seq2seq evaluator whose lower encoder layers never train:

    encoder  CachedFrozenEncoder  embeddings + layers [0, frozen_layers)   frozen: no gradient, always in eval mode,
                                                                            their output per input computed once
                                  layers [frozen_layers, 6)                 trainable, started from the checkpoint
                                  adapter h + W h (W: H x H, starts at 0)   trainable: what phi_LA's probe term
                                                                            reads can change even when every
                                                                            layer is frozen (the default)
    decoder  BertLMHeadModel      `decoder_layers` layers started from the checkpoint's first ones, cross-attention
                                  new (EncoderDecoderModel, as `minilm`); its word embeddings (tied to the output
                                  layer) stay frozen. Its vocabulary is the run's *output vocabulary* (below), the
                                  checkpoint's embedding rows of those tokens

Why it is cheap: every text an evaluator reads (environments, variants, training texts) is fixed before training,
so the frozen part's output for it is the same in every epoch, every model and every run. `EncoderOutputCache`
keeps it per input, keyed by the input's token ids, in a directory named by the frozen part's identity (the
checkpoint's sha256, the number of frozen layers, the vocabulary size): a training step runs only the trainable
top and the decoder, and a second run on the same data encodes nothing. The cache holds the frozen part's output
exactly as computed (fp16 on disk and in memory): BERT's outputs at a row's real tokens do not depend on the
padding, so one entry serves every batch the input lands in.

Integrated Gradients integrates over the cached frozen output (`frozen_states`; larev/leakage/attribution.py), so
no gradient crosses the frozen layers; a caller that passes `inputs_embeds` gets the full path with the graph. The
probe's gradient (eq. 4.10) reaches phi_LA's trainable top only, which is what the probe reads.

The output vocabulary. An evaluator only ever scores label texts (NLI's relation names, a QA row's answer choices),
so its decoder predicts those texts' tokens only: `output_vocabulary` lists them (checkpoint ids), built by the run's
tokenizer step from every label text of every split. Over the full 30,522 tokens the output layer did 11.5x the
embedded model's output layer's work per target token; over CoS-E's answer tokens (4,735, plus 104 specials) 1.8x,
over e-SNLI's three labels almost nothing (`larev bench speed` measures the step with each). The ids up to the
last special token keep their ids ([PAD], [UNK], [CLS], [SEP], [MASK]: padding, start and end mean the same on both
sides), the others are renumbered in order; the decoder's config keeps the list (`output_token_ids`), so a saved
model maps its targets by itself.
Scoring a file whose label texts have tokens outside the list (the human-judgement files' CommonsenseQA answers,
another dataset) first adds them to the decoder (`cover_label_texts`): their rows are the checkpoint's embeddings,
exactly what the full vocabulary would have had (the decoder's rows are frozen), their output bias the trained
tokens' mean; the softmax then runs over the larger list, so their scores extrapolate (a warning says how many).
A model that writes free text (RORA's infiller) keeps the full vocabulary.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import threading
import uuid
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoModel, BertConfig, BertModel, PreTrainedModel
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutput

log = logging.getLogger(__name__)

#: where the frozen part's outputs are kept when LAREV_ENCODER_CACHE is unset (beside the default artifact store)
DEFAULT_CACHE_ROOT = ".larev/encoder-cache"
CACHE_ENV = "LAREV_ENCODER_CACHE"
#: entries kept in memory before they are written to a new shard file
FLUSH_EVERY = 8192
#: the decoder config's list of the checkpoint ids its decoder predicts (the output vocabulary, in order)
OUTPUT_IDS_ATTR = "output_token_ids"
#: the tokenizer step's artifact for minilm-frozen: the output vocabulary as a JSON list of checkpoint ids
OUTPUT_VOCABULARY_FILE = "output_vocabulary.json"


class FrozenBertConfig(BertConfig):
    """BERT's config plus what the frozen split needs: how many lower layers are frozen, and the identity of the
    frozen weights (the cache directory's name)."""

    model_type = "larev_frozen_bert"

    def __init__(self, frozen_layers: int = 6, frozen_identity: str = "", **kwargs):
        super().__init__(**kwargs)
        self.frozen_layers = frozen_layers
        self.frozen_identity = frozen_identity


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_ROOT).expanduser()


class EncoderOutputCache:
    """The frozen part's output per input (token ids -> (length, hidden) fp16), in memory and as safetensors shards
    in `directory` (None: memory only). Written shard by shard, each atomically (a temporary name, then a rename),
    so two processes filling one directory lose nothing and a reader never sees half a shard. The directory's
    shards are all read into memory at first use (about 25 KB per input)."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self._entries: dict[bytes, torch.Tensor] = {}
        self._pending: dict[bytes, torch.Tensor] = {}
        self._loaded = directory is None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(ids: torch.Tensor) -> bytes:
        """16 bytes that name an input: a BLAKE2b digest of its token ids (int32)."""
        return hashlib.blake2b(np.ascontiguousarray(ids.cpu().numpy(), dtype=np.int32).tobytes(),
                               digest_size=16).digest()

    def _load(self) -> None:
        if self._loaded:
            return
        from safetensors.torch import load_file

        shards = sorted(self.directory.glob("*.safetensors")) if self.directory.is_dir() else []
        for shard in shards:
            for name, tensor in load_file(str(shard)).items():
                self._entries[bytes.fromhex(name)] = tensor
        if shards:
            log.info("encoder cache %s: %d stored outputs from %d shard(s)", self.directory, len(self._entries),
                     len(shards))
        self._loaded = True

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def get(self, key: bytes) -> torch.Tensor | None:
        self._load()
        return self._entries.get(key)

    def put(self, key: bytes, value: torch.Tensor) -> None:
        value = value.detach().to("cpu", torch.float16).contiguous()
        with self._lock:
            self._entries[key] = value
            if self.directory is not None:
                self._pending[key] = value
                if len(self._pending) >= FLUSH_EVERY:
                    self._flush_locked()

    def flush(self) -> None:
        """Write the entries not yet on disk to one new shard."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._pending or self.directory is None:
            return
        from safetensors.torch import save_file

        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"shard-{uuid.uuid4().hex}.safetensors"
        tmp = self.directory / f".{name}.tmp"
        save_file({k.hex(): v for k, v in self._pending.items()}, str(tmp))
        os.replace(tmp, self.directory / name)
        self._pending = {}


_CACHES: dict[str, EncoderOutputCache] = {}


def output_cache(identity: str) -> EncoderOutputCache:
    """The process's cache of the frozen part named `identity` (one per identity and cache root: every evaluator on
    the same frozen weights shares it)."""
    directory = cache_root() / identity if identity else None
    name = str(directory)
    if name not in _CACHES:
        _CACHES[name] = EncoderOutputCache(directory)
    return _CACHES[name]


@atexit.register
def flush_all() -> None:
    """Write every cache's pending entries, at exit (between, a shard is written every FLUSH_EVERY new entries:
    a process killed before exit loses at most those, which the next run computes again)."""
    for cache in _CACHES.values():
        cache.flush()


class CachedFrozenEncoder(PreTrainedModel):
    """BERT whose embeddings and lower `frozen_layers` layers are frozen and cached per input (module docstring).

    forward(input_ids (B, L), attention_mask (B, L)) -> last_hidden_state (B, L, H); `frozen_states` (B, L, H)
    instead of ids start above the frozen layers (Integrated Gradients); `inputs_embeds` (B, L, H) run the frozen
    layers in full with the graph kept."""

    config_class = FrozenBertConfig
    base_model_prefix = "bert"

    def __init__(self, config: FrozenBertConfig):
        super().__init__(config)
        if not 0 <= config.frozen_layers <= config.num_hidden_layers:
            raise ValueError(f"frozen_layers must be within 0..{config.num_hidden_layers}, got {config.frozen_layers}")
        self.bert = BertModel(config, add_pooling_layer=False)
        self.adapter = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self.post_init()
        torch.nn.init.zeros_(self.adapter.weight)  # starts as the identity: h + 0
        torch.nn.init.zeros_(self.adapter.bias)
        for p in self.frozen_parameters():
            p.requires_grad_(False)

    def _init_weights(self, module):  # BERT's initialisation; the builder then loads the checkpoint's weights
        if not isinstance(module, CachedFrozenEncoder) and module is not getattr(self, "adapter", None):
            self.bert._init_weights(module)

    def frozen_modules(self) -> list[torch.nn.Module]:
        return [self.bert.embeddings, *self.bert.encoder.layer[:self.config.frozen_layers]]

    def frozen_parameters(self):
        for module in self.frozen_modules():
            yield from module.parameters()

    def train(self, mode: bool = True):
        super().train(mode)
        for module in self.frozen_modules():  # no dropout where outputs are cached: one output per input
            module.eval()
        return self

    def get_input_embeddings(self):
        return self.bert.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.bert.embeddings.word_embeddings = value
        for p in self.frozen_parameters():  # a resized vocabulary (RORA's sentinels) stays frozen
            p.requires_grad_(False)

    @property
    def cache(self) -> EncoderOutputCache:
        """The outputs of these frozen weights: named by their identity and the vocabulary size (RORA's infiller
        adds sentinel tokens, so its inputs' ids mean other embeddings)."""
        identity = self.config.frozen_identity
        return output_cache(f"{identity}-vocab{self.get_input_embeddings().num_embeddings}" if identity else "")

    def _mask(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None):
        return create_bidirectional_mask(config=self.config, inputs_embeds=hidden, attention_mask=attention_mask)

    def frozen_forward(self, input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None,
                       inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """The frozen part's output, computed (no cache): (B, L, H)."""
        hidden = self.bert.embeddings(input_ids=input_ids, inputs_embeds=inputs_embeds)
        mask = self._mask(hidden, attention_mask)
        for layer in self.bert.encoder.layer[:self.config.frozen_layers]:
            hidden = layer(hidden, mask)
        return hidden

    def cached_frozen(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The frozen part's output from the cache, computing (without a graph) and storing the inputs it lacks.
        Rows are right-padded (a row's real tokens are the first `attention_mask.sum()`)."""
        cache = self.cache
        lengths = attention_mask.sum(dim=1).tolist()
        if any(not bool(attention_mask[i, :n].all()) for i, n in enumerate(lengths)):  # not right-padded
            with torch.no_grad():
                return self.frozen_forward(input_ids, attention_mask)
        keys = [cache.key(input_ids[i, :n]) for i, n in enumerate(lengths)]
        found = [cache.get(k) for k in keys]
        first_of: dict[bytes, int] = {}  # a missing input's first row in the batch (computed once)
        for i, v in enumerate(found):
            if v is None:
                first_of.setdefault(keys[i], i)
        missing = list(first_of.values())
        cache.hits += len(keys) - len(missing)
        cache.misses += len(missing)
        if missing:
            width = max(lengths[i] for i in missing)
            with torch.no_grad():
                computed = self.frozen_forward(input_ids[missing, :width], attention_mask[missing, :width])
            for row, i in enumerate(missing):
                cache.put(keys[i], computed[row, :lengths[i]])
            found = [cache.get(k) for k in keys]
        out = torch.zeros(input_ids.shape[0], input_ids.shape[1], self.config.hidden_size)
        for i, value in enumerate(found):
            out[i, :value.shape[0]] = value.float()
        return out.to(input_ids.device)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None, frozen_states: torch.Tensor | None = None,
                **kwargs) -> BaseModelOutput:
        """From token ids (the frozen part read from the cache), from `inputs_embeds` (the frozen part computed
        with the graph) or from `frozen_states` (B, L, H), the frozen part's output itself (Integrated Gradients
        integrates there: larev/leakage/attribution.py)."""
        given = next(t for t in (input_ids, inputs_embeds, frozen_states) if t is not None)
        if attention_mask is None:
            attention_mask = torch.ones(given.shape[:2], dtype=torch.long, device=given.device)
        if frozen_states is not None:
            hidden = frozen_states
        elif inputs_embeds is not None or input_ids is None:
            hidden = self.frozen_forward(None, attention_mask, inputs_embeds=inputs_embeds)
        else:
            hidden = self.cached_frozen(input_ids, attention_mask)
        hidden = hidden.to(self.adapter.weight.dtype)  # the cache holds fp16
        mask = self._mask(hidden, attention_mask)
        for layer in self.bert.encoder.layer[self.config.frozen_layers:]:
            hidden = layer(hidden, mask)
        return BaseModelOutput(last_hidden_state=hidden + self.adapter(hidden))


AutoConfig.register(FrozenBertConfig.model_type, FrozenBertConfig)
AutoModel.register(FrozenBertConfig, CachedFrozenEncoder)


def freeze_decoder_embeddings(model):
    """The decoder's word embeddings (tied to its output layer) take no gradient; called where the model is built
    and where a saved one is loaded (requires_grad is not saved). Returns the model."""
    model.decoder.get_input_embeddings().weight.requires_grad_(False)
    return model


def output_vocabulary(tokenizer, label_texts) -> list[int]:
    """The checkpoint ids the decoder predicts (module docstring): every id up to the last special token, and every
    token of `label_texts`; sorted (a model extended later appends to its list: `extend_output`)."""
    ids = set(range(max(tokenizer.all_special_ids) + 1))
    texts = list(label_texts)
    if texts:
        for row in tokenizer(texts, add_special_tokens=False)["input_ids"]:
            ids.update(row)
    return sorted(ids)


def output_token_ids(model) -> list[int] | None:
    """The output vocabulary of a model's decoder (checkpoint ids, in decoder order); None: the full vocabulary."""
    return getattr(getattr(model.config, "decoder", None), OUTPUT_IDS_ATTR, None)


def _rebuilt_decoder(decoder, token_ids: list[int], state: dict):
    """A BertLMHeadModel like `decoder` over `token_ids` (its output vocabulary), with the weights `state`."""
    from transformers import BertLMHeadModel

    config = decoder.config.__class__(**{**decoder.config.to_dict(), "vocab_size": len(token_ids),
                                         OUTPUT_IDS_ATTR: list(token_ids)})
    with torch.random.fork_rng(devices=[]):  # its random initialisation is overwritten: leave the caller's draws
        rebuilt = BertLMHeadModel(config)
    rebuilt.load_state_dict(state)
    rebuilt.get_input_embeddings().weight.requires_grad_(decoder.get_input_embeddings().weight.requires_grad)
    return rebuilt.train(decoder.training)


def restrict_output(decoder, token_ids: list[int]):
    """The decoder over `token_ids` only: a BertLMHeadModel of len(token_ids) tokens whose rows of every
    vocabulary-sized weight (word embeddings, tied output layer, output bias) are the checkpoint's rows of those
    tokens, in order; everything else unchanged."""
    full = decoder.config.vocab_size
    if len(set(token_ids)) != len(token_ids) or not token_ids or max(token_ids) >= full or min(token_ids) < 0:
        raise ValueError(f"an output vocabulary is a list of distinct ids within 0..{full - 1}")
    rows = torch.tensor(token_ids)
    state = {k: (v[rows] if v.dim() and v.shape[0] == full else v) for k, v in decoder.state_dict().items()}
    return _rebuilt_decoder(decoder, token_ids, state)


def extend_output(model, new_ids: list[int]) -> None:
    """Add checkpoint tokens to a (trained) EncoderDecoderModel's output vocabulary, after the ones it has (their
    positions stay): their embedding and output rows are the checkpoint's (the encoder's frozen copy, which the
    decoder's rows were taken from and never left), their output bias the mean of the trained biases of the
    tokens past the specials."""
    decoder, ids = model.decoder, output_token_ids(model)
    known = set(ids)
    new_ids = [i for i in dict.fromkeys(new_ids) if i not in known]
    if not new_ids:
        return
    checkpoint_rows = model.get_encoder().get_input_embeddings().weight.detach()[torch.tensor(new_ids)]
    first_regular = next((p for p, t in enumerate(ids) if t != p), len(ids))  # the specials keep their ids
    state = {}
    for key, value in decoder.state_dict().items():
        if value.dim() == 2 and value.shape[0] == len(ids):
            value = torch.cat([value, checkpoint_rows.to(value.dtype)])
        elif value.dim() == 1 and value.shape[0] == len(ids):
            trained = value[first_regular:] if first_regular < len(ids) else value
            value = torch.cat([value, trained.mean().expand(len(new_ids)).to(value.dtype)])
        state[key] = value
    model.decoder = _rebuilt_decoder(decoder, [*ids, *new_ids], state).to(checkpoint_rows.device)
    model.config.decoder = model.decoder.config


def cover_label_texts(evaluator, texts: list[str]) -> None:
    """Before scoring: a decoder with an output vocabulary of its own gets every token of `texts` it lacks
    (`extend_output`, module docstring), with a warning; nothing for other evaluators."""
    ids = output_token_ids(evaluator.model)
    if ids is None or not texts:
        return
    known = set(ids)
    rows = evaluator.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    outside = [t for t, row in zip(texts, rows) if any(i not in known for i in row)]
    if not outside:
        return
    new_ids = sorted({i for row in rows for i in row} - known)
    extend_output(evaluator.model, new_ids)
    evaluator.forget_output_positions()
    log.warning("%d of %d label texts have tokens the decoder was not trained to predict (%d tokens, e.g. in %r): "
                "added to its output layer with the checkpoint's embeddings; their scores extrapolate",
                len(outside), len(texts), len(new_ids), outside[0])


def frozen_identity(weights_sha256: str, frozen_layers: int) -> str:
    """What the frozen part's output depends on besides the vocabulary: the checkpoint and the frozen depth."""
    return f"minilm-{weights_sha256[:16]}-frozen{frozen_layers}"


def build_frozen_encoder_decoder(directory: Path, *, frozen_layers: int, decoder_layers: int, weights_sha256: str,
                                 seed: int, output_ids: list[int] | None = None):
    """The EncoderDecoderModel of the module docstring from a BERT checkpoint directory. `seed` draws every new
    weight (the decoder's cross-attention); `output_ids`: the decoder's output vocabulary (`output_vocabulary`),
    None: the full vocabulary."""
    from transformers import BertLMHeadModel, EncoderDecoderModel
    from transformers.utils import logging as hf_logging

    from larev.progress import quiet_weight_loading

    base = BertConfig.from_pretrained(str(directory))
    if not 1 <= decoder_layers <= base.num_hidden_layers:
        raise ValueError(f"decoder_layers must be within 1..{base.num_hidden_layers}, got {decoder_layers}")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # unused upper layers (decoder) and new cross-attention: expected here
    try:
        with torch.random.fork_rng(devices=[]), quiet_weight_loading():
            torch.manual_seed(seed)
            config = FrozenBertConfig(frozen_layers=frozen_layers,
                                      frozen_identity=frozen_identity(weights_sha256, frozen_layers),
                                      **base.to_dict())
            encoder = CachedFrozenEncoder(config)
            pretrained = BertModel.from_pretrained(str(directory), add_pooling_layer=False, use_safetensors=True)
            encoder.bert.load_state_dict(pretrained.state_dict())
            decoder_config = BertConfig.from_pretrained(str(directory), is_decoder=True, add_cross_attention=True,
                                                        num_hidden_layers=decoder_layers)
            decoder = BertLMHeadModel.from_pretrained(str(directory), config=decoder_config, use_safetensors=True)
            if output_ids is not None:
                decoder = restrict_output(decoder, output_ids)
            return freeze_decoder_embeddings(EncoderDecoderModel(encoder=encoder, decoder=decoder))
    finally:
        hf_logging.set_verbosity(verbosity)
