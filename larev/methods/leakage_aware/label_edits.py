"""LAREV's environments edited at the label's own text: in the rationale r, and optionally everywhere in b.

The thesis makes phi_LA invariant to the leakage in the baseline b that Integrated Gradients finds, and names the
rationale r as future work. On real QA that is where the leakage is: about half of CoS-E's explanations restate
their answer, so a phi_LA that learns to copy the answer out of r rewards a rationale for restating it, which
environments edited on b alone do not stop (docs/defaults.md#larev, `label_edits`). `larev.label_edits` edits the
label's text in every environment the way the environments edit b's spans:

  E1  the text as written
  E2  every occurrence of the label's text replaced by the mask token (b's E2 masks b's spans with it)
  E3  every occurrence replaced by the other label E3 put into b (the distractor choice of a QA baseline); when b's
      E3 names no other label, the first other label of the label set
  E4  (added by the edits) the label replaced in r and b by the other label neither E1 nor E3 names (for QA's
      3 choices, the last one), where b states the label and such a label exists: across E1, E3 and E4 a
      mentioned choice is then right one time in three, so copying it gains nothing even before IRM (with E1 and
      E3 alone the mention is right half the time, and ERM still rewards copying it)

Where the edits apply (E2 and E3; E4 always edits both):

  'rationale'               r only; a row without E3 keeps none
  'rationale_and_baseline'  r, and b wherever the label's text is still there after b's spans were edited (IG's
                            spans miss the answer in some QA baselines, which then keep it in every environment);
                            a row whose b has no E3 but states the label gets one: b and r with the label swapped

An occurrence is the label's words as whole words, case-insensitive, the last word optionally inflected
(larev/data/restating.py, the rule the natural-leakage table uses). Only the label's own text is edited, never
other words: this is the known leakage, not a search for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from larev.data.restating import answer_pattern
from larev.methods.leakage_aware.environments import ANTONYM, MASKED, ORIGINAL, SWAPPED_AGAIN

LABEL_EDITS = ("none", "rationale", "rationale_and_baseline")


def _occurrences(text: str, label: str) -> int:
    pattern = answer_pattern(label)
    return 0 if pattern is None or not text else len(pattern.findall(text))


def swapped_label(label: str, candidates: Sequence[str], original_b: str, rewritten_b: str | None) -> str | None:
    """The other label b's E3 rewrite put in: the candidate (not `label`) that occurs more often in `rewritten_b`
    than in `original_b`; else the first other candidate; None when the label set has no other label."""
    others = [c for c in candidates if c != label]
    for c in others:
        if rewritten_b is not None and _occurrences(rewritten_b, c) > _occurrences(original_b, c):
            return c
    return others[0] if others else None


def label_edited_environments(rationale: str, label: str, candidates: Sequence[str],
                              baselines: dict[str, str | None], mask_token: str, env_names: Sequence[str],
                              edits: str = "rationale") -> dict[str, tuple[str, str] | None]:
    """(r_e, b_e) in every environment of `env_names` and in `SWAPPED_AGAIN` (see the module docstring), None where
    the row lacks the environment.

    baselines: b's text per environment name (None where the row lacks it); env_names: the run's environments.
    The edits find the original, masked and rewritten ones by name (ORIGINAL, MASKED, ANTONYM); other environments
    are left as they are."""
    if edits not in LABEL_EDITS:
        raise ValueError(f"label edits must be one of {LABEL_EDITS}, got {edits!r}")
    if not mask_token:
        raise ValueError("mask_token is empty")
    names = list(env_names)
    if ORIGINAL not in names or baselines.get(ORIGINAL) is None:
        raise ValueError(f"the environments {names} need the original baseline {ORIGINAL!r}")
    if SWAPPED_AGAIN in names:
        raise ValueError(f"{SWAPPED_AGAIN!r} is the environment the label edits add; the table has one of that name")
    pattern = answer_pattern(label)
    original_b = baselines[ORIGINAL]
    on_b = edits == "rationale_and_baseline"
    out: dict[str, tuple[str, str] | None] = {name: (rationale, b) if b is not None else None
                                               for name, b in ((n, baselines.get(n)) for n in names)}
    out[SWAPPED_AGAIN] = None
    if edits == "none" or pattern is None:
        return out

    def swap(text: str, new: str) -> str:
        return pattern.sub(lambda _m: new, text) if text else text

    masked_b, rewritten_b = baselines.get(MASKED), baselines.get(ANTONYM)
    if masked_b is not None:
        out[MASKED] = (swap(rationale, mask_token), swap(masked_b, mask_token) if on_b else masked_b)
    states_label = pattern.search(original_b) is not None
    other = swapped_label(label, candidates, original_b, rewritten_b)
    if other is not None and rewritten_b is not None:
        out[ANTONYM] = (swap(rationale, other), swap(rewritten_b, other) if on_b else rewritten_b)
    elif other is not None and on_b and states_label and ANTONYM in names:  # b's spans not rewritten, b states y
        out[ANTONYM] = (swap(rationale, other), swap(original_b, other))
    third = [c for c in candidates if c not in (label, other)]
    if other is not None and third and states_label:
        out[SWAPPED_AGAIN] = (swap(rationale, third[0]), swap(original_b, third[0]))
    return out
