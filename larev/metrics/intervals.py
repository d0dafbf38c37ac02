"""A bootstrap interval of a mean from scipy.stats.bootstrap (BCa), with the cases scipy leaves undefined made
explicit: a constant sample gives the constant, fewer than two values give NaN."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats


def mean_interval(values: np.ndarray, *, level: float = 0.95, n_boot: int = 2000,
                  seed: int = 0) -> tuple[float, float]:
    """BCa bootstrap interval of mean(values) over the values (resampled with replacement); NaN values are left
    out first."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size < 2:
        return float("nan"), float("nan")
    if np.ptp(values) == 0:
        return float(values[0]), float(values[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.bootstrap((values,), np.mean, n_resamples=n_boot, confidence_level=level, method="BCa",
                                 vectorized=True, rng=seed)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)
