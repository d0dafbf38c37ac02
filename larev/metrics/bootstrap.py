"""Paired bootstrap confidence intervals for aggregate scores, separations and their SUM (none of the papers
reports them), from scipy.stats.bootstrap.

Resampling unit: the test example. `paired=True` draws n example ids with replacement and every rationale source a
quantity reads is re-aggregated on the same draw, so a separation (gold minus a degraded variant, computed on the
same examples) gets a paired interval. Aggregates follow `larev.metrics.scores.summarise`: each metric's rows name
their aggregate kind (the mean pointwise score, or LAS's macro-average over leaking and non-leaking rationales, NaN
when a resample has an empty group). Intervals are BCa (bias-corrected and accelerated) for means and their
differences; percentile for LAS's macro-average, whose resamples can be NaN (then left out; the `nan_share` column
says how many were). A quantity that does not vary over resamples (a constant paired difference) has the
zero-width interval at its value.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.metrics.intervals import bootstrap_interval
from larev.metrics.scores import DEGRADED, THESIS_DEGRADED, leak_macro_average, with_aggregate_kind

CI_COLUMNS = ["metric", "quantity", "estimate", "ci_low", "ci_high", "nan_share", "n"]


def aggregate(values: np.ndarray, present: np.ndarray, leaks: np.ndarray | None = None,
              axis: int = -1) -> np.ndarray:
    """A source's aggregate over the examples where `present` (1/0): the mean, or LAS's macro-average of the
    leaking and the non-leaking examples when `leaks` (1/0) is given. Works along `axis` (resamples x examples)."""
    values = np.where(present > 0, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if leaks is None:
            return (values * present).sum(axis=axis) / present.sum(axis=axis)
    leaking = leaks * present
    other = present - leaking
    return leak_macro_average((values * leaking).sum(axis=axis), leaking.sum(axis=axis),
                              (values * other).sum(axis=axis), other.sum(axis=axis))


def linear_quantity(arrays: dict[str, tuple[np.ndarray, ...]], weights: dict[str, float]):
    """sum_s weight_s * aggregate_s as (data, statistic) for scipy.stats.bootstrap: `arrays[s]` is source s's
    (values, present[, leaks]) over the examples, and the statistic re-aggregates each resample of them."""
    names = list(weights)
    width = len(arrays[names[0]])
    data = tuple(a for s in names for a in arrays[s])

    def statistic(*resampled, axis=-1):
        return sum(weights[s] * aggregate(*resampled[k * width:(k + 1) * width], axis=axis)
                   for k, s in enumerate(names))

    return data, statistic


def bootstrap_intervals(scores: pl.DataFrame, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                        reference: str = "gold", degraded: tuple[str, ...] = DEGRADED) -> pl.DataFrame:
    """Per metric: each source's aggregate, each `reference`-minus-degraded separation and their SUM (for gold:
    over the thesis's three, leaky / gold_leaky / vacuous), with percentile intervals (columns CI_COLUMNS). The
    examples are those with a `reference` score; a source that lacks some of them is aggregated over the ones it
    has, on the same draws (its estimate is then the summary's score)."""
    rows = []
    sources = [reference, *degraded]
    scores = with_aggregate_kind(scores).collect()
    for metric in scores["metric"].unique(maintain_order=True).to_list():
        part = scores.filter((pl.col("metric") == metric) & pl.col("source").is_in(sources))
        present = [s for s in sources if s in set(part["source"])]
        if reference not in present:
            continue
        wide = part.pivot(on="source", index="id", values="score").drop_nulls(reference).sort("id")
        macro = part["aggregate"][0] == "leak_macro"
        leaks_wide = None
        if macro:
            leaks_wide = part.pivot(on="source", index="id", values="leaks").sort("id").join(
                wide.select("id"), on="id", how="semi").sort("id")
        n = wide.height
        if n == 0:
            continue
        arrays = {}  # source -> (values, present[, leaks]) over the examples, in id order
        for s in present:
            values = wide[s].fill_null(0.0).to_numpy().astype(np.float64)
            has = wide[s].is_not_null().to_numpy().astype(np.float64)
            arrays[s] = (values, has) + ((leaks_wide[s].fill_null(False).to_numpy().astype(np.float64),)
                                         if macro else ())

        quantities = [(s, {s: 1.0}) for s in present]
        pairs = [d for d in degraded if d in present]
        quantities += [(f"{reference}-{d}", {reference: 1.0, d: -1.0}) for d in pairs]
        summed = [d for d in pairs if d in THESIS_DEGRADED] if reference == "gold" else pairs
        if summed:  # SUM: the thesis's three separations (larev.metrics.scores.separations)
            quantities.append(("SUM", {reference: float(len(summed)), **{d: -1.0 for d in summed}}))
        for name, weights in quantities:
            data, statistic = linear_quantity(arrays, weights)
            estimate = float(statistic(*data))
            low, high, nan_share = bootstrap_interval(data, statistic, estimate, percentile=macro, level=level,
                                                      n_boot=n_boot, seed=seed)
            rows.append({"metric": metric, "quantity": name, "estimate": estimate, "ci_low": low, "ci_high": high,
                         "nan_share": nan_share, "n": n})
    return pl.DataFrame(rows, schema={"metric": pl.String, "quantity": pl.String, "estimate": pl.Float64,
                                      "ci_low": pl.Float64, "ci_high": pl.Float64, "nan_share": pl.Float64,
                                      "n": pl.Int64})
