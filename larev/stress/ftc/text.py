"""Text helpers of FTC's rule-based extract and transform: normalising explanations, word tokens and word classes.

e-SNLI text comes PTB-tokenised ("does n't", "ca n't", "`` quoted ''", "dogs ."); `normalise` joins it back so
one set of patterns reads both forms. Matching spans against a hypothesis works on `Token`s (words with their
character offsets) compared through `match_key`, which lower-cases, crudely stems and folds determiners and
forms of 'be' / 'have' / 'do' together (section 2.4 allows stemmed word replacement).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DETERMINERS = frozenset("a an the this that these those his her its their my your our some".split())
BE = frozenset("is are was were be being been am".split())
HAVE = frozenset("has have had having".split())
DO = frozenset("do does did".split())
MODALS = frozenset("can could may might must will would should shall".split())
# Words that may open a predicate before its main word: dropped when a predicate fills a slot after 'is'.
AUX = BE | HAVE | DO | MODALS | frozenset("to also both either simultaneously probably likely definitely "
                                          "certainly still just now".split())
PRONOUNS = frozenset("he she it they we you i one someone somebody something everyone everybody there "
                     "him them us me who which what".split())
NEGATIONS = frozenset("not n't never no".split())
# Words that start a verb phrase: the words before the first of them are a clause's subject.
VERB_MARKERS = BE | HAVE | DO | MODALS | frozenset(
    "can't cannot couldn't won't wouldn't shouldn't isn't aren't wasn't weren't doesn't don't didn't "
    "hasn't haven't".split())
NUMBERS = frozenset("two three four five six seven eight nine ten several many few".split())
FUNCTION_WORDS = (DETERMINERS | AUX | PRONOUNS | NEGATIONS | VERB_MARKERS | NUMBERS | frozenset(
    "and or but of in on at to for with by from as than then so if because while not same other another "
    "thing things".split()))

# Common nouns ending in -ing, so that '-ing' alone does not make a word a participle.
ING_NOUNS = frozenset("""
thing things something nothing anything everything clothing building buildings wedding weddings painting paintings
ceiling morning evening ring rings king swing swings string strings spring wing wings sibling siblings railing
pudding awning icing frosting meeting gathering offering lightning parking bedding earring earrings sling outing
feeling stuffing dumpling duckling seedling sightseeing skiing
""".split())

_WORD = re.compile(r"[A-Za-z0-9]+(?:['\-][A-Za-z0-9]+)*")


@dataclass(frozen=True)
class Token:
    """A word of a text and its [start, end) character offsets."""

    text: str
    start: int
    end: int

    @property
    def lower(self) -> str:
        return self.text.lower()


def normalise(text: str) -> str:
    """One clean line: PTB tokenisation undone ("ca n't" -> "can't", "dogs ." -> "dogs."), quotes straightened,
    whitespace collapsed. Case is kept."""
    t = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    t = t.replace("``", '"').replace("''", '"')
    t = re.sub(r"(\w)\s+(n't)\b", r"\1\2", t)                # does n't -> doesn't, ca n't -> can't
    t = re.sub(r"(\w)\s+('(?:s|re|m|ll|d|ve))\b", r"\1\2", t)  # dog 's -> dog's
    t = re.sub(r"\s+([.,;:!?])", r"\1", t)
    t = re.sub(r"\s+", " ", t)
    return t.strip()


def tokens(text: str) -> list[Token]:
    """The words of `text` (letters, digits, inner apostrophes and hyphens) with their offsets."""
    return [Token(m.group(0), m.start(), m.end()) for m in _WORD.finditer(text)]


def stem(word: str) -> str:
    """A crude suffix stripper, only for matching: plays/played/playing -> play, rides/riding -> rid."""
    w = word.lower()
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[:-len(suffix)]
            break
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # running -> runn -> run
    if len(w) >= 4 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]  # ride -> rid (riding -> rid)
    return w


def match_key(word: str) -> str:
    """What two words must share to match: their stem, with every form of be / have / do as one word."""
    w = word.lower()
    if w in BE:
        return "<be>"
    if w in HAVE:
        return "<have>"
    if w in DO:
        return "<do>"
    return stem(w)


def is_content(word: str) -> bool:
    return word.lower() not in FUNCTION_WORDS


def has_content(text: str) -> bool:
    """Whether a span has at least one content word (not only pronouns, determiners, auxiliaries ...)."""
    return any(is_content(t.text) for t in tokens(text))


def subject_length(words: list[Token] | list[str], max_len: int = 6) -> int:
    """How many leading words of a clause are its subject: those before the first verb marker ('he has a mop'
    -> 1, 'the girl is standing' -> 2), a leading pronoun ('he jumps' -> 1), or, after an article, the words
    before an early past form ('the boy jumped' -> 2) or a third-person -s form after a singular noun ('a man
    stands here' -> 2); 0 when there is none ('in front of the net')."""
    texts = [w.text.lower() if isinstance(w, Token) else w.lower() for w in words]
    for i, w in enumerate(texts[:max_len + 1]):
        if w in VERB_MARKERS:
            return i if 0 < i < len(texts) else 0
    if len(texts) > 1 and texts[0] in PRONOUNS:
        return 1
    if texts and texts[0] in DETERMINERS:
        for i, w in enumerate(texts[2:4], start=2):
            if len(w) > 4 and w.endswith("ed"):
                return i
        if (len(texts) > 3 and not texts[1].endswith("s") and texts[2].endswith("s")
                and not texts[2].endswith("ss") and texts[2] not in FUNCTION_WORDS):
            return 2  # 'a man stands ...'
    return 0


def aux_length(words: list[Token] | list[str]) -> int:
    """How many leading words are auxiliaries ('must be giving' -> 2), leaving at least one word."""
    texts = [w.text.lower() if isinstance(w, Token) else w.lower() for w in words]
    n = 0
    while n < len(texts) - 1 and texts[n] in AUX:
        n += 1
    return n


def is_participle(word: str) -> bool:
    """Whether a word looks like an -ing participle ('standing', not 'clothing')."""
    w = word.lower()
    return w.endswith("ing") and len(w) > 4 and w not in ING_NOUNS


def looks_like_base_verb(word: str) -> bool:
    """Whether a word could be a bare verb ('walk', not 'made', 'taken', 'walks' or 'walking')."""
    w = word.lower()
    return (w not in FUNCTION_WORDS and not w.endswith(("ed", "en", "ing")) and not (w.endswith("s") and len(w) > 3)
            and w not in _IRREGULAR_PAST)


_IRREGULAR_PAST = frozenset("made done seen gone taken given held sat stood ran ate wore hung left lost met paid "
                            "put read said sent set shot shut slept sold spent stuck taught thought told won wrote "
                            "brought bought caught fought found got had heard kept knew led".split())


def ing_form(verb: str) -> str:
    """The -ing form of a base verb: walk -> walking, ride -> riding, run -> running, lie -> lying."""
    v = verb.lower()
    if v.endswith("ing"):
        return verb
    if v.endswith("ie"):
        return verb[:-2] + "ying"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")) and len(v) > 2:
        return verb[:-1] + "ing"
    if (len(v) in (3, 4) and v[-1] not in "aeiouwxy" and v[-2] in "aeiou" and v[-3] not in "aeiou"
            and not (len(v) == 4 and v[-4] in "aeiou")):
        return verb + verb[-1] + "ing"
    return verb + "ing"
