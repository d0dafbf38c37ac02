"""Evaluator models: build, save, load, encode, and batched log p(label | input).

An evaluator is any seq2seq model that reads an input text and is scored on the label's text as the decoder
target. Three ways to get one:
- `embedded`: a small T5 built from `ModelConfig` with the word-level tokenizer trained on the training texts,
  no download needed (the offline default);
- a named pretrained backbone shipped in a Python package (`minilm`; larev/models/pretrained.py), offline too;
- a Hugging Face checkpoint by name or local path (t5-large, facebook/bart-large, google/flan-t5-base ...).
All are saved in Hugging Face format (safetensors weights only) with the larev configs in `larev_config.json`.

Log-probability normalisation (one for every metric; `ScoreConfig.normalisation`):
- `label_set` (default): s_k = sum of the token log-probs of candidate label k (its tokens and the end token);
  log p(y | input) = s_y - logsumexp_k s_k, a proper distribution over the task's labels (NLI relations or the
  row's answer choices), as in RORA eq. 8. Prediction = argmax_k s_k.
- `sum`: s_y, the label sequence's log-likelihood under the seq2seq model (no renormalisation).
- `mean`: s_y / |y|, the per-token mean (what an HF `loss` gives); prediction = argmax_k of s_k / |k|.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from larev.progress import progress_bar, quiet_weight_loading

from larev import __version__
from larev.config import ModelConfig, ScoreConfig
from larev.device import autocast, resolve_device
from larev.errors import ConfigError

log = logging.getLogger(__name__)

LAREV_CONFIG_FILE = "larev_config.json"

# EncoderDecoderModel (the minilm backbone) warns on every forward pass with decoder inputs that its loss changed in
# transformers 4.12 (2021): larev trains and scores it with the current code only, so the warning says nothing. Set
# here, where every step that trains or scores an evaluator passes.
warnings.filterwarnings("ignore", message="Version v4.12.0 introduces a better way", category=FutureWarning)


@dataclass
class Evaluator:
    """A seq2seq model with its tokenizer, the config it was built from, and where it runs."""

    model: torch.nn.Module
    tokenizer: object
    config: ModelConfig
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    bf16: bool = True
    meta: dict = field(default_factory=dict)  # role, training history ... saved beside the config
    base: dict | None = None  # the pretrained checkpoint it started from (name, digest); None: built from config
    _output_position: dict[int, int] | None = field(default=None, init=False, repr=False)

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def eos_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    def target_ids(self, texts: list[str]) -> list[list[int]]:
        """Decoder-side token ids of label / target texts, cut to max_target_tokens, without a leading start token
        (see `tokenize`). A decoder with an output vocabulary of its own (minilm-frozen, larev/models/frozen.py)
        gets its own ids; a token outside that vocabulary is read as the unknown token, with a warning."""
        ids = tokenize(self.tokenizer, texts, self.config.max_target_tokens, self.eos_id,
                       start_id=self.model.config.decoder_start_token_id)[0]
        from larev.models.frozen import output_token_ids

        vocabulary = output_token_ids(self.model)
        if vocabulary is None:
            return ids
        if self._output_position is None:
            self._output_position = {t: i for i, t in enumerate(vocabulary)}
        position, unk = self._output_position, self._output_position[int(self.tokenizer.unk_token_id)]
        outside = [t for t, row in zip(texts, ids) if any(i not in position for i in row)]
        if outside:
            log.warning("%d of %d label texts have tokens outside the decoder's output vocabulary (%d tokens, the "
                        "run's label texts), read as the unknown token: e.g. %r", len(outside), len(texts),
                        len(vocabulary), outside[0])
        return [[position.get(i, unk) for i in row] for row in ids]

    def forget_output_positions(self) -> None:
        """After the decoder's output vocabulary changed (larev.models.frozen.cover_label_texts)."""
        self._output_position = None

    def to(self, device: torch.device) -> "Evaluator":
        self.model.to(device)
        self.device = device
        return self


