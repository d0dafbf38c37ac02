"""How well a score agrees with human judgements: rank correlations and within-instance pairwise agreement, with
bootstrap intervals over instances (the resampling unit: one draw takes an instance with all its explanations).

  spearman(x, y)         scipy.stats.spearmanr: Pearson correlation of average ranks (ties share their mean rank)
  kendall_tau_b(x, y)    scipy.stats.kendalltau, variant b: (concordant - discordant) /
                         sqrt((n0 - ties_x) (n0 - ties_y)), n0 = n (n - 1) / 2
  pairwise_credit        for two explanations of one instance that people rank differently: 1 when the score
                         orders them the same way, 1/2 when it ties them, 0 otherwise
  intervals              scipy.stats.bootstrap over instances: BCa for the pairwise accuracy (a ratio of sums
                         over instances) and for one scorer's minus another's on the same draws (paired),
                         percentile for Spearman's rho (its statistic re-ranks each resample's rows)

Polars, numpy and scipy; the `human` flow (flows/human.py) feeds it a run's scores.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
from scipy import stats

from larev.metrics.intervals import bootstrap_interval


def spearman(x, y) -> float:
    """Spearman's rho; NaN when either side is constant or there are fewer than 2 points."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return float(stats.spearmanr(x, y).statistic)


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b; NaN when undefined (a constant side, fewer than 2 points)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.kendalltau(x, y, variant="b").statistic)


def pairwise_credits(frame: pl.DataFrame, score: str, target: str) -> pl.DataFrame:
    """Per instance `id`: the summed credit and the number of pairs of its rows whose `target` differs (only those
    pairs count): credit 1 when `score` orders the pair as `target` does, 1/2 on a score tie, 0 otherwise.
    Returns id, credit, pairs (instances without such a pair included, with 0 pairs)."""
    rows = []
    for (instance,), part in frame.select("id", score, target).group_by("id", maintain_order=True):
        s, t = part[score].to_numpy().astype(np.float64), part[target].to_numpy().astype(np.float64)
        i, j = np.triu_indices(len(s), k=1)
        differ = t[i] != t[j]
        ds, dt = np.sign(s[i] - s[j])[differ], np.sign(t[i] - t[j])[differ]
        credit = float(((ds == dt) & (ds != 0)).sum() + 0.5 * (ds == 0).sum())
        rows.append({"id": instance, "credit": credit, "pairs": int(differ.sum())})
    return pl.DataFrame(rows, schema={"id": pl.String, "credit": pl.Float64, "pairs": pl.Int64})


def pairwise_accuracy(credits: pl.DataFrame, *, n_boot: int = 1000, seed: int = 0,
                      level: float = 0.95) -> dict:
    """{"accuracy", "ci": [lo, hi], "pairs"} from `pairwise_credits`; the BCa interval resamples instances (an
    instance's credit and pair count together)."""
    credit, pairs = credits["credit"].to_numpy().astype(np.float64), credits["pairs"].to_numpy().astype(np.float64)
    total = pairs.sum()
    accuracy = float(credit.sum() / total) if total else float("nan")
    ci = [float("nan"), float("nan")]
    if total and n_boot > 0:
        def ratio(c, p, axis=-1):
            with np.errstate(invalid="ignore", divide="ignore"):
                return c.sum(axis=axis) / p.sum(axis=axis)

        ci = list(bootstrap_interval((credit, pairs), ratio, accuracy, level=level, n_boot=n_boot, seed=seed)[:2])
    return {"accuracy": accuracy, "ci": ci, "pairs": int(total)}


def paired_pairwise_difference(credits: pl.DataFrame, reference: pl.DataFrame, *, n_boot: int = 1000,
                               seed: int = 0, level: float = 0.95) -> dict:
    """{"difference", "ci": [lo, hi], "pairs"}: pairwise accuracy of one scorer minus another's (`reference`), both
    from `pairwise_credits` over the same explanations, on the instances both have with the same pair count, and a
    BCa interval that resamples those instances once for both (a paired comparison: what the two separate
    intervals' overlap cannot say). Difference = (sum credit - sum reference credit) / sum pairs: the pairwise
    accuracy of the per-instance credit differences, so `pairwise_accuracy` computes it and its interval."""
    both = credits.join(reference, on="id", how="inner", suffix="_ref").filter(
        (pl.col("pairs") == pl.col("pairs_ref")) & (pl.col("pairs") > 0))
    gap = pairwise_accuracy(both.select("id", credit=pl.col("credit") - pl.col("credit_ref"), pairs="pairs"),
                            n_boot=n_boot, seed=seed, level=level)
    return {"difference": gap["accuracy"], "ci": gap["ci"], "pairs": gap["pairs"]}


def spearman_interval(frame: pl.DataFrame, score: str, target: str, *, n_boot: int = 1000, seed: int = 0,
                      level: float = 0.95) -> list[float]:
    """Percentile interval of Spearman's rho between `score` and `target` over resampled instances (`id`): each
    resample takes instances with replacement, every row of a drawn instance as often as it is drawn
    (scipy.stats.bootstrap over the instances' positions; the statistic expands them to their rows)."""
    ids = frame["id"].unique(maintain_order=True)
    if n_boot <= 0 or len(ids) < 2:
        return [float("nan"), float("nan")]
    index = {k: i for i, k in enumerate(ids.to_list())}
    owner = np.array([index[k] for k in frame["id"].to_list()])
    rows_of = [np.flatnonzero(owner == i) for i in range(len(ids))]
    s, t = frame[score].to_numpy().astype(np.float64), frame[target].to_numpy().astype(np.float64)

    def rho(drawn_instances):
        rows = np.concatenate([rows_of[int(i)] for i in drawn_instances])
        return spearman(s[rows], t[rows])

    if np.isnan(spearman(s, t)):
        return [float("nan"), float("nan")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.bootstrap((np.arange(len(ids)),), rho, vectorized=False, n_resamples=n_boot,
                                 confidence_level=level, method="percentile", rng=seed)
    samples = np.asarray(result.bootstrap_distribution, dtype=np.float64)
    finite = samples[~np.isnan(samples)]  # a resample of constant ranks has no rho: left out
    if finite.size == 0:
        return [float("nan"), float("nan")]
    tail = (1.0 - level) / 2 * 100
    return [float(v) for v in np.percentile(finite, [tail, 100 - tail])]
