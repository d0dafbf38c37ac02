"""The relation lexicon: every relation phrasing the NLI baselines use (template and offline paraphrases), and the
phrasing of another label to put in its place (backend 'lexicon')."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from larev.llm import Rewritten
from larev.methods.leakage_aware.antonyms.request import AntonymRequest, match_case
from larev.schema import NLI_LABELS


@dataclass(frozen=True)
class Relation:
    """An NLI relation phrase: a regex, the label it states, its wrong-relation replacement and replacements of
    single words inside it (for terms that are one word of a longer phrase). When the regex has a group named
    'rel', that group is the phrase and the rest of the match is context ('If p, <then> h')."""

    pattern: str
    label: str
    replacement: str
    parts: dict[str, str] = field(default_factory=dict)

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_E, _C, _N = NLI_LABELS


# "Given that p, h" is entailment unless the main clause carries its own relation phrase
_TAIL = r",\s*(?:it (?:cannot|must) be that|we (?:cannot tell whether|can tell whether|know that))\b"


# Each phrasing of larev.baselines.nli (template RELATIONS and OfflineParaphraser) has its label-bearing phrase
# here, and every replacement is itself a phrase of another label, so a rewritten sentence reads as that label
# (the tests check both through `find`). Other common paraphrase verbs are covered too. Longer matches win.
RELATIONS: tuple[Relation, ...] = (
    # -- entailment
    Relation(r"\bimplies\b", _E, "contradicts"),
    Relation(r"\bentails\b", _E, "contradicts"),
    Relation(r"\bmeans(?= that\b)", _E, "rules out"),
    Relation(r"\bsuggests(?= that\b)", _E, "denies"),
    Relation(r"\bindicates(?= that\b)", _E, "denies"),
    Relation(r"\bshows(?= that\b)", _E, "denies"),
    Relation(r"\bproves(?= that\b)", _E, "disproves"),
    Relation(r"(?<!neither )\bconfirms(?= that\b)", _E, "denies"),
    Relation(r"\bsupports(?= that\b)", _E, "denies"),
    Relation(r"(?<=, )so\b(?! it is (?:false|true) that\b)", _E, "so it is false that"),          # "P, so h."
    Relation(r"^\s*(?P<rel>Given that)\b(?!.*" + _TAIL + ")", _E, "Unless"),                      # "Given that p, h."
    Relation(r"^\s*If\b.*?, (?P<rel>then)\b(?! it is (?:not |indeed )?the case that\b)", _E,
             "then it is not the case that"),                                                        # "If p, then h."
    Relation(r"(?<=, )since\b", _E, "but not if"),                                                   # "H, since p."
    # results of rewriting contradiction / neutral phrasings (they read as entailment)
    Relation(r"\bbears out\b", _E, "rules out", {"bears": "rules"}),
    Relation(r"\brules in\b", _E, "rules out", {"in": "out"}),
    Relation(r"\bso it is true that\b", _E, "so it is false that", {"true": "false"}),
    Relation(r"\bmust be true if\b", _E, "cannot be true if", {"must": "cannot"}),
    Relation(r"\bcannot be false if\b", _E, "cannot be true if", {"false": "true"}),
    Relation(r"\bit must be that\b", _E, "it cannot be that", {"must": "cannot"}),
    Relation(r"\bit is (?:indeed )?the case that\b", _E, "it is not the case that", {"indeed": "not"}),
    Relation(r"\bis directly related to\b", _E, "is not related to", {"directly": "not"}),
    Relation(r"\bsays a lot about whether\b", _E, "says nothing about whether", {"a lot": "nothing"}),
    Relation(r"\btells us that\b", _E, "does not tell us whether"),
    Relation(r"\bdoes indeed tell us (?:if|whether)\b", _E, "does not tell us whether", {"indeed": "not"}),
    Relation(r"\bwe (?:know that|can tell whether)\b", _E, "we cannot tell whether", {"can": "cannot"}),
    Relation(r"\bis (?:clearly )?settled by\b", _E, "is not settled by", {"clearly": "not"}),
    # -- contradiction
    Relation(r"\bcontradicts\b", _C, "implies"),
    Relation(r"(?<!nor )\brules out\b", _C, "implies", {"rules": "bears", "out": "in"}),
    Relation(r"\bis incompatible with\b", _C, "implies", {"incompatible": "compatible"}),
    Relation(r"\bso it is false that\b", _C, "so it is true that", {"false": "true"}),
    Relation(r"\bcannot be true if\b", _C, "must be true if", {"cannot": "must", "true": "false"}),
    Relation(r"\bit cannot be that\b", _C, "it must be that", {"cannot": "must"}),
    Relation(r"\bit is not the case that\b", _C, "it is the case that", {"not": "indeed"}),
    Relation(r"\bdenies(?= that\b)", _C, "confirms"),
    Relation(r"\bdisproves(?= that\b)", _C, "proves"),
    Relation(r"\brefutes(?= that\b)", _C, "confirms"),
    Relation(r"\bis inconsistent with\b", _C, "implies", {"inconsistent": "consistent"}),
    Relation(r"\bbut not if\b", _C, "since"),
    # -- neutral
    Relation(r"\bis not related to\b", _N, "implies", {"not": "directly"}),
    Relation(r"\bis (?:unrelated|irrelevant) to\b", _N, "implies"),
    Relation(r"\bsays nothing about whether\b", _N, "confirms that", {"nothing": "a lot"}),
    Relation(r"\bdoes not tell us (?:if|whether)\b", _N, "tells us that", {"not": "indeed"}),
    Relation(r"\bneither confirms nor rules out\b", _N, "confirms"),
    Relation(r"\bwe cannot tell whether\b", _N, "we know that", {"cannot": "can"}),
    Relation(r"\bis not settled by\b", _N, "is settled by", {"not": "clearly"}),
    Relation(r"\bis (?:compatible|consistent) with\b", _N, "contradicts", {"compatible": "incompatible",
                                                                            "consistent": "inconsistent"}),
    Relation(r"^\s*(?P<rel>Unless)\b", _N, "Given that"),
    Relation(r"\bdoes not (?:imply|entail)\b", _N, "implies"),
)


@dataclass(frozen=True)
class RelationMatch:
    """Where a relation phrase occurs in a text."""

    start: int
    end: int
    relation: Relation

    @property
    def label(self) -> str:
        return self.relation.label


class RelationLexicon:
    """Wrong-relation rewrites of NLI relation phrases (thesis table 4.2: 'implies' -> 'denies').

    A term that is a whole relation phrase (or contains one) gets the phrase's replacement ('implies' ->
    'contradicts', 'is not related to' -> 'implies', 'means' -> 'rules out'); a term that is one word of a
    longer phrase gets that word's replacement in the phrase's context ('cannot' in 'it cannot be that' ->
    'must'). Function words without a meaningful swap ('that', 'is', 'Given' alone) get None, and so do QA
    rows (task 'qa'). Backend 'lexicon'.
    """

    name = "lexicon"

    def __init__(self, relations: Sequence[Relation] = RELATIONS):
        self.relations = tuple(relations)

    def find(self, text: str) -> list[RelationMatch]:
        """Non-overlapping relation phrases of `text`, in text order (a longer match wins an overlap)."""
        found: list[tuple[int, int, int, Relation]] = []
        for order, rel in enumerate(self.relations):
            group = "rel" if "rel" in rel.regex.groupindex else 0
            for m in rel.regex.finditer(text):
                start, end = m.span(group)
                if end > start:
                    found.append((start, end, order, rel))
        found.sort(key=lambda f: (f[0] - f[1], f[2]))  # longest first, then list order
        kept: list[RelationMatch] = []
        for start, end, _, rel in found:
            if all(end <= k.start or start >= k.end for k in kept):
                kept.append(RelationMatch(start, end, rel))
        return sorted(kept, key=lambda m: m.start)

    def labels(self, text: str) -> set[str]:
        """The labels the relation phrases of `text` state."""
        return {m.label for m in self.find(text)}

    def replacement(self, item: AntonymRequest) -> str | None:
        """The new text of the term's span, or None (always None for QA rows)."""
        if item.task == "qa":
            return None
        span = item.term
        s = item.start + len(span) - len(span.lstrip())
        e = item.end - (len(span) - len(span.rstrip()))
        for m in self.find(item.baseline):
            if m.end <= s or m.start >= e:
                continue
            if s <= m.start and m.end <= e:  # the term is or contains the phrase
                b = item.baseline
                phrase = match_case(b[m.start:m.end], m.relation.replacement)
                return b[s:m.start] + phrase + b[m.end:e]
            if m.start <= s and e <= m.end:  # one or more words inside the phrase
                key = " ".join(item.baseline[s:e].lower().split())
                part = m.relation.parts.get(key)
                return match_case(item.baseline[s:e], part) if part else None
            return None  # straddles a phrase boundary
        return None

    def rewrite(self, item: AntonymRequest) -> Rewritten | None:
        new = self.replacement(item)
        if new is None:
            return None
        span = item.term
        lead, trail = span[:len(span) - len(span.lstrip())], span[len(span.rstrip()):]
        return Rewritten(item.replaced(lead + new + trail), self.name)
