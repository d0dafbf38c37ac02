"""What every antonym backend takes and returns: the request (b, its leakage term's span, the row's context), the
masked baseline (E2), the backend protocol and the case-keeping replacement helpers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from larev.errors import InputError
from larev.llm import Rewritten

MASK_FALLBACK = "fallback:mask"


@dataclass(frozen=True)
class AntonymRequest:
    """One baseline b with its leakage term at b[start:end] and the row's context.

    `label` is the answer stated by b (an NLI label or the QA answer); `question` and `choices` are the QA
    context (None for NLI). Build it with `AntonymRequest.of(...)`, which checks the span.
    """

    id: str
    baseline: str
    start: int
    end: int
    task: str | None = None
    label: str | None = None
    question: str | None = None
    choices: tuple[str, ...] | None = None

    @property
    def term(self) -> str:
        return self.baseline[self.start:self.end]

    @classmethod
    def of(cls, id: str, baseline: str, start: int, end: int, *, term: str | None = None, task: str | None = None,
           label: str | None = None, question: str | None = None,
           choices: Sequence[str] | None = None) -> AntonymRequest:
        """A checked request: 0 <= start < end <= len(b), and b[start:end] equals `term` (up to surrounding
        whitespace) when a term is given. InputError naming the id otherwise."""
        if not 0 <= start < end <= len(baseline):
            raise InputError(f"id {id!r}: leakage term span ({start}, {end}) is not inside the baseline "
                             f"(length {len(baseline)})", column="start")
        if term is not None and baseline[start:end].strip() != term.strip():
            raise InputError(f"id {id!r}: term {term!r} does not match baseline[{start}:{end}] = "
                             f"{baseline[start:end]!r}", column="term")
        return cls(str(id), baseline, start, end, task, label, question,
                   tuple(choices) if choices is not None else None)

    def replaced(self, replacement: str) -> str:
        """b with the term's span replaced by `replacement`."""
        return self.baseline[:self.start] + replacement + self.baseline[self.end:]


def masked_baseline(baseline: str, start: int, end: int, mask_token: str) -> str:
    """b-tilde: b with baseline[start:end] (the leakage term) replaced by `mask_token` (the E2 environment)."""
    if not 0 <= start <= end <= len(baseline):
        raise ValueError(f"span ({start}, {end}) is not inside a text of length {len(baseline)}")
    return baseline[:start] + mask_token + baseline[end:]


class AntonymBackend(Protocol):
    """Rewrites the term of one request; None when it has no rewrite. `name` is its provenance string."""

    name: str

    def rewrite(self, item: AntonymRequest) -> Rewritten | None: ...


_WORD = re.compile(r"[\w'-]+")


def lower_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def match_case(source: str, replacement: str) -> str:
    """`replacement` in the case pattern of `source`: ALL CAPS, Capitalised or as given."""
    if not replacement:
        return replacement
    letters = [c for c in source if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return replacement.upper()
    if letters and source.lstrip()[:1].isupper():
        return replacement[0].upper() + replacement[1:]
    return replacement


def rewritten_in_span(item: AntonymRequest, replacement: str, backend: str) -> Rewritten:
    """The rewrite keeping the whitespace around the term inside its span, in the term's case."""
    span = item.term
    lead = span[:len(span) - len(span.lstrip())]
    trail = span[len(span.rstrip()):]
    return Rewritten(item.replaced(lead + match_case(span.strip(), replacement) + trail), backend)
