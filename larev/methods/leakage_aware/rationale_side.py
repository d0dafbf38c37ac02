"""LAREV's environments on the rationale side: the label's text in r masked (E2) or swapped (E3) like b's spans.

The thesis makes phi_LA invariant to the leakage in the baseline b and names the rationale r as future work. On
real QA that is where the leakage is: about half of CoS-E's explanations restate their answer, so a phi_LA that
learns to copy the answer out of r rewards a rationale for restating it (measured: restating - masked +0.11 nats
with b-side environments only; docs/benchmarks.md). With `larev.rationale_edits=label` every environment edits r
the way it edits b:

  E1  r as written
  E2  every occurrence of the label's text in r replaced by the mask token (b's E2 masks b's spans with it)
  E3  every occurrence replaced by the other label E3 put into b (the distractor choice of a QA baseline); when b's
      E3 names no other label, the first other label of the label set. A row without E3 keeps none.

An occurrence is the label's words as whole words, case-insensitive, the last word optionally inflected
(larev/data/restating.py, the rule the natural-leakage table uses). Only the label's own text is edited, never
other words: this is the known leakage, not a search for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from larev.data.restating import answer_pattern

RATIONALE_EDITS = ("none", "label")


def _occurrences(text: str, label: str) -> int:
    pattern = answer_pattern(label)
    return 0 if pattern is None or not text else len(pattern.findall(text))


def swapped_label(label: str, candidates: Sequence[str], original_b: str, rewritten_b: str) -> str | None:
    """The other label b's E3 rewrite put in: the candidate (not `label`) that occurs more often in `rewritten_b`
    than in `original_b`; else the first other candidate; None when the label set has no other label."""
    others = [c for c in candidates if c != label]
    for c in others:
        if _occurrences(rewritten_b, c) > _occurrences(original_b, c):
            return c
    return others[0] if others else None


def rationale_environments(rationale: str, label: str, candidates: Sequence[str], baselines: dict[str, str | None],
                           mask_token: str, env_names: Sequence[str]) -> dict[str, str | None]:
    """r in every environment (see the module docstring): `baselines` maps each environment name to b's text
    there (None where the row lacks it; the first name is E1, the second the masked, the third the rewritten
    environment). Returns the rationale per environment name, None where the row lacks the environment."""
    if not mask_token:
        raise ValueError("mask_token is empty")
    names = list(env_names)
    if len(names) < 1 or names[0] not in baselines:
        raise ValueError(f"the environments {names} need the original baseline first")
    pattern = answer_pattern(label)
    out: dict[str, str | None] = {}
    for i, name in enumerate(names):
        b = baselines.get(name)
        if b is None:
            out[name] = None
        elif i == 0 or pattern is None or not rationale:
            out[name] = rationale
        elif i == 1:
            out[name] = pattern.sub(mask_token, rationale)
        else:
            other = swapped_label(label, candidates, baselines[names[0]] or "", b)
            out[name] = rationale if other is None else pattern.sub(lambda _m: other, rationale)
    return out
