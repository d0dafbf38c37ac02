"""The validity criteria as functions of scores, and the bootstrap that gives them intervals over seeds and
instances.

Each figure is computed on weighted rows: a bootstrap resample of instances is a vector of counts (how often each
instance was drawn), and a row's weight is its instance's count. With integer weights every figure equals the one
computed on the resample written out row by row, so one pass over the rows sorted by score serves all resamples:

  weighted_auroc               Mann-Whitney: P(score of an acceptable > score of an unacceptable), ties 1/2; with
                               unit weights sklearn.metrics.roc_auc_score
  weighted_average_precision   sum over distinct scores, highest first, of (recall gained) x (precision there);
                               with unit weights sklearn.metrics.average_precision_score
  weighted_spearman            Pearson correlation of average ranks in the resample; with unit weights
                               scipy.stats.spearmanr
  ratio                        sum(w * numerator) / sum(w * denominator): a mean, a share, pairwise accuracy

`kendall_tau_with_order` compares figures of k items (a scorer's mean score of each generator) with a known order
of them, possibly partial: Kendall's tau over the pairs the order ranks.

`combine_seeds` averages a figure over seeds drawn with replacement, one draw per resample, so the interval covers
training variance and the sampling of instances together (protocols/validity.yaml, `bootstrap`).
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np


def _tie_groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order sorting `values` ascending, the start of each run of equal values in that order, each sorted
    position's run)."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    new = np.r_[True, v[1:] != v[:-1]]
    return order, np.flatnonzero(new), np.cumsum(new) - 1


def _as_weights(weights: np.ndarray | None, n: int) -> np.ndarray:
    return np.ones((1, n)) if weights is None else np.atleast_2d(np.asarray(weights, dtype=np.float64))


def weighted_auroc(scores, labels, weights=None) -> np.ndarray:
    """AUROC of `scores` for binary `labels` under each row of `weights` (resamples x rows); NaN without both
    classes."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    w = _as_weights(weights, len(scores))
    if len(scores) == 0:
        return np.full(w.shape[0], np.nan)
    order, starts, _ = _tie_groups(scores)
    w, y = w[:, order], labels[order]
    pos, neg = np.add.reduceat(w * y, starts, axis=1), np.add.reduceat(w * (1 - y), starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * (below + 0.5 * neg)).sum(axis=1) / (pos.sum(axis=1) * neg.sum(axis=1))


def weighted_average_precision(scores, labels, weights=None) -> np.ndarray:
    """Average precision of `scores` for binary `labels` under each row of `weights`; NaN without a positive."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    w = _as_weights(weights, len(scores))
    if len(scores) == 0:
        return np.full(w.shape[0], np.nan)
    order, starts, _ = _tie_groups(-scores)  # highest score first
    w, y = w[:, order], labels[order]
    pos, neg = np.add.reduceat(w * y, starts, axis=1), np.add.reduceat(w * (1 - y), starts, axis=1)
    tp, fp = np.cumsum(pos, axis=1), np.cumsum(neg, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        return (pos * precision).sum(axis=1) / pos.sum(axis=1)


def _weighted_ranks(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) of each row's value in the sample each weight row writes out."""
    order, starts, group = _tie_groups(values)
    sizes = np.add.reduceat(w[:, order], starts, axis=1)
    ranks_of_group = np.cumsum(sizes, axis=1) - sizes + (sizes + 1) / 2
    ranks = np.empty_like(w)
    ranks[:, order] = ranks_of_group[:, group]
    return ranks


