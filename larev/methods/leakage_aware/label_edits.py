"""LAREV's environments edited at the label's own text: in the rationale r, and optionally everywhere in b.

The thesis makes phi_LA invariant to the leakage in the baseline b that Integrated Gradients finds, and names the
rationale r as future work. On real QA that is where the leakage is: about half of CoS-E's explanations restate
their answer, so a phi_LA that learns to copy the answer out of r rewards a rationale for restating it (measured:
restating - masked +0.11 nats with b-side environments only; docs/benchmarks.md). `larev.label_edits` edits the
label's text in every environment the way the environments edit b's spans:

  E1  the text as written
  E2  every occurrence of the label's text replaced by the mask token (b's E2 masks b's spans with it)
  E3  every occurrence replaced by the other label E3 put into b (the distractor choice of a QA baseline); when b's
      E3 names no other label, the first other label of the label set

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
    """(r_e, b_e) in every environment (see the module docstring), None where the row lacks the environment.

    baselines: b's text per environment name (None where the row lacks it); env_names: the first is the original,
    the second the masked, the third the rewritten environment (later ones are left as they are)."""
    if edits not in LABEL_EDITS:
        raise ValueError(f"label edits must be one of {LABEL_EDITS}, got {edits!r}")
    if not mask_token:
        raise ValueError("mask_token is empty")
    names = list(env_names)
    if not names or baselines.get(names[0]) is None:
        raise ValueError(f"the environments {names} need the original baseline first")
    pattern = answer_pattern(label)
    original_b = baselines[names[0]]
    on_b = edits == "rationale_and_baseline"
    out: dict[str, tuple[str, str] | None] = {}
    for i, name in enumerate(names):
        b = baselines.get(name)
        if i == 2 and b is None and on_b and pattern is not None and pattern.search(original_b):
            b = original_b  # no rewrite of b's spans, but b states the label: E3 swaps it below
        if b is None:
            out[name] = None
        elif i == 0 or i > 2 or pattern is None or edits == "none":
            out[name] = (rationale, b)
        else:
            if i == 1:
                new = mask_token
            else:
                other = swapped_label(label, candidates, original_b, baselines.get(name))
                if other is None:
                    out[name] = (rationale, b) if baselines.get(name) is not None else None
                    continue
                new = other
            r_e = pattern.sub(lambda _m: new, rationale) if rationale else rationale
            out[name] = (r_e, pattern.sub(lambda _m: new, b) if on_b else b)
    return out
