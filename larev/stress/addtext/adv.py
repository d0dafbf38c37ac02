"""AddText-Adv: a sentence that overlaps the example's input lexically but is about other things.

Built from the query (the NLI hypothesis or the QA question) in the manner of AddOneSent (Chen et al., section
4.1): the words of its noun phrases, names and numbers are swapped for words of the same kind that occur nowhere
in the example's input, negations, hedges and label words are dropped; verbs, prepositions and function words
stay. The adaptation to NLI / QA and why the label is preserved: docs/methods.md#addtext-adv.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from larev.stress.addtext.words import DETERMINERS, is_banned, is_content, words

_SPLIT = re.compile(r"^(\W*)(.*?)(\W*)$", re.S)
_SENTENCE_END = re.compile(r"[.!?;:]")
_SWAP_NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve")
_COUNTABLE = frozenset(_SWAP_NUMBERS) | {"eleven", "twenty"}
_SINGULAR_DETERMINERS = frozenset({"a", "an", "this", "that", "each", "every", "another", "one"})


# ---- word classes (same-kind swaps) ------------------------------------------------------------------------

def _pluralise(noun: str) -> str:
    irregular = {"man": "men", "woman": "women", "child": "children", "person": "people", "mouse": "mice",
                 "goose": "geese", "ox": "oxen", "wolf": "wolves", "calf": "calves", "sheep": "sheep",
                 "deer": "deer", "fish": "fish"}
    if noun in irregular:
        return irregular[noun]
    if noun.endswith("man"):
        return noun[:-3] + "men"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


_PEOPLE = (
    "man", "woman", "boy", "girl", "child", "kid", "person", "lady", "guy", "gentleman", "baby", "toddler",
    "teenager", "adult", "player", "worker", "chef", "cook", "doctor", "nurse", "teacher", "student", "farmer",
    "soldier", "officer", "artist", "musician", "singer", "dancer", "athlete", "cyclist", "biker", "rider",
    "skier", "surfer", "skateboarder", "swimmer", "runner", "climber", "tourist", "vendor", "customer", "driver",
    "pilot", "fisherman", "firefighter", "policeman", "janitor", "waiter", "waitress", "bride", "groom", "mother",
    "father", "son", "daughter", "brother", "sister", "grandmother", "grandfather", "friend", "clown", "performer",
    "photographer", "mechanic", "carpenter", "painter", "sailor", "monk", "priest", "judge", "scientist",
    "surgeon", "baker", "butcher", "shopper", "hiker", "camper", "jogger", "golfer", "boxer", "wrestler",
    "drummer", "guitarist", "violinist", "pianist", "tailor", "shepherd", "grocer", "courier", "florist",
    "bartender", "actor", "actress", "librarian", "plumber", "gardener", "lifeguard", "referee", "coach",
    "couple", "crowd", "family", "group", "team",
)
_ANIMALS = (
    "dog", "cat", "horse", "cow", "bird", "duck", "goat", "sheep", "pig", "bull", "camel", "elephant", "monkey",
    "puppy", "kitten", "fish", "deer", "rabbit", "chicken", "donkey", "lion", "tiger", "bear", "squirrel",
    "parrot", "pony", "goose", "swan", "seagull", "pigeon", "owl", "eagle", "fox", "wolf", "mouse", "frog",
    "snake", "turtle", "dolphin", "whale", "zebra", "giraffe", "ox", "lamb", "calf", "hamster", "poodle",
    "animal", "pet",
)
_COLOURS = ("red", "blue", "green", "yellow", "orange", "purple", "pink", "black", "white", "brown", "gray",
            "grey", "silver", "gold", "tan", "beige", "maroon", "turquoise")


def _classed(nouns: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return nouns, tuple(_pluralise(n) for n in nouns)


_NOUN_CLASSES = {"person": _classed(_PEOPLE), "animal": _classed(_ANIMALS)}
_CLASS_OF: dict[str, tuple[str, bool]] = {}
for _name, (_sg, _pl) in _NOUN_CLASSES.items():
    _CLASS_OF.update({w: (_name, False) for w in _sg})
    _CLASS_OF.update({w: (_name, True) for w in _pl if w not in _sg})  # sheep, deer, fish: singular
_CLASS_OF.update({"people": ("person", True), "kids": ("person", True)})
_CLASSED = frozenset(_CLASS_OF) | frozenset(_COLOURS)

# Last-resort replacements when the data's own pools have nothing left for a row (tiny example sets): things
# and places, outside the classes above.
_FALLBACK_HEADS = ("lighthouse", "violin", "glacier", "kettle", "cathedral", "trumpet", "volcano", "sawmill",
                   "windmill", "typewriter", "quarry", "canoe", "orchard", "telescope", "accordion", "ferry",
                   "harbour", "chimney", "meadow", "lantern", "compass", "barrel", "balcony", "fountain")
_FALLBACK_MODIFIERS = ("wooden", "ancient", "striped", "wealthy", "tiny", "northern", "velvet", "marble",
                       "foreign", "sleepy", "enormous", "polished", "rural", "rusty", "narrow", "famous")
_FALLBACK_NAMES = ("Aldric", "Beatrix", "Cassian", "Dorothea", "Edmund", "Fenella", "Godric", "Hester")
_PRONOUNS = {"he": False, "she": False, "someone": False, "somebody": False, "they": True}

_NEGATION_REWRITES = {"no": "some", "none": "some", "nobody": "somebody", "nothing": "something",
                      "nowhere": "somewhere", "neither": "either", "nor": "or", "cannot": "can", "without": "with",
                      "won't": "will", "can't": "can", "shan't": "shall"}

_IRREGULAR_PLURALS = frozenset({"people", "children", "police", "feet", "teeth", "mice", "geese", "cattle", "folk",
                                "oxen", "clergy", "staff"})
_SINGULAR_MEN = frozenset({"specimen", "abdomen", "omen", "stamen", "ramen", "semen", "regimen", "amen"})


# ---- tokens and noun phrases -------------------------------------------------------------------------------

@dataclass
class _Token:
    lead: str
    core: str
    trail: str

    @classmethod
    def of(cls, raw: str) -> _Token:
        lead, core, trail = _SPLIT.match(raw).groups()
        return cls(lead, core, trail)

    @property
    def text(self) -> str:
        return self.lead + self.core + self.trail


def _tokens(text: str) -> list[_Token]:
    return [_Token.of(raw) for raw in text.split()]


def _is_plural(word: str) -> bool:
    w = word.lower()
    if w in _CLASS_OF:
        return _CLASS_OF[w][1]
    if w in _IRREGULAR_PLURALS or (w.endswith("men") and w not in _SINGULAR_MEN):
        return True  # men, women, firemen, ...
    return len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is"))


def _verbal(word: str) -> bool:
    """A participle-looking word ('sleeping', 'dressed'): it ends a noun phrase rather than continuing it."""
    w = word.lower()
    return len(w) > 4 and w.endswith(("ing", "ed"))


def _is_number(word: str) -> bool:
    return word.isdigit() or word.lower() in _COUNTABLE


def _slots(tokens: list[_Token], heads: Collection[str] = (), modifiers: Collection[str] = ()) -> dict[int, str]:
    """Token index -> role ('head', 'modifier', 'number', 'name') of the words AddText-Adv swaps.

    A noun phrase is a determiner or number followed by up to three content words. The run ends at a function
    word or punctuation, before a participle, an -ly adverb or (after a singular determiner) a plural-looking
    word that is not its first word ("an eagle flies"), and right after a plural-looking word ("two janitors
    sweep").
    Its head is the first word of the run that `heads` knows and `modifiers` does not, else the run's last
    word; words before the head are modifiers, words after it stay (usually a verb: "a ballgame wash ...").
    A sentence-initial content word is a bare head when `heads` knows it ("People are ...").
    """
    roles: dict[int, str] = {}
    starts = {0} | {i + 1 for i, t in enumerate(tokens) if _SENTENCE_END.search(t.trail) or
                    (not t.core and _SENTENCE_END.search(t.lead))}
    n = len(tokens)
    i = 0
    while i < n:
        t = tokens[i]
        low = t.core.lower()
        if t.core and _is_number(t.core):
            roles[i] = "number"
        if low in DETERMINERS and not t.trail:
            run: list[int] = []
            j = i + 1
            while j < n and len(run) < 3:
                c = tokens[j]
                if not c.core or c.lead or not is_content(c.core) or (run and _verbal(c.core)) \
                        or (run and c.core.lower().endswith("ly")):
                    break
                if run and low in _SINGULAR_DETERMINERS and _is_plural(c.core):
                    break
                run.append(j)
                if c.trail or _is_plural(c.core):
                    break
                j += 1
            if run:
                known = [r for r in run if tokens[r].core.lower() in _CLASS_OF or
                         (tokens[r].core.lower() in heads and tokens[r].core.lower() not in modifiers)]
                head = known[0] if known else run[-1]
                for r in run:
                    if r < head:
                        roles[r] = "modifier"
                roles[head] = "head"
                i = head + 1
                continue
        if i not in roles and t.core and is_content(t.core):
            if i in starts:
                if low in heads or low in _CLASS_OF:
                    roles[i] = "head"
            elif t.core[0].isupper():
                roles[i] = "name"
        i += 1
    return roles


@dataclass(frozen=True)
class AdvLexicon:
    """Replacement pools by kind, learnt from the examples' input texts with the noun-phrase scan; words of the
    module's person / animal / colour classes are left out (those swap within their class)."""

    heads: tuple[str, ...]
    plural_heads: tuple[str, ...]
    modifiers: tuple[str, ...]
    names: tuple[str, ...]

    @classmethod
    def from_texts(cls, texts: Iterable[str | None]) -> AdvLexicon:
        """Two passes of the scan: the first counts how often each word is a phrase's head or a modifier; the
        second rescans with those majorities deciding each phrase's head, and keeps the words that are mostly
        of one kind (seen at least twice)."""
        tokenised = [_tokens(t) for t in texts if t]
        heads, modifiers, names = cls._count(tokenised, frozenset(), frozenset())
        heads, modifiers, names = cls._count(tokenised, *cls._majorities(heads, modifiers))
        head_set, modifier_set = cls._majorities(heads, modifiers)
        good = [w for w in head_set if not _verbal(w) and not w.endswith("ly") and w not in _CLASSED]
        return cls(heads=tuple(sorted(w for w in good if not _is_plural(w))),
                   plural_heads=tuple(sorted(w for w in good if _is_plural(w))),
                   modifiers=tuple(sorted(w for w in modifier_set if w not in _CLASSED)),
                   names=tuple(sorted(w for w, n in names.items() if n >= 2)))

    @staticmethod
    def _count(tokenised: list[list[_Token]], heads: frozenset[str], modifiers: frozenset[str]):
        head_n: Counter[str] = Counter()
        modifier_n: Counter[str] = Counter()
        names: Counter[str] = Counter()
        for tokens in tokenised:
            for i, role in _slots(tokens, heads, modifiers).items():
                core = tokens[i].core
                if not core.isalpha() or len(core) < 2 or is_banned(core):
                    continue  # hyphenated / numeric / one-letter words make poor replacements
                if role == "head":
                    head_n[core.lower()] += 1
                elif role == "modifier":
                    modifier_n[core.lower()] += 1
                elif role == "name":
                    names[core] += 1
        return head_n, modifier_n, names

    @staticmethod
    def _majorities(heads: Counter[str], modifiers: Counter[str]) -> tuple[frozenset[str], frozenset[str]]:
        return (frozenset(w for w, n in heads.items() if n >= 2 and n > modifiers[w]),
                frozenset(w for w, n in modifiers.items() if n >= 2 and n > heads[w]))

    @property
    def known_heads(self) -> frozenset[str]:
        return frozenset(self.heads) | frozenset(self.plural_heads)


# ---- the attack sentence -----------------------------------------------------------------------------------

def _draw(pool: tuple[str, ...], fallback: tuple[str, ...], rng: random.Random, ok) -> str | None:
    """A seeded draw from `pool` passing `ok` (rejection sampling, so large pools cost nothing), else from
    the fixed fallback list."""
    for _ in range(64 if pool else 0):
        c = rng.choice(pool)
        if ok(c):
            return c
    good = [c for c in fallback if ok(c)]
    return rng.choice(good) if good else None


def _article(word: str) -> str:
    """'a' or 'an' by the word's first sound, with the common spelling exceptions."""
    w = word.lower()
    if w.startswith(("uni", "use", "usu", "uti", "eu", "one", "once")):
        return "a"
    if w.startswith(("hour", "honest", "honor", "honour", "heir")):
        return "an"
    return "an" if w[:1] in tuple("aeiou") else "a"


def _match_case(word: str, like: str) -> str:
    if len(like) > 1 and like.isupper():
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _replacement(role: str, core: str, lexicon: AdvLexicon, rng: random.Random, ok) -> str | None:
    low = core.lower()
    if role == "number":
        if core.isdigit():
            lo = 10 ** (len(core) - 1) if len(core) > 1 else 0
            return next((d for d in (str(rng.randrange(lo, 10 ** len(core))) for _ in range(20)) if ok(d)), None)
        return _draw(_SWAP_NUMBERS, _SWAP_NUMBERS, rng, ok)
    if role == "head":
        if low in _CLASS_OF:
            name, plural = _CLASS_OF[low]
            forms = _NOUN_CLASSES[name][1 if plural else 0]
            return _draw(forms, forms, rng, ok)
        plural = _is_plural(core)
        pool = lexicon.plural_heads if plural else lexicon.heads
        return _draw(pool, tuple(_pluralise(w) for w in _FALLBACK_HEADS) if plural else _FALLBACK_HEADS, rng, ok)
    if role == "modifier":
        if low in _COLOURS:
            return _draw(_COLOURS, _COLOURS, rng, ok)
        return _draw(lexicon.modifiers, _FALLBACK_MODIFIERS, rng, ok)
    return _draw(lexicon.names, _FALLBACK_NAMES, rng, ok)


def adv_text(query: str, lexicon: AdvLexicon, seed: int, avoid: Collection[str] = ()) -> str:
    """The AddText-Adv sentence for one query (see the module docstring), deterministic in `seed`.

    avoid: lower-cased words the replacements must not be, on top of banned words and the query's own words
    (callers pass the example's input words and the row's forbidden words). The result always differs from
    the query.
    """
    rng = random.Random(seed)
    tokens = _tokens(query)
    avoid = {w.lower() for w in avoid} | set(words(query))
    used: set[str] = set()

    def ok(c: str, low: str = "") -> bool:
        c = c.lower()
        return c != low and c not in avoid and c not in used and not is_banned(c)

    roles = _slots(tokens, lexicon.known_heads, frozenset(lexicon.modifiers))
    changed: set[int] = set()
    if not roles:
        pronoun = next((i for i, t in enumerate(tokens) if t.core.lower() in _PRONOUNS), None)
        if pronoun is not None:  # "They are outside." -> "The sailors are outside."
            forms = _NOUN_CLASSES["person"][1 if _PRONOUNS[tokens[pronoun].core.lower()] else 0]
            noun = _draw(forms, forms, rng, ok) or forms[0]
            tokens[pronoun].core = _match_case("the " + noun, tokens[pronoun].core)
            changed.add(pronoun)
        else:  # no noun phrase: swap the last content word as a head
            content = [i for i, t in enumerate(tokens) if t.core and is_content(t.core)]
            if content:
                roles = {content[-1]: "head"}
    if not roles and not changed:
        noun = _draw(lexicon.heads, _FALLBACK_HEADS, rng, ok) or _FALLBACK_HEADS[0]
        return f"The {noun} is there."
    mapping: dict[tuple[str, str], str] = {}
    for i in sorted(roles):
        role, core = roles[i], tokens[i].core
        key = (role, core.lower())
        if key not in mapping:
            new = _replacement(role, core, lexicon, rng, lambda c, low=core.lower(): ok(c, low))
            if new is None:  # everything excluded (a degenerate vocabulary): any different fallback word
                new = next(w for w in _FALLBACK_HEADS if w != core.lower())
            mapping[key] = new if role == "name" else new.lower()
            used.add(new.lower())
        tokens[i].core = _match_case(mapping[key], core)
        changed.add(i)
    # Negations, hedges and label words go (section 4.1: the attack must not change the label).
    for t in tokens:
        low = t.core.lower().replace("\u2019", "'")
        if low in _NEGATION_REWRITES:
            t.core = _match_case(_NEGATION_REWRITES[low], t.core)
        elif low.endswith("n't") and low != "n't":
            t.core = t.core[:-3]
        elif t.core and is_banned(low):
            t.core = ""
    # Articles before a swapped word agree with it.
    for i, t in enumerate(tokens[:-1]):
        if t.core.lower() in ("a", "an") and not t.trail and i + 1 in changed and tokens[i + 1].core:
            article = _article(tokens[i + 1].core)
            t.core = _match_case(article, t.core)
    return " ".join(t.text for t in tokens if t.text)