# ----------------------------------------------------------------------------------------------- building


def build_embedded_t5(config: ModelConfig, tokenizer, seed: int) -> Evaluator:
    """A small T5 initialised from `seed`, sized by `config`, over `tokenizer`'s vocabulary."""
    from transformers import T5Config, T5ForConditionalGeneration

    t5_config = T5Config(
        vocab_size=len(tokenizer),
        d_model=config.d_model,
        d_kv=config.d_kv,
        d_ff=config.d_ff,
        num_layers=config.num_layers,
        num_decoder_layers=config.num_layers,
        num_heads=config.num_heads,
        dropout_rate=config.dropout,
        feed_forward_proj="relu",
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = T5ForConditionalGeneration(t5_config)
    return Evaluator(model=model, tokenizer=tokenizer, config=config)


#: Weight files that are Python pickles: loading one can run arbitrary code, so larev never does.
PICKLED_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def _pickle_refusal(path: str | Path) -> str:
    """' It holds only pickled weights (...) ...' when `path` is a directory with pickled weights, else ''."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        return ""
    pickled = sorted({p.name for pattern in PICKLED_WEIGHTS for p in directory.glob(pattern)})
    if not pickled:
        return ""
    return (f" {directory} holds pickled weights ({', '.join(pickled)}) and no safetensors: larev never unpickles "
            f"model weights (a pickle can run arbitrary code). Convert them to safetensors with a trusted copy "
            f"of the model (save_pretrained(..., safe_serialization=True)), or retrain.")


def load_hf_checkpoint(config: ModelConfig) -> Evaluator:
    """A pretrained Hugging Face seq2seq checkpoint, by name or local path (safetensors weights only)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    try:
        with quiet_weight_loading():
            tokenizer = AutoTokenizer.from_pretrained(config.backbone)
            model = AutoModelForSeq2SeqLM.from_pretrained(config.backbone, use_safetensors=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"could not load the seq2seq checkpoint {config.backbone!r}: {exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}. Without access to the model hub, give a local "
            f"directory holding a seq2seq model (T5, BART) in Hugging Face format (safetensors), or use "
            f"backbone='embedded' or 'minilm' (an encoder-only checkpoint such as BERT is not seq2seq)."
            + _pickle_refusal(config.backbone)
        ) from None
    if tokenizer.pad_token_id is None:
        raise ConfigError(f"the tokenizer of {config.backbone!r} has no pad token")
    from larev.models.pretrained import base_weights

    return Evaluator(model=model, tokenizer=tokenizer, config=config, base=base_weights(config.backbone))


def build_named(config: ModelConfig, seed: int, output_vocabulary: list[int] | None = None) -> Evaluator:
    """A seq2seq evaluator warm-started from a named offline checkpoint (larev/models/pretrained.py); `seed`
    draws its new weights (cross-attention, and the decoder unless `config.pretrained_decoder`);
    `output_vocabulary`: minilm-frozen's decoder vocabulary (larev/models/frozen.py; None: the full one)."""
    from larev.models import pretrained

    directory = pretrained.checkpoint_dir(config.backbone)
    tokenizer = pretrained.wordpiece_tokenizer(directory)
    base = pretrained.base_record(config.backbone, directory)
    if pretrained.NAMED_BACKBONES[config.backbone].frozen:
        from larev.models.frozen import build_frozen_encoder_decoder

        layers = json.loads((directory / "config.json").read_text())["num_hidden_layers"]
        model = build_frozen_encoder_decoder(directory, frozen_layers=pretrained.frozen_depth(config, layers),
                                             decoder_layers=config.decoder_layers, weights_sha256=base["sha256"],
                                             seed=seed, output_ids=output_vocabulary)
    else:
        model = pretrained.build_bert2bert(directory, pretrained_decoder=config.pretrained_decoder, seed=seed)
    positions = model.config.encoder.max_position_embeddings
    if max(config.max_input_tokens, config.max_target_tokens) > positions:
        raise ConfigError(f"backbone {config.backbone!r} reads at most {positions} tokens: max_input_tokens "
                          f"{config.max_input_tokens} / max_target_tokens {config.max_target_tokens} must not "
                          f"exceed it")
    model.config.decoder_start_token_id = tokenizer.cls_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    model.config.eos_token_id = tokenizer.sep_token_id
    model.generation_config.decoder_start_token_id = tokenizer.cls_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.sep_token_id
    return Evaluator(model=model, tokenizer=tokenizer, config=config, base=base)


def new_evaluator(config: ModelConfig, *, tokenizer=None, seed: int = 0,
                  output_vocabulary: list[int] | None = None) -> Evaluator:
    """A fresh evaluator to train: the embedded T5 (needs the trained `tokenizer`), a named offline checkpoint
    (`minilm`, `minilm-frozen` with its decoder's `output_vocabulary`; None: the full vocabulary, for a model that
    writes free text) or an HF checkpoint."""
    from larev.models.pretrained import NAMED_BACKBONES, is_named

    if config.backbone == "embedded":
        if tokenizer is None:
            raise ConfigError("backbone='embedded' needs the tokenizer trained on the training texts")
        return build_embedded_t5(config, tokenizer, seed)
    if output_vocabulary is not None and not getattr(NAMED_BACKBONES.get(config.backbone), "frozen", False):
        raise ConfigError(f"an output vocabulary is minilm-frozen's; backbone {config.backbone!r} predicts its "
                          f"full vocabulary")
    if is_named(config.backbone):
        return build_named(config, seed, output_vocabulary)
    return load_hf_checkpoint(config)


def mask_token_of(tokenizer) -> str:
    """The token that stands for a masked word: the tokenizer's mask token (embedded, BART), T5's first sentinel,
    else the unknown token."""
    if getattr(tokenizer, "mask_token", None):
        return tokenizer.mask_token
    if "<extra_id_0>" in tokenizer.get_vocab():
        return "<extra_id_0>"
    return tokenizer.unk_token


# ----------------------------------------------------------------------------------------------- save / load


def save_evaluator(evaluator: Evaluator, out_dir: str | Path, **extra_meta) -> Path:
    """Save weights (safetensors), HF config, tokenizer and `larev_config.json` (configs + meta) into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with quiet_weight_loading():  # no "Writing model shards" bar per saved model
        evaluator.model.save_pretrained(out, safe_serialization=True)
        evaluator.tokenizer.save_pretrained(out)
    meta = {**evaluator.meta, **extra_meta}
    payload = {"larev_version": __version__, "model_config": evaluator.config.model_dump(mode="json"), "meta": meta,
               "base_checkpoint": evaluator.base}
    (out / LAREV_CONFIG_FILE).write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))
    return out


def load_evaluator(path: str | Path, *, device: str = "auto", bf16: bool = True) -> Evaluator:
    """Load an evaluator saved by `save_evaluator` (weights through safetensors only, no pickled code)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    path = Path(path)
    cfg_file = path / LAREV_CONFIG_FILE
    if not cfg_file.exists():
        raise ConfigError(f"{path} is not a larev evaluator directory (no {LAREV_CONFIG_FILE})")
    payload = json.loads(cfg_file.read_text())
    config = ModelConfig(**payload["model_config"])
    from larev.models.pretrained import NAMED_BACKBONES

    frozen = getattr(NAMED_BACKBONES.get(config.backbone), "frozen", False)  # requires_grad is not saved
    if frozen:
        from larev.models.frozen import freeze_decoder_embeddings  # also registers its encoder with AutoModel
    tokenizer = AutoTokenizer.from_pretrained(path)
    try:  # safetensors only: a pickled pytorch_model.bin is refused, never unpickled
        with quiet_weight_loading():
            model = AutoModelForSeq2SeqLM.from_pretrained(path, use_safetensors=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load the evaluator weights in {path} ({exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); larev reads them from model.safetensors only."
            + (_pickle_refusal(path) or " Rerun the step that trained this model.")
        ) from None
    model.eval()
    if frozen:
        freeze_decoder_embeddings(model)
    ev = Evaluator(model=model, tokenizer=tokenizer, config=config, bf16=bf16, meta=payload.get("meta", {}),
                   base=payload.get("base_checkpoint"))
    return ev.to(resolve_device(device))


# ----------------------------------------------------------------------------------------------- encoding


def tokenize(tokenizer, texts: list[str], max_len: int, eos_id: int,
             start_id: int | None = None) -> tuple[list[list[int]], int]:
    """Token ids per text, cut to `max_len` keeping the final end token; also the number of texts cut.

    start_id: for decoder targets, the decoder's start token, dropped where the tokenizer puts it first (BERT's
    [CLS]): the decoder is fed it as its start, so it is never a token to predict.
    """
    ids = tokenizer(list(texts), add_special_tokens=True)["input_ids"]
    n_cut = 0
    out = []
    for row in ids:
        if start_id is not None and len(row) > 1 and row[0] == start_id:
            row = row[1:]
        if len(row) > max_len:
            n_cut += 1
            row = row[: max_len - 1] + [eos_id]
        out.append(row)
    return out, n_cut


def pad_batch(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into (ids, attention_mask) tensors."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


def labels_for_loss(label_ids: torch.Tensor, label_mask: torch.Tensor) -> torch.Tensor:
    """HF convention: positions to ignore in the loss carry -100."""
    return label_ids.masked_fill(label_mask == 0, -100)


# ----------------------------------------------------------------------------------------------- scoring


def normalise_label_scores(seq_logp: torch.Tensor, n_tokens: torch.Tensor, target: torch.Tensor,
                           mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(y | input) of the target candidate and the predicted candidate index, per row.

    seq_logp: [n, K] summed token log-probs of each candidate label (-inf where a row has fewer candidates);
    n_tokens: [n, K] label lengths in tokens; target: [n] index of the label being scored.
    label_set: s_y - logsumexp_k s_k;  sum: s_y;  mean: s_y / |y|  (see the module docstring).
    """
    if mode == "label_set":
        scores = torch.log_softmax(seq_logp, dim=1)
    elif mode == "sum":
        scores = seq_logp
    elif mode == "mean":
        scores = seq_logp / n_tokens.clamp(min=1)
    else:
        raise ConfigError(f"unknown normalisation {mode!r}; expected label_set, sum or mean")
    return scores.gather(1, target[:, None]).squeeze(1), scores.argmax(dim=1)


def candidate_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       cand_ids: torch.Tensor, cand_mask: torch.Tensor, cand_row: torch.Tensor) -> torch.Tensor:
    """Summed token log-probs of each (row, candidate) pair, encoding every row once.

    input_ids/attention_mask: [n, L]; cand_ids/cand_mask: [P, T] candidate label ids (teacher forced);
    cand_row: [P] which row each candidate pair belongs to. Returns [P].
    """
    hidden = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return candidate_logprobs_from(model, hidden, attention_mask, cand_ids, cand_mask, cand_row)


def candidate_logprobs_from(model: torch.nn.Module, hidden: torch.Tensor, attention_mask: torch.Tensor,
                            cand_ids: torch.Tensor, cand_mask: torch.Tensor, cand_row: torch.Tensor) -> torch.Tensor:
    """`candidate_logprobs` from encoder states already computed (hidden: [n, L, D])."""
    out = model(encoder_outputs=(hidden[cand_row],), attention_mask=attention_mask[cand_row],
                labels=labels_for_loss(cand_ids, cand_mask))
    logp = torch.log_softmax(out.logits.float(), dim=-1)
    token_logp = logp.gather(2, cand_ids[:, :, None]).squeeze(2)
    return (token_logp * cand_mask).sum(dim=1)


@dataclass
class LabelScores:
    """Per-row result of scoring: log p(label | input), the predicted label and whether it is the label."""

    logp: np.ndarray  # [n] float64
    predicted: list[str]
    correct: np.ndarray  # [n] bool
    n_truncated: int = 0


def score_labels(evaluator: Evaluator, inputs: list[str], labels: list[str], candidates: list[list[str]],
                 config: ScoreConfig | None = None, *, progress: bool = False, desc: str = "scoring") -> LabelScores:
    """Batched log p(label | input) under `config.normalisation`, with the argmax prediction over `candidates`.

    candidates[i] is row i's label set and must contain labels[i].
    """
    config = config or ScoreConfig()
    if not (len(inputs) == len(labels) == len(candidates)):
        raise ValueError("inputs, labels and candidates must have the same length")
    for i, (y, cands) in enumerate(zip(labels, candidates)):
        if y not in cands:
            raise ValueError(f"row {i}: label {y!r} is not among its candidates {cands}")
    model, tok = evaluator.model, evaluator.tokenizer
    model.eval()
    distinct = sorted({c for cands in candidates for c in cands})
    from larev.models.frozen import cover_label_texts

    cover_label_texts(evaluator, distinct)  # minilm-frozen: label texts from elsewhere join its output vocabulary
    label_cache = dict(zip(distinct, evaluator.target_ids(distinct))) if distinct else {}

    enc, n_cut = tokenize(tok, inputs, evaluator.config.max_input_tokens, evaluator.eos_id)
    if n_cut:
        log.info("%d of %d inputs were longer than %d tokens and were truncated", n_cut, len(inputs),
                 evaluator.config.max_input_tokens)
    logp_out = np.empty(len(inputs), dtype=np.float64)
    predicted: list[str] = [""] * len(inputs)
    # batches of similar length (less padding); results go back to the input order
    order = sorted(range(len(inputs)), key=lambda i: len(enc[i]))
    starts = range(0, len(inputs), config.batch_size)
    for start in progress_bar(starts, desc=desc, enabled=progress, unit="batch"):
        rows = order[start: start + config.batch_size]
        ids, mask = pad_batch([enc[i] for i in rows], evaluator.pad_id)
        rows_cands = [candidates[i] for i in rows]
        pairs = [(r, c) for r, cands in enumerate(rows_cands) for c in cands]
        cand_ids, cand_mask = pad_batch([label_cache[c] for _, c in pairs], evaluator.pad_id)
        cand_row = torch.tensor([r for r, _ in pairs], dtype=torch.long)
        dev = evaluator.device
        with torch.no_grad(), autocast(dev, evaluator.bf16):
            pair_logp = candidate_logprobs(model, ids.to(dev), mask.to(dev), cand_ids.to(dev), cand_mask.to(dev),
                                           cand_row.to(dev)).float().cpu()
        k_max = max(len(c) for c in rows_cands)
        seq = torch.full((len(rows), k_max), -math.inf)
        ntok = torch.ones((len(rows), k_max))
        pos = 0
        for r, cands in enumerate(rows_cands):
            k = len(cands)
            seq[r, :k] = pair_logp[pos: pos + k]
            ntok[r, :k] = cand_mask[pos: pos + k].sum(dim=1).float()
            pos += k
        target = torch.tensor([cands.index(labels[i]) for cands, i in zip(rows_cands, rows)])
        logp, pred = normalise_label_scores(seq, ntok, target, config.normalisation)
        logp_out[rows] = logp.double().numpy()
        for i, cands, p in zip(rows, rows_cands, pred.tolist()):
            predicted[i] = cands[p]
    correct = np.array([p == y for p, y in zip(predicted, labels)], dtype=bool)
    return LabelScores(logp=logp_out, predicted=predicted, correct=correct, n_truncated=n_cut)
