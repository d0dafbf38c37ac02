"""How examples become evaluator inputs and targets: one definition, used by training, scoring and attribution.

REV (paper eq. 5) compares two evaluators: g on the baseline b alone, and g' on the concatenation [r, b].
The reference code formatted training and evaluation inputs differently (LAREV prepended its answer marker twice
at evaluation); here every step calls these functions, so the input a model is scored on is the input it was
trained on.
"""

from __future__ import annotations


def baseline_input(baseline: str) -> str:
    """Input of the baseline evaluator g (phi_base): the vacuous rationale b only."""
    return f"baseline: {baseline.strip()}"


def rationale_input(rationale: str, baseline: str) -> str:
    """Input of the rationale evaluator g' (phi): rationale r followed by the baseline b ([r, b] in REV eq. 5)."""
    return f"rationale: {rationale.strip()} baseline: {baseline.strip()}"


def target_text(label: str) -> str:
    """Decoder target: the label's text itself (NLI relation name or the answer string)."""
    return label.strip()
