"""Score rationales with the trained evaluators."""

from __future__ import annotations

import polars as pl

import larev.formats as formats
import larev.metrics.rev as rev
import larev.models.evaluator as evaluator_mod
from larev.baselines.build import build_baselines
from larev.config import BaselineConfig, ScoreConfig
from larev.models.evaluator import load_evaluator
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.common import larev_task, put_table


def baselines_for(store: ArtifactStore, examples: pl.DataFrame, baselines: ArtifactRef, rationales: pl.DataFrame,
                  config: BaselineConfig) -> pl.DataFrame:
    """Baselines for every (id, label) among the rationales: the stored gold-label ones, plus any label a
    rationale file asserts that is not the gold one (b states the label being evaluated)."""
    known = store.read_parquet(baselines.key).select("id", "label", "baseline")
    wanted = rationales.select("id", "label").unique()
    missing = wanted.join(known, on=["id", "label"], how="anti")
    if missing.is_empty():
        return known
    rows = examples.drop("label").join(missing, on="id", how="inner")
    extra = build_baselines(rows, config, progress=False).with_columns(label=rows["label"])
    return pl.concat([known, extra.select("id", "label", "baseline")])


@larev_task("score", code=(rev, evaluator_mod, formats), task_run_name="score-{metric}")
def score_metric(store: ArtifactStore, metric: str, phi: ArtifactRef, phi_base: ArtifactRef, rationales: ArtifactRef,
                 examples: ArtifactRef, baselines: ArtifactRef, baseline_config: BaselineConfig,
                 score: ScoreConfig, device: str = "auto", progress: bool = True) -> ArtifactRef:
    """Pointwise scores (REV eq. 5; LAREV eq. 4.4 when phi is phi_LA) for every rationale, with both
    evaluators' predictions."""
    ex = store.read_parquet(examples.key)
    rat = store.read_parquet(rationales.key)
    b = baselines_for(store, ex, baselines, rat, baseline_config)
    g_prime = load_evaluator(store.get_dir(phi.key), device=device)
    g = load_evaluator(store.get_dir(phi_base.key), device=device)
    scores = rev.score_rev(g_prime, g, rat, ex, b, score, metric=metric, progress=progress)
    return put_table(store, "scores.parquet", scores)
