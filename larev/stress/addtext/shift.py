"""How much a metric's pointwise scores move under AddText (Chen et al., "Can Rationalization Improve
Robustness?", section 4.1: a robust judgement is invariant to added extraneous text).

The input is a long score table, one row per (id, source, metric) with a `score` (larev.metrics.rev
SCORE_SCHEMA; the other columns are ignored), holding both the original rationales' scores and their
perturbed copies' under the sources `addtext_source(...)` names, "{source}+addtext-{kind}-{position}". Each
perturbed score is paired with its original's (same id, metric and original source) and

    shift = score(perturbed) - score(original)

A leakage-robust metric should give text that adds no label information a shift near 0 and never reward it:
`rise_share` is the share of pairs whose score rises by more than `tolerance` (default 1e-6, so that float
noise of re-scoring does not count as a rise: a batch of different composition can move float32 log-probs
by ~1e-7), `fall_share` the share that falls by more than it.
"""

from __future__ import annotations

import re

import polars as pl

from larev.stress.addtext.config import KINDS
from larev.stress.addtext.insert import POSITIONS
from larev.stress.addtext.perturb import SOURCE_TAG
from larev.errors import ConfigError, InputError

_SOURCE_RE = "^(.*)" + re.escape(SOURCE_TAG) + f"({'|'.join(KINDS)})-({'|'.join(POSITIONS)})$"
ALL = "all"

SHIFT_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String, "orig_source": pl.String, "addtext_kind": pl.String, "addtext_position": pl.String,
    "n": pl.UInt32, "mean_orig": pl.Float64, "mean_perturbed": pl.Float64, "mean_shift": pl.Float64,
    "rise_share": pl.Float64, "fall_share": pl.Float64,
}


def parse_addtext_sources(source: pl.Expr) -> list[pl.Expr]:
    """orig_source, addtext_kind, addtext_position parsed from a source column (null when the source is not an
    AddText one); the last "+addtext-{kind}-{position}" suffix counts."""
    return [source.str.extract(_SOURCE_RE, 1).alias("orig_source"),
            source.str.extract(_SOURCE_RE, 2).alias("addtext_kind"),
            source.str.extract(_SOURCE_RE, 3).alias("addtext_position")]


def _stats(tolerance: float) -> list[pl.Expr]:
    shift = pl.col("shift")
    return [shift.count().cast(pl.UInt32).alias("n"), pl.col("score_orig").mean().alias("mean_orig"),
            pl.col("score").mean().alias("mean_perturbed"), shift.mean().alias("mean_shift"),
            (shift > tolerance).mean().alias("rise_share"), (shift < -tolerance).mean().alias("fall_share")]


def score_shift_table(scores: pl.DataFrame | pl.LazyFrame, *, tolerance: float = 1e-6) -> pl.DataFrame:
    """Per (metric, original source, kind, position): n pairs, the mean original and perturbed scores, the mean
    shift (perturbed - original), and the shares of pairs whose score rises / falls by more than `tolerance`;
    then one row per (metric, original source) with kind and position 'all' over every pair.

    Rows are sorted by metric, original source, then kind and position in config order with 'all' last.
    InputError when a perturbed score has no original score to pair with, or a (id, source, metric) repeats.
    A null score leaves its pair out of n and of every statistic.
    """
    if not tolerance >= 0:
        raise ConfigError(f"tolerance must be >= 0, got {tolerance}")
    frame = scores.lazy().select("id", "source", "metric", pl.col("score").cast(pl.Float64)).collect()
    dup = frame.filter(pl.struct("id", "source", "metric").is_duplicated())
    if not dup.is_empty():
        r = dup.row(0, named=True)
        raise InputError(f"repeated score for id {r['id']!r}, source {r['source']!r}, metric {r['metric']!r}",
                         file="<scores>", column="id")
    tagged = frame.with_columns(parse_addtext_sources(pl.col("source"))).filter(pl.col("addtext_kind").is_not_null())
    originals = frame.select("id", pl.col("source").alias("orig_source"), "metric",
                             pl.col("score").alias("score_orig"), pl.lit(True).alias("__found"))
    pairs = tagged.join(originals, on=["id", "orig_source", "metric"], how="left")
    lost = pairs.filter(pl.col("__found").is_null())
    if not lost.is_empty():
        r = lost.row(0, named=True)
        raise InputError(f"no score of the original rationale (id {r['id']!r}, source {r['orig_source']!r}, metric "
                         f"{r['metric']!r}) for the perturbed source {r['source']!r}; score the originals too "
                         f"({lost.height} perturbed rows lack theirs)", file="<scores>", column="source")
    pairs = pairs.with_columns(shift=pl.col("score") - pl.col("score_orig"))
    keys = ["metric", "orig_source", "addtext_kind", "addtext_position"]
    per = pairs.group_by(keys).agg(_stats(tolerance))
    overall = pairs.group_by("metric", "orig_source").agg(_stats(tolerance)).with_columns(
        addtext_kind=pl.lit(ALL), addtext_position=pl.lit(ALL))
    kind_rank = {k: i for i, k in enumerate((*KINDS, ALL))}
    pos_rank = {p: i for i, p in enumerate((*POSITIONS, ALL))}
    out = pl.concat([per.select(list(SHIFT_SCHEMA)), overall.select(list(SHIFT_SCHEMA))])
    out = out.with_columns(
        __k=pl.col("addtext_kind").replace_strict(kind_rank, return_dtype=pl.Int32),
        __p=pl.col("addtext_position").replace_strict(pos_rank, return_dtype=pl.Int32))
    return out.sort("metric", "orig_source", "__k", "__p").drop("__k", "__p").cast(SHIFT_SCHEMA)


def per_kind(shift: pl.DataFrame) -> pl.DataFrame:
    """The shift table over positions: one row per (metric, original source, kind), kind 'all' included, in the
    table's order. Each statistic is the pair-weighted mean of its positions' rows, i.e. the figure over all
    pairs of that kind; null where a kind has no pair."""
    n = pl.col("n").sum()

    def weighted(column: str) -> pl.Expr:
        return pl.when(n > 0).then((pl.col(column) * pl.col("n")).sum() / n).alias(column)

    return shift.group_by("metric", "orig_source", "addtext_kind", maintain_order=True).agg(
        n.alias("n"), *[weighted(c) for c in ("mean_orig", "mean_perturbed", "mean_shift", "rise_share",
                                               "fall_share")])
