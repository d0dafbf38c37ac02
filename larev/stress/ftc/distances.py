"""FTC's distances between a task model's predicted distribution p(y_hat_cf) and the counterfactual label y_cf.

Paper section 2.3, eq. 1: FTC = 1 - d(p(y_hat_cf), p(y_cf)), with p(y_cf) the one-hot distribution of y_cf.
Distributions are rows over the NLI labels in the order of `larev.schema.NLI_LABELS` (entailment,
contradiction, neutral); inputs may be numpy arrays, torch tensors or nested sequences; outputs are float64
numpy arrays, one value per row.

  FTC-delta  d = 1 - 1[argmax p = y_cf], so FTC-delta = 1[argmax p = y_cf] (1 when the model predicts y_cf).
  FTC-K      d = KL(p(y_cf) || p(y_hat_cf)). Our reading: footnote 19 says FTC-K is 1 minus the KL term, which is
             >= 0 without an upper bound, so FTC-K <= 1 and may be negative (tables 6 and 12 report negative
             means). With a one-hot target the other direction, KL(p_hat || one-hot), is infinite whenever p_hat
             puts mass off y_cf, so the target-first direction is the only finite one: KL(onehot(y) || p) =
             -log p[y] (natural log), i.e. FTC-K = 1 + ln p[y_cf]. p[y] is clipped to `eps` so a zero gives a
             finite (very negative) score.
  FTC-W      d = the 1-Wasserstein (earth mover's) distance with ground distance 1 between E and C and alpha
             between N and either of them (alpha = 0.7 in table 5). For alpha != 0.5 these distances are not
             positions on a line (E-N-C would need alpha + alpha = 1), so there is no 1-D closed form in general.
             Against a one-hot target the only transport plan moves all of p onto y_cf, so the distance is
             exactly sum_j p[j] * D[j, y_cf]; `wasserstein` solves the general 3x3 transport problem exactly
             (every vertex of the transport polytope, i.e. every spanning tree of the bipartite graph K(3,3), is
             enumerated), for soft targets and as a check.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from larev.schema import NLI_LABELS

DEFAULT_ALPHA = 0.7  # table 5
EPS = 1e-12
_ROW_SUM_TOLERANCE = 1e-4
_E, _C, _N = (NLI_LABELS.index(n) for n in ("entailment", "contradiction", "neutral"))


def as_probs(p: Any, name: str = "p") -> np.ndarray:
    """[n, 3] float64 rows of probabilities (a single row is promoted); ValueError when they are not."""
    if hasattr(p, "detach"):  # a torch tensor
        p = p.detach().cpu().numpy()
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != len(NLI_LABELS):
        raise ValueError(f"{name} must have shape [n, {len(NLI_LABELS)}] (labels {NLI_LABELS}), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must hold finite non-negative probabilities")
    if arr.shape[0] and np.max(np.abs(arr.sum(axis=1) - 1.0)) > _ROW_SUM_TOLERANCE:
        raise ValueError(f"each row of {name} must sum to 1")
    return arr


def label_indices(labels: Sequence[str] | Sequence[int] | np.ndarray | str | int) -> np.ndarray:
    """Column indices of NLI label names (or indices passed through) in the order of NLI_LABELS."""
    if isinstance(labels, (str, int, np.integer)):
        labels = [labels]  # type: ignore[list-item]
    if hasattr(labels, "detach"):
        labels = labels.detach().cpu().numpy()  # type: ignore[union-attr]
    out = []
    for y in labels:
        if isinstance(y, str):
            if y not in NLI_LABELS:
                raise ValueError(f"unknown NLI label {y!r}; expected one of {NLI_LABELS}")
            out.append(NLI_LABELS.index(y))
        else:
            i = int(y)
            if not 0 <= i < len(NLI_LABELS):
                raise ValueError(f"label index {i} outside 0..{len(NLI_LABELS) - 1}")
            out.append(i)
    return np.asarray(out, dtype=np.int64)


def one_hot(labels: Sequence[str] | Sequence[int] | np.ndarray | str | int) -> np.ndarray:
    """p(y_cf): [n, 3] one-hot rows."""
    idx = label_indices(labels)
    out = np.zeros((len(idx), len(NLI_LABELS)))
    out[np.arange(len(idx)), idx] = 1.0
    return out


def ground_distance(alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """FTC-W's ground distance D (section 2.3), rows and columns in NLI_LABELS order: D[E, C] = 1 and
    D[N, E] = D[N, C] = alpha, symmetric with a zero diagonal."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1] (section 2.3), got {alpha}")
    d = np.zeros((len(NLI_LABELS), len(NLI_LABELS)))
    d[_E, _C] = d[_C, _E] = 1.0
    d[_N, _E] = d[_E, _N] = d[_N, _C] = d[_C, _N] = alpha
    return d


