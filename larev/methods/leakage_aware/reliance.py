"""How much an evaluator reads the label from b's leakage spans: the quantity phi_LA's training is meant to shrink.

    reliance = mean_i [ log p(y_i | [no rationale, b_i]) - log p(y_i | [no rationale, b~_i]) ]

with b~ the masked baseline (E2). phi reads [r, b]; with an empty r whatever it knows of y comes from b, and the
drop when the spans are masked is what it took from them. LAREV's claim (thesis 4.5) is that this is smaller for
phi_LA than for phi.
"""

from __future__ import annotations

import numpy as np

from larev.config import ScoreConfig
from larev.formats import rationale_input
from larev.models.evaluator import Evaluator, score_labels


def leakage_reliance(evaluator: Evaluator, baselines: list[str], masked: list[str], labels: list[str],
                     candidates: list[list[str]], config: ScoreConfig | None = None) -> float:
    """Mean log p(y | [no rationale, b]) - log p(y | [no rationale, masked b]) in nats (module docstring)."""
    if not (len(baselines) == len(masked) == len(labels) == len(candidates)):
        raise ValueError("baselines, masked, labels and candidates must have the same length")
    if not baselines:
        return float("nan")
    with_spans = score_labels(evaluator, [rationale_input("", b) for b in baselines], labels, candidates, config)
    without = score_labels(evaluator, [rationale_input("", m) for m in masked], labels, candidates, config)
    return float(np.mean(with_spans.logp - without.logp))
