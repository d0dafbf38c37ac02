"""QA: the answer stated by b (or the term inside it) replaced by another answer choice (backend 'distractor')."""

from __future__ import annotations

import hashlib
import random
import re

from larev.llm import Rewritten
from larev.methods.leakage_aware.antonyms.request import (AntonymRequest, lower_words, match_case,
                                                         rewritten_in_span)


class DistractorChoice:
    """QA: when the term is the answer (or words of it), put another answer choice there.

    The distractor is the first choice, in an order shuffled by (seed, id), that differs from the answer and
    the term, so a row always gets the same one (thesis table 4.2: 'bedroom' -> 'attic'). Leading articles
    of answer and choice are ignored ('the bedroom' / 'attic'). Handled: a term containing the answer (the
    answer's words inside it are replaced); the term being the answer, or words of it where the answer occurs
    in b and the distractor shares the answer's other words ('red apple' / 'green apple': 'red' -> 'green').
    Anything else (a term outside the answer's occurrence in b, or 'amusing' of 'amusing a child' with the
    distractor 'making soup') gets None. Backend 'distractor'.
    """

    name = "distractor"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def distractor(self, item: AntonymRequest) -> str | None:
        """The row's distractor choice (as written in the choices), or None without choices or a label."""
        if not item.choices or not item.label:
            return None
        answer, term = item.label.strip().lower(), item.term.strip().lower()
        order = list(item.choices)
        random.Random(hashlib.sha256(f"{self.seed}\x00{item.id}".encode()).digest()).shuffle(order)
        return next((c.strip() for c in order if c and c.strip() and c.strip().lower() not in (answer, term)), None)

    def rewrite(self, item: AntonymRequest) -> Rewritten | None:
        choice = self.distractor(item)
        if choice is None or item.label is None:
            return None
        answer = _content_words(item.label)
        choice = _ARTICLE.sub("", choice)
        if not answer or not choice or not lower_words(item.term):
            return None
        inside = _phrase(answer).search(item.term)
        if inside is not None:  # the term contains the answer
            new = item.term[:inside.start()] + match_case(inside.group(0), choice) + item.term[inside.end():]
            return Rewritten(item.replaced(new), self.name)
        b = item.baseline
        around = next((m for m in _phrase(answer).finditer(b) if m.start() <= item.start and item.end <= m.end()),
                      None)
        if around is None:
            return None
        i = len(lower_words(b[around.start():item.start]))
        j = i + len(lower_words(item.term))
        head, tail = answer[:i], answer[j:]
        if not head and not tail:
            return rewritten_in_span(item, choice, self.name)
        pieces = choice.split()
        words = [w.lower() for w in pieces]
        if len(words) > len(head) + len(tail) and words[:len(head)] == head and words[len(words) - len(tail):] == tail:
            return rewritten_in_span(item, " ".join(pieces[len(head):len(pieces) - len(tail)]), self.name)
        return None


_ARTICLE = re.compile(r"^\s*(?:a|an|the)\s+", re.IGNORECASE)


def _content_words(text: str) -> list[str]:
    """Lower-cased words of `text` without a leading article."""
    return lower_words(_ARTICLE.sub("", text))


def _phrase(words: list[str]) -> re.Pattern[str]:
    """A case-insensitive regex for the word sequence `words` as whole words, any separators between them."""
    return re.compile(r"(?<![\w'-])" + r"[^\w'-]+".join(map(re.escape, words)) + r"(?![\w'-])", re.IGNORECASE)
