"""Human files split by instance (protocols/validity.yaml, `human_split`): an instance is in the tune half when
the first byte of sha256(its id) is even, in the report half when it is odd. Every annotator row and explanation
of an instance lands in the same half, and an instance's half does not depend on which other rows the file has."""

from __future__ import annotations

import hashlib

import polars as pl


def in_tune_half(instance_id) -> bool:
    return hashlib.sha256(str(instance_id).encode()).digest()[0] % 2 == 0


def human_half(frame: pl.DataFrame, split: str) -> pl.DataFrame:
    """The rows of an annotation file whose instance (`id`) is in `split`'s half ('tune' or 'report')."""
    if split not in ("tune", "report"):
        raise ValueError(f"split must be 'tune' or 'report', got {split!r}")
    if "id" not in frame.columns:
        raise ValueError(f"an annotation file needs an `id` column to be split by instance; it has {frame.columns}")
    tune = frame["id"].map_elements(in_tune_half, return_dtype=pl.Boolean)
    return frame.filter(tune if split == "tune" else ~tune)
