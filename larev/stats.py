"""Small statistics every part of the core uses: the chance level of a label set and a binomial margin.

Kept apart from the modules that use them (the span rule, the training loop), so a change in one of those does not
change the code every evaluator's training step runs (tasks/runtime/source_graph.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def chance_level(candidates: Sequence[Sequence[str]]) -> float:
    """Expected accuracy of a uniform guess over each row's label set: mean of 1 / K_i (0 without rows)."""
    return sum(1 / len(c) for c in candidates) / max(1, len(candidates))


def binomial_margin(p: float, n: int, z: float) -> float:
    """z standard errors of an accuracy p measured on n rows (the stopping rule's tolerance)."""
    p = min(max(p, 0.0), 1.0)
    return z * math.sqrt(p * (1 - p) / n) if n > 0 else float("inf")