def _checked(p: Any, y_cf: Any) -> tuple[np.ndarray, np.ndarray]:
    probs = as_probs(p)
    idx = label_indices(y_cf)
    if len(idx) != len(probs):
        raise ValueError(f"{len(probs)} distributions but {len(idx)} labels")
    return probs, idx


def ftc_delta(p: Any, y_cf: Any) -> np.ndarray:
    """FTC-delta = 1[argmax p = y_cf] per row (ties go to the first label in NLI_LABELS order)."""
    probs, idx = _checked(p, y_cf)
    return (probs.argmax(axis=1) == idx).astype(np.float64)


def kl_divergence(q: Any, p: Any, eps: float = EPS) -> np.ndarray:
    """KL(q || p) = sum_j q_j ln(q_j / p_j) per row, with 0 ln 0 = 0 and p clipped to eps."""
    qa, pa = as_probs(q, "q"), as_probs(p, "p")
    if qa.shape != pa.shape:
        raise ValueError(f"q and p differ in shape: {qa.shape} vs {pa.shape}")
    ratio = np.where(qa > 0, np.log(np.where(qa > 0, qa, 1.0)) - np.log(np.clip(pa, eps, None)), 0.0)
    return (qa * ratio).sum(axis=1)


def ftc_kl(p: Any, y_cf: Any, eps: float = EPS) -> np.ndarray:
    """FTC-K = 1 - KL(onehot(y_cf) || p) = 1 + ln p[y_cf] per row (see the module docstring)."""
    probs, idx = _checked(p, y_cf)
    return 1.0 + np.log(np.clip(probs[np.arange(len(idx)), idx], eps, None))


def ftc_wasserstein(p: Any, y_cf: Any, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """FTC-W = 1 - W(p, onehot(y_cf)) = 1 - sum_j p[j] D[j, y_cf] per row (exact: see the module docstring)."""
    probs, idx = _checked(p, y_cf)
    return 1.0 - (probs * ground_distance(alpha)[:, idx].T).sum(axis=1)


@lru_cache(maxsize=1)
def _spanning_trees() -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """For every spanning tree of K(3,3) (81 of them): its 5 cells (flat indices into the 3x3 plan) and the
    matrix that maps the marginals [p; q] to the plan's values on those cells."""
    k = len(NLI_LABELS)
    cells = [(i, j) for i in range(k) for j in range(k)]
    trees = []
    for chosen in itertools.combinations(range(k * k), 2 * k - 1):
        a = np.zeros((2 * k, 2 * k - 1))
        for col, flat in enumerate(chosen):
            i, j = cells[flat]
            a[i, col] = a[k + j, col] = 1.0  # row-sum constraint of i, column-sum constraint of j
        if np.linalg.matrix_rank(a) == 2 * k - 1:  # 5 edges on 6 nodes with full rank: a spanning tree
            trees.append((np.asarray(chosen), np.linalg.pinv(a)))
    return tuple(trees)


def wasserstein(p: Any, q: Any, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """The exact 1-Wasserstein distance between rows of p and q under `ground_distance(alpha)`.

    A transport LP attains its optimum at a vertex of its polytope, and every vertex is the unique solution
    supported on a spanning tree of K(3,3); the minimum cost over the trees whose solution is non-negative is
    therefore the optimum."""
    pa, qa = as_probs(p, "p"), as_probs(q, "q")
    if pa.shape != qa.shape:
        raise ValueError(f"p and q differ in shape: {pa.shape} vs {qa.shape}")
    cost = ground_distance(alpha).reshape(-1)
    marginals = np.concatenate([pa, qa], axis=1)  # [n, 6]
    best = np.full(len(pa), np.inf)
    for cells, solve in _spanning_trees():
        plan = marginals @ solve.T  # [n, 5]
        feasible = np.all(plan >= -1e-12, axis=1)
        best = np.where(feasible, np.minimum(best, plan @ cost[cells]), best)
    return best
