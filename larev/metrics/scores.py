"""The score contract every metric writes, and how scores are aggregated and compared.

One row per (id, source, metric): both log-probabilities (or the proxies' for the accuracy metrics), the
pointwise score, each evaluator's prediction and correctness, LAS's leakage indicator, and `aggregate`: how the
metric's pointwise scores become one number per source. Two kinds:

  mean        the mean pointwise score: REV eq. 6, LAREV eq. 4.4, RORA eq. 10, RQ
  leak_macro  LAS (Hase et al. 2020): the mean over rationales that leak their label and the mean over the
              others, macro-averaged; NaN when either group is empty (as in RORA's table 2)

`summarise` (per source) and the bootstrap (larev/metrics/bootstrap.py) read the kind from the rows, so a new
metric only writes rows of this schema; `leak_macro_average` is the one implementation of LAS's aggregate.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.data.variants import VARIANTS

# Separations are gold minus each of the other built-in variants (best to worst expected).
DEGRADED = tuple(v for v in VARIANTS if v != "gold")
AGGREGATES = ("mean", "leak_macro")

SCORE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String, "source": pl.String, "metric": pl.String, "label": pl.String, "logp_with": pl.Float64,
    "logp_base": pl.Float64, "score": pl.Float64, "pred_with": pl.String, "pred_base": pl.String,
    "correct_with": pl.Boolean, "correct_base": pl.Boolean,
    "leaks": pl.Boolean,  # LAS's leakage indicator (null for the other metrics)
    "aggregate": pl.String,  # one of AGGREGATES
}
SCORE_COLUMNS = list(SCORE_SCHEMA)


def leak_macro_average(sum_leaking, n_leaking, sum_other, n_other):
    """LAS's aggregate from per-group sums and counts (scalars or arrays of resamples):
    (sum_leaking / n_leaking + sum_other / n_other) / 2, NaN where a group is empty."""
    sum_leaking, n_leaking = np.asarray(sum_leaking, dtype=np.float64), np.asarray(n_leaking, dtype=np.float64)
    sum_other, n_other = np.asarray(sum_other, dtype=np.float64), np.asarray(n_other, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (sum_leaking / n_leaking + sum_other / n_other) / 2
    return np.where((n_leaking > 0) & (n_other > 0), out, np.nan)


def with_aggregate_kind(scores: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """`scores` with the `leaks` and `aggregate` columns present; a table without `aggregate` (written before it
    existed) is read as: leak_macro where the rows carry a leakage indicator, else mean."""
    lazy = scores.lazy()
    names = lazy.collect_schema().names()
    if "leaks" not in names:
        lazy = lazy.with_columns(leaks=pl.lit(None, pl.Boolean))
    if "aggregate" not in names:
        lazy = lazy.with_columns(aggregate=pl.when(pl.col("leaks").is_not_null()).then(pl.lit("leak_macro"))
                                 .otherwise(pl.lit("mean")))
    return lazy


def summarise(scores: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Per (metric, source): the aggregate score (by the rows' aggregate kind), the evaluators' accuracies, the
    row count, and the share of leaking rationales (null where no row carries the indicator). A LazyFrame (a scan
    of a score table too big for memory) is aggregated by polars' streaming engine."""
    leaks = pl.col("leaks")
    sums = (with_aggregate_kind(scores).group_by("metric", "source", maintain_order=True)
            .agg(kind=pl.col("aggregate").first(), mean=pl.col("score").mean(),
                 sum_leaking=pl.col("score").filter(leaks).sum(), n_leaking=leaks.sum(),
                 sum_other=pl.col("score").filter(~leaks).sum(), n_other=(~leaks).sum(),
                 accuracy_with=pl.col("correct_with").mean(), accuracy_base=pl.col("correct_base").mean(),
                 n=pl.len(), leak_rate=leaks.cast(pl.Float64).mean())
            .sort("metric", "source")
            .collect(engine="streaming"))
    unknown = sorted(set(sums["kind"].drop_nulls()) - set(AGGREGATES))
    if unknown:
        raise ValueError(f"unknown aggregate kind(s) {unknown} in the scores; known: {list(AGGREGATES)}")
    las = leak_macro_average(sums["sum_leaking"].to_numpy(), sums["n_leaking"].fill_null(0).to_numpy(),
                             sums["sum_other"].to_numpy(), sums["n_other"].fill_null(0).to_numpy())
    score = np.where(sums["kind"].to_numpy() == "leak_macro", las, sums["mean"].to_numpy())
    return sums.with_columns(score=pl.Series(score, dtype=pl.Float64)).select(
        "metric", "source", "score", "accuracy_with", "accuracy_base", "n", "leak_rate")


def separations(summary: pl.DataFrame, metric: str, reference: str = "gold",
                degraded: tuple[str, ...] = DEGRADED) -> dict[str, float]:
    """gold minus each degraded variant's aggregate score, and their SUM (the LAREV thesis's table 5.10 layout)."""
    by_source = dict(summary.filter(pl.col("metric") == metric).select("source", "score").iter_rows())
    if reference not in by_source:
        return {}
    out = {f"{reference}-{d}": by_source[reference] - by_source[d] for d in degraded if d in by_source}
    if out:
        out["SUM"] = sum(out.values())
    return out
