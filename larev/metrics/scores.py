"""The score contract every metric writes, and how scores are aggregated and compared.

One row per (id, source, metric): both log-probabilities (or the proxies' for the accuracy metrics), the
pointwise score, each evaluator's prediction and correctness, LAS's leakage indicator, and `aggregate`: how the
metric's pointwise scores become one number per source. Two kinds:

  mean        the mean pointwise score: REV eq. 6, LAREV eq. 4.4, RORA eq. 10, RQ
  leak_macro  LAS (Hase et al. 2020): the mean over rationales that leak their label and the mean over the
              others, macro-averaged; NaN when either group is empty (as in RORA's table 2)

`summarise` (per source) and the bootstrap (larev/metrics/bootstrap.py) read the kind from the rows, so a new
metric only writes rows of this schema; `leak_macro_average` is the one implementation of LAS's aggregate.

What a score says (`summarise`, per metric and source, beside the aggregate): the reading evaluator's accuracy
against chance (mean 1/K over the rows, K = `n_labels`) and whether it reads the variant at all (`reads`: accuracy
outside chance +- a 95 % binomial margin); `below_chance`, the share of rows where it gives the label less than a
uniform guess, log p_with < log(1/K); `score_clipped`, the aggregate with log p_with clipped below at log(1/K)
(a confidently wrong reading then counts as no reading; only for scores that are log-probability differences);
and `score_vs_empty`, the score minus the same metric's score on the `empty` variant (no rationale): its zero point.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.data.variants import THESIS_VARIANTS, VARIANTS
from larev.stats import binomial_margin

# Separations are gold minus each of the other built-in variants (best to worst expected); SUM adds the thesis's
# three (table 5.10), so it stays comparable with the thesis.
DEGRADED = tuple(v for v in VARIANTS if v != "gold")
THESIS_DEGRADED = tuple(v for v in THESIS_VARIANTS if v != "gold")
AGGREGATES = ("mean", "leak_macro")
ZERO_POINT = "empty"  # the variant every score is read against (score_vs_empty)
CONTROL_PREFIX = "control_"  # LAREV's controls (larev.controls) score as metrics named control_NAME
READS_Z = 1.96  # `reads`: accuracy outside chance +- READS_Z binomial standard errors

SCORE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String, "source": pl.String, "metric": pl.String, "label": pl.String, "logp_with": pl.Float64,
    "logp_base": pl.Float64, "score": pl.Float64, "pred_with": pl.String, "pred_base": pl.String,
    "correct_with": pl.Boolean, "correct_base": pl.Boolean,
    "leaks": pl.Boolean,  # LAS's leakage indicator (null for the other metrics)
    "aggregate": pl.String,  # one of AGGREGATES
    "n_labels": pl.Int32,  # K, the size of the label set the log-probabilities are normalised over
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
    missing = [c for c in ("n_labels", "logp_with", "logp_base") if c not in names]
    if missing:  # n_labels: written before it existed; the chance figures are then unknown (null)
        lazy = lazy.with_columns([pl.lit(None, SCORE_SCHEMA[c]).alias(c) for c in missing])
    return lazy


def n_labels_of(candidates: list) -> pl.Series:
    """The score table's n_labels column from each row's label set."""
    return pl.Series("n_labels", [len(c) for c in candidates], dtype=pl.Int32)


SUMMARY_COLUMNS = ["metric", "source", "score", "accuracy_with", "accuracy_base", "n", "leak_rate", "chance", "reads",
                   "below_chance", "score_clipped", "score_vs_empty"]


def summarise(scores: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Per (metric, source): the aggregate score (by the rows' aggregate kind), the evaluators' accuracies, the
    row count, the share of leaking rationales (null where no row carries the indicator), and what the score says
    (module docstring): chance, reads, below_chance, score_clipped, score_vs_empty. A LazyFrame (a scan of a score
    table too big for memory) is aggregated by polars' streaming engine."""
    leaks = pl.col("leaks")
    log_chance = -pl.col("n_labels").cast(pl.Float64).log()  # log(1/K)
    difference = pl.col("logp_with") - pl.col("logp_base")
    sums = (with_aggregate_kind(scores).group_by("metric", "source", maintain_order=True)
            .agg(kind=pl.col("aggregate").first(), mean=pl.col("score").mean(),
                 sum_leaking=pl.col("score").filter(leaks).sum(), n_leaking=leaks.sum(),
                 sum_other=pl.col("score").filter(~leaks).sum(), n_other=(~leaks).sum(),
                 accuracy_with=pl.col("correct_with").mean(), accuracy_base=pl.col("correct_base").mean(),
                 n=pl.len(), leak_rate=leaks.cast(pl.Float64).mean(),
                 chance=(1 / pl.col("n_labels").cast(pl.Float64)).mean(),
                 below_chance=(pl.col("logp_with") < log_chance).cast(pl.Float64).mean(),
                 clipped=(pl.max_horizontal(pl.col("logp_with"), log_chance) - pl.col("logp_base")).mean(),
                 is_difference=((pl.col("score") - difference).abs() <= 1e-9).all())
            .sort("metric", "source")
            .collect(engine="streaming"))
    unknown = sorted(set(sums["kind"].drop_nulls()) - set(AGGREGATES))
    if unknown:
        raise ValueError(f"unknown aggregate kind(s) {unknown} in the scores; known: {list(AGGREGATES)}")
    las = leak_macro_average(sums["sum_leaking"].to_numpy(), sums["n_leaking"].fill_null(0).to_numpy(),
                             sums["sum_other"].to_numpy(), sums["n_other"].fill_null(0).to_numpy())
    score = np.where(sums["kind"].to_numpy() == "leak_macro", las, sums["mean"].to_numpy())
    reads = [None if acc is None or p is None else abs(acc - p) > binomial_margin(p, n, READS_Z)
             for acc, p, n in zip(sums["accuracy_with"], sums["chance"], sums["n"])]
    out = sums.with_columns(
        score=pl.Series(score, dtype=pl.Float64), reads=pl.Series(reads, dtype=pl.Boolean),
        # eq. 5 / 10 with log p_with clipped at log(1/K): defined where the score is that difference
        score_clipped=pl.when((pl.col("kind") == "mean") & pl.col("is_difference") & pl.col("chance").is_not_null())
        .then(pl.col("clipped")).otherwise(None))
    zero = out.filter(pl.col("source") == ZERO_POINT).select("metric", zero_score=pl.col("score"))
    out = out.join(zero, on="metric", how="left", maintain_order="left").with_columns(
        score_vs_empty=pl.col("score") - pl.col("zero_score"))
    return out.select(SUMMARY_COLUMNS)


