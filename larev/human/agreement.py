"""How well a score agrees with human judgements: rank correlations and within-instance pairwise agreement, with
bootstrap intervals over instances (the resampling unit: one draw takes an instance with all its explanations).

  spearman(x, y)         Pearson correlation of average ranks (ties share their mean rank)
  kendall_tau_b(x, y)    (concordant - discordant) / sqrt((n0 - ties_x) (n0 - ties_y)), n0 = n (n - 1) / 2
  pairwise_credit        for two explanations of one instance that people rank differently: 1 when the score
                         orders them the same way, 1/2 when it ties them, 0 otherwise

Pure numpy and polars; the `human` flow (flows/human.py) feeds it a run's scores.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.metrics.bootstrap import percentile_interval, resample_counts


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of x, ties given the mean of the ranks they span."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sorted_x = x[order]
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or sorted_x[end] != sorted_x[start]:
            ranks[order[start:end]] = (start + end + 1) / 2  # mean of ranks start+1 .. end
            start = end
    return ranks


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denominator = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denominator) if denominator > 0 else float("nan")


def spearman(x, y) -> float:
    """Spearman's rho; NaN when either side is constant or there are fewer than 2 points."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return float("nan")
    return _pearson(average_ranks(x), average_ranks(y))


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b over all pairs (O(n^2) memory: meant for a few thousand points); NaN when undefined."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = len(x)
    if n < 2:
        return float("nan")
    upper = np.triu_indices(n, k=1)
    dx = np.sign(x[:, None] - x[None, :])[upper]
    dy = np.sign(y[:, None] - y[None, :])[upper]
    n0 = len(dx)
    ties_x, ties_y = int((dx == 0).sum()), int((dy == 0).sum())
    denominator = np.sqrt(float(n0 - ties_x) * float(n0 - ties_y))
    return float((dx * dy).sum() / denominator) if denominator > 0 else float("nan")


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
    """{"accuracy", "ci": [lo, hi], "pairs"} from `pairwise_credits`; the interval resamples instances."""
    credit, pairs = credits["credit"].to_numpy(), credits["pairs"].to_numpy().astype(np.float64)
    total = pairs.sum()
    accuracy = float(credit.sum() / total) if total else float("nan")
    ci = [float("nan"), float("nan")]
    if total and n_boot > 0:
        counts = resample_counts(len(credit), n_boot, seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (counts @ credit) / (counts @ pairs)
        ci = list(percentile_interval(boot, level)[:2])
    return {"accuracy": accuracy, "ci": ci, "pairs": int(total)}


def spearman_interval(frame: pl.DataFrame, score: str, target: str, *, n_boot: int = 1000, seed: int = 0,
                      level: float = 0.95) -> list[float]:
    """Percentile interval of Spearman's rho between `score` and `target` over resampled instances (`id`): each
    resample takes instances with replacement, every row of a drawn instance as often as it is drawn."""
    if n_boot <= 0:
        return [float("nan"), float("nan")]
    ids = frame["id"].unique(maintain_order=True)
    index = {k: i for i, k in enumerate(ids.to_list())}
    owner = np.array([index[k] for k in frame["id"].to_list()])
    s, t = frame[score].to_numpy().astype(np.float64), frame[target].to_numpy().astype(np.float64)
    rng = np.random.default_rng(seed)
    boot = np.empty(n_boot)
    for b in range(n_boot):
        drawn = np.bincount(rng.integers(0, len(ids), len(ids)), minlength=len(ids))
        rows = np.repeat(np.arange(len(s)), drawn[owner])
        boot[b] = spearman(s[rows], t[rows])
    return list(percentile_interval(boot, level)[:2])
