"""Where a run's examples come from: the demo generator, local files, or a Hugging Face dataset.

`load_data(DataConfig)` returns one canonical examples frame holding the train, validation and test splits.
Row slices (`train_rows="0:8000"`) let one file serve as both train and test source without copying it.
"""

from __future__ import annotations

import logging
from typing import Literal

import polars as pl
from pydantic import Field, model_validator

from larev.config import DemoDataConfig, _Config
from larev.errors import ConfigError, InputError
from larev.schema import validate_examples

log = logging.getLogger(__name__)


class DataConfig(_Config):
    """The examples of a run."""

    source: Literal["demo", "files", "hub"] = Field("demo", description="demo generator, local files, or HF hub")
    demo: DemoDataConfig = Field(default_factory=DemoDataConfig, description="demo generator settings")
    task: Literal["nli", "qa"] | None = Field(None, description="files/hub: the task (checked against the data)")
    train: str | None = Field(None, description="files: training examples (.parquet, .jsonl, .csv)")
    test: str | None = Field(None, description="files: test examples to score")
    validation: str | None = Field(None, description="files: validation examples (else carved from train)")
    train_rows: str | None = Field(None, description="files: python-style row slice of the train file, e.g. ':8000'")
    test_rows: str | None = Field(None, description="files: row slice of the test file, e.g. '8000:'")
    column_map: dict[str, str] = Field(default_factory=dict, description="file column -> canonical column")
    hub_name: str | None = Field(None, description="hub: esnli, ecqa, cos_e or strategyqa")
    hub_limit: int | None = Field(None, ge=1, description="hub: at most this many rows per split")
    validation_fraction: float = Field(0.1, gt=0, lt=0.5, description="share of train held out for validation")
    split_seed: int = Field(0, description="seed of the train/validation carve-out")

    @model_validator(mode="after")
    def _complete(self):
        if self.source == "files" and not (self.train and self.test):
            raise ValueError("source='files' needs both train and test paths")
        if self.source == "hub" and not self.hub_name:
            raise ValueError("source='hub' needs hub_name")
        for name in ("train_rows", "test_rows"):
            value = getattr(self, name)
            if value is not None:
                parse_slice(value)
        return self


def parse_slice(text: str) -> slice:
    """'0:8000' / ':8000' / '8000:' -> slice; anything else is a ConfigError."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        start, stop = (int(p) if p.strip() else None for p in parts)
    except ValueError:
        raise ConfigError(f"row slice {text!r} is not of the form 'start:stop' (e.g. ':8000' or '8000:')") from None
    return slice(start, stop)


def carve_validation(train: pl.DataFrame, fraction: float, seed: int) -> pl.DataFrame:
    """Mark a seeded `fraction` of the train rows as split='validation' (at least one row), whole groups at a time:
    NLI rows that share a premise go to the same side. SNLI pairs each premise with one hypothesis per label, so a
    row-level carve puts a validation premise's other two pairs, with the other two labels, in training; a probe on
    x then reads the premise as evidence for the wrong labels (below chance: docs/defaults.md#shared-training),
    which makes it a useless reference for the residual-leakage checks. Other rows are their own group."""
    n_val = max(1, round(train.height * fraction))
    premise = pl.col("premise").str.strip_chars().str.to_lowercase() if "premise" in train.columns else None
    key = pl.col("id") if premise is None else (
        pl.when((pl.col("task") == "nli") & premise.is_not_null()).then(pl.lit("p:") + premise)
        .otherwise(pl.lit("id:") + pl.col("id").cast(pl.String)))
    groups = (train.select(group=key).group_by("group", maintain_order=True).len()
              .sample(fraction=1.0, seed=seed, shuffle=True))
    taken = groups.filter(pl.col("len").cum_sum().shift(1, fill_value=0) < n_val)["group"]
    return train.with_columns(
        split=pl.when(key.is_in(taken.implode())).then(pl.lit("validation")).otherwise(pl.lit("train")))


def _load_file(config: DataConfig, path: str, split: str, rows: str | None, *, training: bool) -> pl.DataFrame:
    from larev.data.files import load_examples_file

    df = load_examples_file(path, task=config.task, column_map=config.column_map or None, split=split,
                            require_rationale=True, drop_empty_rationales=True)
    if rows is not None:
        df = df[parse_slice(rows)]
        if df.is_empty():
            raise InputError(f"the row slice {rows!r} selects no rows", file=path)
    return df.with_columns(split=pl.lit(split))


def load_data(config: DataConfig) -> pl.DataFrame:
    """All examples of a run in canonical form, with splits train / validation / test."""
    if config.source == "demo":
        from larev.data.demo import generate_demo

        return generate_demo(config.demo)
    if config.source == "hub":
        from larev.data.hub import load_hub_dataset

        parts = []
        for split in ("train", "validation", "test"):
            part = load_hub_dataset(config.hub_name, split=split, limit=config.hub_limit)
            parts.append(part.with_columns(split=pl.lit(split)))
        return validate_examples(pl.concat(parts), file=f"hub:{config.hub_name}", task=config.task)
    parts = {"train": (config.train, _load_file(config, config.train, "train", config.train_rows, training=True))}
    if config.validation:
        parts["validation"] = (config.validation,
                               _load_file(config, config.validation, "validation", None, training=True))
    parts["test"] = (config.test, _load_file(config, config.test, "test", config.test_rows, training=False))
    _check_splits_disjoint(parts)
    train = parts["train"][1]
    if config.validation:
        train = pl.concat([train, parts["validation"][1]])
    else:
        train = carve_validation(train, config.validation_fraction, config.split_seed)
    both = pl.concat([train, parts["test"][1]])
    return validate_examples(both, file=f"{config.train} + {config.test}", task=config.task)


def _check_splits_disjoint(parts: dict[str, tuple[str, pl.DataFrame]]) -> None:
    """An id may appear in one split's file only; the error names the id, both splits and the later file."""
    seen: dict[str, str] = {}
    for split, (file, frame) in parts.items():
        clash = frame.filter(pl.col("id").is_in(list(seen))).head(1)
        if not clash.is_empty():
            id_ = clash["id"][0]
            raise InputError(f"id {id_!r} appears in both the {seen[id_]} and the {split} data; the splits must not "
                             f"overlap", file=file, column="id")
        seen.update(dict.fromkeys(frame["id"].to_list(), split))
