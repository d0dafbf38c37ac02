"""r_only: REV's estimator (REV paper eq. 5) with g' replaced by an evaluator that reads the rationale alone.

pointwise   r_only(x, y, r) = log g_r[r](y) - log g[b](y)
g   = REV's phi_base, trained on the vacuous baseline b alone (the same model REV scores with);
g_r = an evaluator of the same backbone trained on the training rationales alone (role `r_only`: r without b).

Where REV asks what [r, b] says about y beyond b, r_only asks how well r by itself points to y, against b's
reading: the explanation-only reader of Wiegreffe et al. (2022) in REV's units. It is not leakage-robust by
construction: a rationale that states the label in words g_r learned from training rationales is paid for it.
The estimator is larev/metrics/rev.py's `score_rev` (the evaluator's saved role makes it read r alone); the
evaluator is the same one LAREV's `r_only` control trains (`larev.controls`), so the two score identically.
"""

from __future__ import annotations

from pydantic import Field

from larev.config import _Config


class ROnlyConfig(_Config):
    """`r_only`'s options: its evaluator trains with the run's `model` and `train` sections, like REV's."""

    enabled: bool = Field(False, description="train the rationale-only evaluator g_r and score r_only "
                                             "(log p_r(y | r) - log p_base(y | b))")
