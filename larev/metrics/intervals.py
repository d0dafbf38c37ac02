"""Bootstrap intervals from scipy.stats.bootstrap, with the cases scipy leaves undefined made explicit.

  bootstrap_interval   any statistic of one or more paired samples: BCa, or percentile for a statistic that can be
                       NaN on a resample (its NaN resamples are then left out and counted); a statistic that does
                       not vary over resamples gets the zero-width interval at its value (BCa is undefined there)
  mean_interval        the BCa interval of a mean
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats

JACKKNIFE_BATCH = 256  # BCa's jackknife in batches of this many leave-one-out samples (memory: batch x n)


def bootstrap_interval(data: tuple[np.ndarray, ...], statistic, estimate: float, *, percentile: bool = False,
                       level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(low, high, nan_share) of `statistic(*data, axis=-1)` over paired resamples of the samples' positions.
    NaN bounds when `estimate` is NaN, below 2 positions or with n_boot 0."""
    if data[0].shape[-1] < 2 or n_boot <= 0:
        return float("nan"), float("nan"), 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate BCa (a constant statistic) is handled below
        result = stats.bootstrap(data, statistic, paired=True, vectorized=True, n_resamples=n_boot,
                                 confidence_level=level, method="percentile" if percentile else "BCa", rng=seed,
                                 batch=JACKKNIFE_BATCH)
    samples = np.asarray(result.bootstrap_distribution, dtype=np.float64)
    finite = samples[~np.isnan(samples)]
    nan_share = 1.0 - finite.size / samples.size
    if np.isnan(estimate) or finite.size == 0:
        return float("nan"), float("nan"), nan_share
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if np.isnan(low) or np.isnan(high):
        if np.ptp(finite) == 0:
            return float(finite[0]), float(finite[0]), nan_share
        tail = (1.0 - level) / 2 * 100  # NaN resamples: the percentile interval of the others
        low, high = (float(v) for v in np.percentile(finite, [tail, 100 - tail]))
    return low, high, nan_share


def mean_interval(values: np.ndarray, *, level: float = 0.95, n_boot: int = 2000,
                  seed: int = 0) -> tuple[float, float]:
    """BCa bootstrap interval of mean(values) over the values; NaN values are left out first."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size < 2:
        return float("nan"), float("nan")
    low, high, _ = bootstrap_interval((values,), np.mean, float(values.mean()), level=level, n_boot=n_boot,
                                      seed=seed)
    return low, high
