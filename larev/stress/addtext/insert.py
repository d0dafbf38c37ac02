"""Where the attack text goes: the start, the end, or a seeded random gap between two words of the rationale.

Chen et al. ("Can Rationalization Improve Robustness?", section 4.1) insert the attack sentence "at different
positions of context ... the beginning, the end and a random position in between" (between sentences of a
multi-sentence passage). A free-text rationale is often a single sentence, so the random position here is a
gap between two words.

The insertion is a splice: the original text is kept byte for byte and one piece is added at one character
offset, `inserted + " "` at the start, `" " + inserted` at the end or right after a word. Hence the original
word sequence is a subsequence of the perturbed one, and the original text is contiguous except for the one
gap the random position opens. Removing the piece at `offset` gives the original back.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

Position = Literal["start", "end", "random"]
POSITIONS: tuple[Position, ...] = ("start", "end", "random")

_WORD = re.compile(r"\S+")  # a whitespace-separated word, as str.split() sees it


@dataclass(frozen=True)
class Insertion:
    """A perturbed text with where the piece went.

    text: the perturbed text; offset: character offset in the original where `piece` was spliced in
    (text == original[:offset] + piece + original[offset:]); word_index: how many original words precede the
    inserted text.
    """

    text: str
    piece: str
    offset: int
    word_index: int


def insert_text(original: str, inserted: str, position: Position, seed: int) -> Insertion:
    """Splice `inserted` (non-blank, no surrounding whitespace) into `original` at `position`.

    random: a gap between two consecutive words drawn uniformly with `random.Random(seed)`; a text of fewer
    than two words has no such gap, and then the start or the end is drawn instead (section 4.1's "random
    position in between" cannot exist there). start and end ignore the seed.
    """
    if not inserted.strip() or inserted != inserted.strip():
        raise ValueError(f"the inserted text must be non-blank without surrounding whitespace: {inserted!r}")
    spans = [m.span() for m in _WORD.finditer(original)]
    if position == "random":
        rng = random.Random(seed)
        if len(spans) >= 2:
            k = rng.randrange(1, len(spans))  # insert after word k-1, before word k
            offset = spans[k - 1][1]
            return Insertion(original[:offset] + " " + inserted + original[offset:], " " + inserted, offset, k)
        position = rng.choice(("start", "end"))
    if position == "start":
        return Insertion(inserted + " " + original, inserted + " ", 0, 0)
    if position == "end":
        return Insertion(original + " " + inserted, " " + inserted, len(original), len(spans))
    raise ValueError(f"unknown position {position!r}; expected one of {list(POSITIONS)}")