def separations(summary: pl.DataFrame, metric: str, reference: str = "gold",
                degraded: tuple[str, ...] = DEGRADED) -> dict[str, float]:
    """gold minus each degraded variant's aggregate score; SUM over the thesis's three (leaky, gold_leaky,
    vacuous: its table 5.10) and, when the summary says which variants the evaluator reads, SUM_read over those
    of the three it reads (a separation from a variant read at chance says the evaluator cannot read it, not
    that the metric ranks it below gold)."""
    part = summary.filter(pl.col("metric") == metric)
    by_source = dict(part.select("source", "score").iter_rows())
    if reference not in by_source:
        return {}
    out = {f"{reference}-{d}": by_source[reference] - by_source[d] for d in degraded if d in by_source}
    thesis = [f"{reference}-{d}" for d in THESIS_DEGRADED if f"{reference}-{d}" in out]
    if thesis:
        out["SUM"] = sum(out[k] for k in thesis)
        reads = dict(part.select("source", "reads").iter_rows()) if "reads" in part.columns else {}
        if all(reads.get(d) is not None for d in THESIS_DEGRADED if f"{reference}-{d}" in out):
            out["SUM_read"] = sum(out[f"{reference}-{d}"] for d in THESIS_DEGRADED
                                  if f"{reference}-{d}" in out and reads.get(d))
    return out


def unread_variants(summary: pl.DataFrame, metric: str) -> list[str]:
    """The built-in variants the metric's reading evaluator reads at chance (`reads` false): their separations are
    flagged, not counted."""
    if "reads" not in summary.columns:
        return []
    part = summary.filter((pl.col("metric") == metric) & pl.col("source").is_in(VARIANTS) & (pl.col("reads").not_()))
    return [v for v in VARIANTS if v in set(part["source"])]
