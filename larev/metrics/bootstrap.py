"""Paired bootstrap confidence intervals for aggregate scores, separations and their SUM (none of the papers
reports them).

Resampling unit: the test example. One resample draws n example ids with replacement and every rationale source
of every metric is re-aggregated on the same draw, so a separation (gold minus a degraded variant, computed on
the same examples) gets a paired interval. Aggregates follow `larev.metrics.scores.summarise`: each metric's rows
name their aggregate kind (the mean pointwise score, or LAS's macro-average over leaking and non-leaking
rationales, NaN when a resample has an empty group). Intervals are percentile intervals over `n_boot` resamples,
ignoring NaN resamples; the `nan_share` column says how many were NaN.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.metrics.scores import DEGRADED, THESIS_DEGRADED, leak_macro_average, with_aggregate_kind

CI_COLUMNS = ["metric", "quantity", "estimate", "ci_low", "ci_high", "nan_share", "n"]


def resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, n] how many times each example is drawn in each resample."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)


def weighted_aggregate(counts: np.ndarray, values: np.ndarray, leaks: np.ndarray | None = None,
                       present: np.ndarray | None = None) -> np.ndarray:
    """Aggregate per resample (rows of `counts`): the weighted mean, or LAS's macro-average when `leaks` is given,
    over the examples where `present` (default: all; a variant such as `borrowed` can lack some examples)."""
    has = np.ones_like(values) if present is None else present.astype(np.float64)
    values = np.where(has > 0, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if leaks is None:
            return counts @ values / (counts @ has)
    lk = leaks.astype(np.float64) * has
    return leak_macro_average(counts @ (values * lk), counts @ lk, counts @ (values * (has - lk)), counts @ (has - lk))


def percentile_interval(samples: np.ndarray, level: float) -> tuple[float, float, float]:
    """(low, high, nan_share): the central `level` percentile interval of the resampled values, ignoring the NaN
    ones (NaN bounds when every one is NaN), and the share that was NaN."""
    finite = samples[~np.isnan(samples)]
    nan_share = 1.0 - finite.size / samples.size
    if finite.size == 0:
        return float("nan"), float("nan"), nan_share
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high), nan_share


def _interval(estimate: float, boot: np.ndarray, level: float) -> tuple[float, float, float]:
    low, high, nan_share = percentile_interval(boot, level)
    if np.isnan(estimate):
        return float("nan"), float("nan"), nan_share
    return low, high, nan_share


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
        leaks_wide = None
        if part["aggregate"][0] == "leak_macro":
            leaks_wide = part.pivot(on="source", index="id", values="leaks").sort("id").join(
                wide.select("id"), on="id", how="semi").sort("id")
        n = wide.height
        if n == 0:
            continue
        counts = resample_counts(n, n_boot, seed)
        ones = np.ones((1, n))
        full, boot = {}, {}
        for s in present:
            has = wide[s].is_not_null().to_numpy()
            values = wide[s].fill_null(0.0).to_numpy().astype(np.float64)
            leaks = leaks_wide[s].fill_null(False).to_numpy().astype(bool) if leaks_wide is not None else None
            full[s] = float(weighted_aggregate(ones, values, leaks, has)[0])
            boot[s] = weighted_aggregate(counts, values, leaks, has)
        quantities = [(s, full[s], boot[s]) for s in present]
        pairs = [d for d in degraded if d in present]
        for d in pairs:
            quantities.append((f"{reference}-{d}", full[reference] - full[d], boot[reference] - boot[d]))
        summed = [d for d in pairs if d in THESIS_DEGRADED] if reference == "gold" else pairs
        if summed:  # SUM: the thesis's three separations (larev.metrics.scores.separations)
            quantities.append(("SUM", sum(full[reference] - full[d] for d in summed),
                               sum(boot[reference] - boot[d] for d in summed)))
        for name, estimate, samples in quantities:
            low, high, nan_share = _interval(estimate, samples, level)
            rows.append({"metric": metric, "quantity": name, "estimate": estimate, "ci_low": low, "ci_high": high,
                         "nan_share": nan_share, "n": n})
    return pl.DataFrame(rows, schema={"metric": pl.String, "quantity": pl.String, "estimate": pl.Float64,
                                      "ci_low": pl.Float64, "ci_high": pl.Float64, "nan_share": pl.Float64,
                                      "n": pl.Int64})
