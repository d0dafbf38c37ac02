"""What REV's two evaluators read: phi_base (REV's g) reads b, phi (REV's g') reads [r, b]; and the `r_only`
control (LAREV's controls, `larev.controls`) reads r without b."""

from __future__ import annotations

import polars as pl

from larev.errors import ConfigError
from larev.formats import baseline_input, rationale_input, rationale_only_input

ROLES = ("phi_base", "phi")
CONTROL_ROLES = ("r_only",)


def evaluator_inputs(role: str, df: pl.DataFrame) -> list[str]:
    """The inputs of evaluator `role` for every row of a frame with `baseline` (and `rationale` for phi and
    r_only)."""
    if role == "phi_base":
        return [baseline_input(b) for b in df["baseline"]]
    if role == "phi":
        return [rationale_input(r, b) for r, b in zip(df["rationale"], df["baseline"])]
    if role == "r_only":
        return [rationale_only_input(r) for r in df["rationale"]]
    raise ConfigError(f"unknown evaluator role {role!r}; expected one of {ROLES + CONTROL_ROLES}")
