"""FTC's data types: a relation R(A, B) read from an explanation, the counterfactual built from it, and an attempt.

Paper (Logical Satisfiability of Counterfactuals for Faithful Explanations in NLI), section 2.1 and table 2:
an NLI explanation z states a predicate relation R(A, B) between a span A and a span B, and the relation is
fixed by the label the explanation explains:

  label          R(A, B)          kind              counterfactual case(s)       y_cf
  entailment     A <=> B          equivalence       'E'     x[B\\A]              entailment   (proposition 1)
  contradiction  not (A <=> B)    exclusion         'C'     x[B\\A]              entailment   (proposition 2)
  neutral        not (A => B)     non_implication   'N[A]'  x with B -> A        entailment   (proposition 3)
                                                    'N[B]'  x reduced to B       neutral      (proposition 3)

Every (example, case) gives one `FtcAttempt`: a `Counterfactual`, or the `reason` none could be built, so rows
without an extractable relation are counted, never dropped. `backend` records where the relation came from:
'rules', 'llm:<model>' or 'fallback:rules' (the LLM's reply was unusable and the rules stepped in).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from larev.schema import NLI_LABELS

RelationKind = Literal["equivalence", "exclusion", "non_implication"]
Case = Literal["E", "C", "N[A]", "N[B]"]

RULES = "rules"
FALLBACK_RULES = "fallback:rules"

# Table 2, column R(A, B): the relation an explanation of each label expresses.
KIND_OF_LABEL: dict[str, RelationKind] = {
    "entailment": "equivalence",
    "contradiction": "exclusion",
    "neutral": "non_implication",
}
# Table 2 and propositions 1-3: the counterfactual case(s) of each label and their expected label y_cf.
CASES_OF_LABEL: dict[str, tuple[Case, ...]] = {
    "entailment": ("E",),
    "contradiction": ("C",),
    "neutral": ("N[A]", "N[B]"),
}
Y_CF: dict[Case, str] = {"E": "entailment", "C": "entailment", "N[A]": "entailment", "N[B]": "neutral"}

# Why no counterfactual was built; stable strings, so they can be counted.
REASON_EMPTY_EXPLANATION = "empty explanation"
REASON_NO_TEMPLATE = "no relation template matched"
REASON_SPAN_NOT_IN_HYPOTHESIS = "neither span found in the hypothesis"
REASON_BOTH_IN_HYPOTHESIS = "both spans found in the hypothesis"
REASON_B_NOT_IN_HYPOTHESIS = "span B not found in the hypothesis"
REASON_NO_A_SPAN = "explanation names no span A"
REASON_SAME_SPANS = "A and B are the same"
REASON_DOES_NOT_FIT = "span does not fit the hypothesis slot"
REASON_UNCHANGED = "counterfactual equals the hypothesis"


@dataclass(frozen=True)
class Relation:
    """R(A, B) as read from an explanation (table 2).

    `a` may be None only for `non_implication`: explanations such as 'there is no evidence that B' name the
    hypothesis part B that is not implied but no premise-side span A, so they give case N[B] only.
    `template` names the rule that matched (None for an LLM's extraction).
    """

    kind: RelationKind
    a: str | None
    b: str
    backend: str
    template: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KIND_OF_LABEL.values():
            raise ValueError(f"unknown relation kind {self.kind!r}")
        if not self.b.strip():
            raise ValueError("span B must be non-empty")
        if self.a is None and self.kind != "non_implication":
            raise ValueError(f"a {self.kind} relation needs both spans A and B")
        if self.a is not None and not self.a.strip():
            raise ValueError("span A must be None or non-empty")


@dataclass(frozen=True)
class Counterfactual:
    """A counterfactual hypothesis x_cf with its expected label y_cf (table 2).

    `replaced` is the hypothesis text that was substituted (for N[B]: the text kept as B) and `inserted` the
    text put in its place (None for N[B], which only shortens the hypothesis).
    """

    x_cf: str
    y_cf: str
    case: Case
    backend: str
    replaced: str
    inserted: str | None = None

    def __post_init__(self) -> None:
        if self.y_cf not in NLI_LABELS:
            raise ValueError(f"y_cf must be one of {NLI_LABELS}, got {self.y_cf!r}")


@dataclass(frozen=True)
class Extraction:
    """What an extractor read from one explanation: candidate relations, best first, or why there are none.

    `backend` is the provenance of the attempt even when nothing was found; `note` says why an LLM reply was
    not used when the rules stepped in (None otherwise).
    """

    relations: tuple[Relation, ...]
    backend: str
    reason: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        if not self.relations and not self.reason:
            raise ValueError("an extraction without relations needs a reason")


@dataclass(frozen=True)
class FtcAttempt:
    """One (example, case): the counterfactual, or the reason there is none (never both, never neither)."""

    case: Case
    y_cf: str
    backend: str
    counterfactual: Counterfactual | None = None
    relation: Relation | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if (self.counterfactual is None) == (self.reason is None):
            raise ValueError("an FtcAttempt carries either a counterfactual or a reason")

    @property
    def ok(self) -> bool:
        return self.counterfactual is not None


def cases_for(label: str) -> tuple[Case, ...]:
    """The counterfactual cases of an NLI label (table 2); ValueError for any other label."""
    try:
        return CASES_OF_LABEL[label]
    except KeyError:
        raise ValueError(f"label {label!r} is not one of {NLI_LABELS}") from None


def failed_attempts(label: str, backend: str, reason: str) -> list[FtcAttempt]:
    """One failed attempt per case of `label`, all with the same reason."""
    return [FtcAttempt(case=c, y_cf=Y_CF[c], backend=backend, reason=reason) for c in cases_for(label)]


@runtime_checkable
class RelationExtractor(Protocol):
    """Reads R(A, B) from one explanation (`RuleExtractor`, `LlmRelationExtractor`)."""

    def extract(self, explanation: str, hypothesis: str, label: str) -> Extraction: ...
