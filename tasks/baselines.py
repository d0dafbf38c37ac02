"""Vacuous baseline rationales b for every (example, gold label), and the rationale variants to score."""

from __future__ import annotations

import polars as pl

import larev.data.variants as variants
from larev.baselines.build import build_baselines
from larev.config import BaselineConfig
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_table
from tasks.data import examples_in_test_split


@larev_task("baselines")
def make_baselines(store: ArtifactStore, examples: ArtifactRef, config: BaselineConfig,
                   progress: bool = True) -> ArtifactRef:
    """id, label, baseline, baseline_backend for every example, with its gold label."""
    ex = store.read_parquet(examples.key)
    b = build_baselines(ex, config, progress=progress)
    return put_table(store, "baselines.parquet", b.with_columns(label=ex["label"]).select(
        "id", "label", "baseline", "baseline_backend"))


@larev_task("variants")
def make_rationale_variants(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef,
                            names: list[str], user_rationales: ArtifactRef | None = None) -> ArtifactRef:
    """The test split's rationale variants (gold, leaky, gold_leaky, vacuous), plus any user rationales."""
    ex = examples_in_test_split(store, examples)
    b = store.read_parquet(baselines.key)
    out = variants.make_variants(ex, b.filter(pl.col("id").is_in(ex["id"].implode())), tuple(names))
    if user_rationales is not None:
        out = variants.combine_rationale_sets(out, store.read_parquet(user_rationales.key))
    return put_table(store, "rationales.parquet", out)
