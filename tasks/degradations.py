"""The steps of `larev score --degradations` (thesis table 5.8, section 5.4.5): each source's own rationales'
degradations added to the rationale table before scoring, and the table of each source minus its degradations."""

from __future__ import annotations

import json

import polars as pl

import larev.generate.separations as separations
from larev.config import BaselineConfig
from larev.generate.degradations import with_degradations
from larev.metrics.scores import SCORE_SCHEMA
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.rev import baselines_for
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_bytes, put_table, stacked_parquet


@larev_task("degradations")
def add_degradations(store: ArtifactStore, rationales: ArtifactRef, examples: ArtifactRef, baselines: ArtifactRef,
                     baseline_config: BaselineConfig) -> ArtifactRef:
    """The rationale table followed by every source's leaky, gold_leaky and vacuous degradations (`S~leaky`, ...);
    the vacuous one is the baseline b of the row's example and label (built as the score step builds it)."""
    rat = store.read_parquet(rationales.key)
    b = baselines_for(store, store.read_parquet(examples.key), baselines, rat, baseline_config)
    return put_table(store, "rationales.parquet", with_degradations(rat, b))


@larev_task("degradation-table")
def degradation_report(store: ArtifactStore, scores: list[ArtifactRef], level: float = separations.LEVEL,
                       n_boot: int = separations.N_BOOT, seed: int = separations.SEED) -> dict[str, ArtifactRef]:
    """Table 5.8 of the scores: results.json (every figure with its interval), its section of report.md and
    degradations.png (like the thesis's figure 5.3)."""
    with stacked_parquet(store, scores, SCORE_SCHEMA) as stacked:
        table = separations.degradation_table(pl.read_parquet(stacked), level=level, n_boot=n_boot, seed=seed)
    results = separations.degradation_results(table, level=level, n_boot=n_boot, seed=seed)
    return {
        "degradation_results": put_bytes(store, "results.json", json.dumps(results, indent=2).encode(),
                                         kind="json"),
        "degradation_section": put_bytes(store, "degradations.md",
                                         separations.degradation_markdown(table, level=level).encode(), kind="text"),
        "degradation_plot": put_bytes(store, "degradations.png", separations.degradation_plot(table), kind="image"),
    }
