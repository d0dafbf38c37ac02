"""Counterfactual rationales: r with the term that ties it to the hypothesis swapped, and the NLI label flipped.

Not in the thesis. The borrowed-rationale term (larev_vs_empty.lambda_borrowed) tells phi_LA what a rationale
about another instance is worth, but an evaluator can meet it by reading *that* r is a category fact, not whether
r's category is the hypothesis's, and then pays a borrowed same-label rationale what it pays the instance's own. A
counterfactual twin is a minimal pair that only a comparison of r with the instance can fit: the same premise,
hypothesis and baseline, r edited in one term, the other label (docs/defaults.md#larev_vs_empty,
`exclusive_terms`).

The edit needs knowledge of which terms exclude each other, given as `ExclusiveTerms` (classes of terms, any two
terms of a class exclusive for one object: "fruit" and "tool"). For an NLI instance (premise, hypothesis, r, y):

  entailment     r names a term t the hypothesis names too (r affirms the hypothesis's t): t in r becomes a
                 term t' of its class that neither the hypothesis nor r names, and the label contradiction
  contradiction  r names a term t' the hypothesis does not, of the class of a term t the hypothesis names (r says
                 the object is t', the hypothesis t): t' in r becomes t, and the label entailment
  neutral, QA    no twin

Only whole words are edited (case-insensitive; a leading capital is kept, and an article "a"/"an" before the term
is fixed for the new one). The twin reads r as a premise-side fact: on data whose rationale supplies the knowledge
the label needs (the demo), its label is the true label of the edited instance; on data whose label follows from
premise and hypothesis alone (e-SNLI) it is the label r argues for, which is what an evaluator of r should follow.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from larev.data.demo import DEMO_CATEGORIES

FLIPPED = {"entailment": "contradiction", "contradiction": "entailment"}


@dataclass(frozen=True)
class ExclusiveTerms:
    """Classes of mutually exclusive terms (lower-case words); a term belongs to one class."""

    classes: tuple[tuple[str, ...], ...]
    _class_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        class_of: dict[str, int] = {}
        for k, terms in enumerate(self.classes):
            if len(terms) < 2:
                raise ValueError(f"exclusive-term class {k} {list(terms)} needs at least two terms")
            for term in terms:
                if not re.fullmatch(r"[a-z]+(?: [a-z]+)*", term):
                    raise ValueError(f"exclusive term {term!r} (class {k}) must be lower-case words")
                if term in class_of:
                    raise ValueError(f"exclusive term {term!r} is in classes {class_of[term]} and {k}")
                class_of[term] = k
        object.__setattr__(self, "_class_of", class_of)

    def found(self, text: str) -> list[str]:
        """The terms `text` names, in order of first occurrence (whole words, case-insensitive)."""
        hits = [(m.start(), t) for t in self._class_of if (m := _pattern(t).search(text))]
        return [t for _, t in sorted(hits)]

    def same_class(self, term: str) -> tuple[str, ...]:
        return self.classes[self._class_of[term]]


# The exclusive terms a run can name (larev.exclusive_terms): the demo world's categories (larev/data/demo.py:
# "the categories in DEMO_CATEGORIES are mutually exclusive").
EXCLUSIVE_TERMS: dict[str, ExclusiveTerms] = {"demo": ExclusiveTerms((tuple(c.name for c in DEMO_CATEGORIES),))}


def exclusive_terms_named(name: str) -> ExclusiveTerms | None:
    """The classes a resolved `larev.exclusive_terms` names: None for 'none', else its EXCLUSIVE_TERMS entry."""
    if name == "none":
        return None
    if name not in EXCLUSIVE_TERMS:
        raise ValueError(f"exclusive_terms must be 'none' or one of {sorted(EXCLUSIVE_TERMS)} (resolved), got "
                         f"{name!r}")
    return EXCLUSIVE_TERMS[name]


def _pattern(term: str) -> re.Pattern:
    return re.compile(rf"\b(?:(a|an) )?({re.escape(term)})\b", re.IGNORECASE)


def swap_term(text: str, old: str, new: str) -> str:
    """Every whole-word `old` in `text` replaced by `new`, a leading capital kept and a preceding a/an fixed."""

    def sub(m: re.Match) -> str:
        article, word = m.group(1), m.group(2)
        out = new.capitalize() if word[:1].isupper() else new
        if article is None:
            return out
        fixed = "an" if new[:1] in "aeiou" else "a"
        return f"{fixed.capitalize() if article[:1].isupper() else fixed} {out}"

    return _pattern(old).sub(sub, text)


def counterfactual_rationale(rationale: str, hypothesis: str, label: str, terms: ExclusiveTerms,
                             rng: random.Random) -> tuple[str, str] | None:
    """(r', y') for an NLI instance, or None where it has no twin (the module docstring's rules). `rng` picks t'
    among the entailment case's candidates (always drawn once for an entailment row with a candidate)."""
    if label not in FLIPPED or not rationale or not hypothesis:
        return None
    in_r, in_h = terms.found(rationale), set(terms.found(hypothesis))
    for term in in_r:
        if label == "entailment" and term in in_h:
            others = [t for t in terms.same_class(term) if t not in in_h and t not in in_r]
            if others:
                return swap_term(rationale, term, rng.choice(others)), FLIPPED[label]
        if label == "contradiction" and term not in in_h:
            named = [t for t in terms.same_class(term) if t in in_h and t not in in_r]
            if named:
                return swap_term(rationale, term, named[0]), FLIPPED[label]
    return None