def weighted_spearman(x, y, weights=None) -> np.ndarray:
    """Spearman's rho of x and y under each row of `weights`; NaN where either side is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w = _as_weights(weights, len(x))
    if len(x) == 0:
        return np.full(w.shape[0], np.nan)
    rx, ry = _weighted_ranks(x, w), _weighted_ranks(y, w)
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = (w * rx).sum(axis=1, keepdims=True) / total, (w * ry).sum(axis=1, keepdims=True) / total
        cov = (w * (rx - mx) * (ry - my)).sum(axis=1)
        var = (w * (rx - mx) ** 2).sum(axis=1) * (w * (ry - my) ** 2).sum(axis=1)
        rho = cov / np.sqrt(var)
    return np.where(var > 1e-12, rho, np.nan)


def ratio(numerator, denominator, weights=None) -> np.ndarray:
    """sum(w * numerator) / sum(w * denominator) under each row of `weights`."""
    numerator, denominator = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    w = _as_weights(weights, len(numerator))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ numerator) / (w @ denominator)


def kendall_tau_with_order(values, tiers=None) -> np.ndarray:
    """Kendall's tau of each row of `values` (rows x k: figures of k items) with their known order: over the pairs
    the order ranks, (pairs the figures order the same way - pairs they order the other way) / those pairs; a tie in
    the figures counts as neither. `tiers`: each item's place in the order (0 best; items sharing a place have no
    known order between them, and their pairs are not counted); default: the items as listed, best first. With a
    total order and no tied figures, scipy.stats.kendalltau's value. NaN where a row holds a NaN."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    k = values.shape[1]
    tiers = np.arange(k) if tiers is None else np.asarray(tiers)
    first, second = np.triu_indices(k, 1)
    known = tiers[first] != tiers[second]
    first_better = tiers[first] < tiers[second]
    better = np.where(first_better, first, second)[known]
    worse = np.where(first_better, second, first)[known]
    with np.errstate(invalid="ignore"):
        agreement = np.sign(values[:, better] - values[:, worse])
    tau = agreement.sum(axis=1) / max(len(better), 1)
    return np.where(np.isnan(values).any(axis=1) | (len(better) == 0), np.nan, tau)


def order_credit(first, second) -> np.ndarray:
    """1 where first > second, 1/2 on a tie, 0 otherwise (the share of instances a scorer orders as expected)."""
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    return np.where(first > second, 1.0, np.where(first == second, 0.5, 0.0))


class Draws:
    """The bootstrap draws of one criterion, the same for every scorer judged by it (paired): `instances`
    (resamples x instances: how often each instance is drawn) and `seeds` (resamples x seeds: which seed fills
    each place). Seeded by the criterion's name, so a rerun draws the same."""

    def __init__(self, name: str, n_instances: int, n_seeds: int, n_boot: int):
        self.name = name
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little"))
        self.n_boot = n_boot
        self.instances = (rng.multinomial(n_instances, np.full(n_instances, 1 / n_instances), size=n_boot)
                          .astype(np.float64) if n_instances and n_boot else np.zeros((0, n_instances)))
        self.seeds = rng.integers(n_seeds, size=(n_boot, n_seeds)) if n_boot else np.zeros((0, n_seeds), int)

    def seed_picks(self, k: int) -> np.ndarray:
        """(resamples, k) places among k seeds, each drawn uniformly: `seeds` for a scorer with every seed; a scorer
        with fewer has its own draws (seeded by the criterion's name and k), as even as the others'."""
        if k == self.seeds.shape[1]:
            return self.seeds
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{self.name}/{k}".encode()).digest()[:8], "little"))
        return rng.integers(k, size=(self.n_boot, k))

    def rows(self, instance_of_row: np.ndarray) -> np.ndarray:
        """Row weights: each row takes its instance's count."""
        return self.instances[:, instance_of_row]


def combine_seeds(per_seed: np.ndarray, draws: Draws) -> np.ndarray:
    """(resamples,) figures: per resample, the mean over its drawn seeds of each seed's figure on that resample's
    instances. `per_seed`: (seeds, resamples); one seed (a seedless baseline): its row as it is."""
    per_seed = np.atleast_2d(per_seed)
    if per_seed.shape[0] == 1:
        return per_seed[0]
    picks = draws.seed_picks(per_seed.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample where every drawn seed is NaN
        return np.nanmean(per_seed[picks, np.arange(per_seed.shape[1])[:, None]], axis=1)


def interval(samples: np.ndarray, level: float) -> tuple[float | None, float | None]:
    """Percentile interval of the finite resamples; None without any."""
    finite = np.asarray(samples, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return None, None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)
