"""WordNet 3.0 antonym pointers read from the database files Debian's `wordnet-base` installs (backend 'wordnet')."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator

from larev.llm import Rewritten
from larev.methods.leakage_aware.antonyms.request import AntonymRequest, rewritten_in_span

log = logging.getLogger(__name__)


_DATA_FILES = {"adj": "data.adj", "adv": "data.adv", "noun": "data.noun", "verb": "data.verb"}


_POS_OF_CHAR = {"a": "adj", "s": "adj", "r": "adv", "n": "noun", "v": "verb"}


_POS_RANK = {"adj": 0, "verb": 1, "noun": 2, "adv": 3}


_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")


# WordNet's morphy detachment rules (suffix, ending) per part of speech, with the inflection each undoes.
_RULES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "noun": (("ses", "s", "s"), ("xes", "x", "s"), ("zes", "z", "s"), ("ches", "ch", "s"), ("shes", "sh", "s"),
             ("men", "man", "s"), ("ies", "y", "s"), ("s", "", "s")),
    "verb": (("ies", "y", "s"), ("es", "e", "s"), ("es", "", "s"), ("s", "", "s"), ("ied", "y", "ed"),
             ("ed", "e", "ed"), ("ed", "", "ed"), ("ing", "e", "ing"), ("ing", "", "ing")),
    "adj": (("iest", "y", "est"), ("ier", "y", "er"), ("est", "e", "est"), ("est", "", "est"), ("er", "e", "er"),
            ("er", "", "er"), ("ily", "y", "ly"), ("ly", "", "ly")),
    "adv": (),
}


_CVC = re.compile(r"(?:^|[^aeiou])[aeiou][^aeiouwxy]$")


_IRREGULAR = {"be": {"s": "is", "ed": "was", "ing": "being"}, "have": {"s": "has", "ed": "had", "ing": "having"},
              "do": {"s": "does", "ed": "did"}, "go": {"s": "goes", "ed": "went"}}


def inflect(base: str, kind: str) -> str:
    """A crude regular inflection of `base` ('s', 'ed', 'ing', 'er', 'est', 'ly'; '' leaves it): final
    consonants double only in one-syllable words, and only be/have/do/go are irregular."""
    if not kind:
        return base
    if base in _IRREGULAR and kind in _IRREGULAR[base]:
        return _IRREGULAR[base][kind]
    vowel_y = len(base) >= 2 and base.endswith("y") and base[-2] not in "aeiou"
    if kind in ("ed", "ing", "er", "est") and _CVC.search(base) and len(re.findall(r"[aeiouy]+", base)) == 1:
        base += base[-1]  # one-syllable consonant-vowel-consonant: stop -> stopping, big -> bigger
    if kind == "s":
        if base.endswith("man"):
            return base[:-3] + "men"
        if base.endswith(("s", "x", "z", "ch", "sh")):
            return base + "es"
        return base[:-1] + "ies" if vowel_y else base + "s"
    if kind == "ing":
        if base.endswith("ie"):
            return base[:-2] + "ying"
        return base[:-1] + "ing" if base.endswith("e") and not base.endswith("ee") else base + "ing"
    if kind in ("ed", "er", "est"):
        if base.endswith("e"):
            return base + kind[1:]
        return base[:-1] + "i" + kind if vowel_y else base + kind
    if kind == "ly":
        if vowel_y:
            return base[:-1] + "ily"
        if base.endswith("le"):
            return base[:-1] + "y"
        return base + "ally" if base.endswith("ic") else base + "ly"
    raise ValueError(f"unknown inflection {kind!r}")


def _surface_inflection(word: str, pos: str) -> str:
    """The regular suffix an irregular form still shows ('sitting' -> 'ing'), or '' ('went', 'better')."""
    kinds = {"verb": ("ing", "ed", "s"), "noun": ("s",), "adj": ("est", "er")}.get(pos, ())
    return next((k for k in kinds if word.endswith(k) and word not in ("better", "best")), "")


def _inflect_phrase(phrase: str, kind: str, pos: str) -> str:
    """Inflect a (possibly multi-word) lemma: verbs on their first word, other parts of speech on the last."""
    if not kind:
        return phrase
    words = phrase.split(" ")
    i = 0 if pos == "verb" else len(words) - 1
    words[i] = inflect(words[i], kind)
    return " ".join(words)


def _lemma(raw: str) -> str:
    return _ADJ_MARKER.sub("", raw).replace("_", " ").lower()


class WordNetAntonyms:
    """Antonyms from the WordNet 3.0 database files (data.adj/adv/noun/verb; the `wordnet-base` Debian package
    installs them in /usr/share/wordnet), read directly: no NLTK.

    Antonyms are the lexical '!' pointers (`! offset pos source/target`, the 4 hex digits naming source and
    target word numbers; 0000 links every word of both synsets). With `indirect=True`, adjective satellites
    (ss_type 's') also get the antonyms of their head synset through the '&' pointer ('scorching' -> hot ->
    'cold'), ranked after every direct one; off by default because they are noisy ('walking' -> 'distant').
    Candidates are ranked by the source sense's frequency rank in index.<pos> when present, then file order;
    across parts of speech adjectives come first, then verbs, nouns, adverbs. The first one is used.

    Morphology is kept simple: a word without antonyms is reduced with WordNet's detachment rules (-s, -es,
    -ed, -ing, -er, -est, undoubling a final consonant, and -ly -> adjective, kept only when the antonym's -ly
    form is a WordNet adverb) and then the <pos>.exc exception lists. A rule-reduced match re-inflects the
    antonym with the same regular suffix (`inflect`, crude: 'larger' -> large -> 'smaller'); an exception-list
    match re-inflects only a regular suffix it still shows ('sitting' -> sit -> 'standing'), else gives the
    antonym's base form ('worse' -> bad -> 'good'). The index is built lazily on first use (about a second
    for the full database) and is thread-safe. Backend 'wordnet'.
    """

    name = "wordnet"

    def __init__(self, path: str | os.PathLike[str] = "/usr/share/wordnet", *, indirect: bool = False):
        self.path = os.fspath(path)
        self.indirect = indirect
        self._lock = threading.Lock()
        self._index: dict[tuple[str, str], list[str]] | None = None
        self._exceptions: dict[str, dict[str, list[str]]] = {}
        self._adverbs: set[str] = set()
        self._warned = False

    @property
    def available(self) -> bool:
        """Whether the four data files are there."""
        return all(os.path.isfile(os.path.join(self.path, f)) for f in _DATA_FILES.values())

    # -- loading

    def _load(self) -> dict[tuple[str, str], list[str]]:
        with self._lock:
            if self._index is None:
                self._index = self._build()
                for pos in _DATA_FILES:
                    self._exceptions[pos] = self._read_exc(pos)
            return self._index

    def _read_exc(self, pos: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        path = os.path.join(self.path, f"{pos}.exc")
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 2:
                        out.setdefault(_lemma(parts[0]), []).extend(_lemma(p) for p in parts[1:])
        return out

    def _build(self) -> dict[tuple[str, str], list[str]]:
        """(lemma, pos) -> ranked antonym lemmas."""
        synsets: dict[tuple[str, int], tuple[str, list[str], list[tuple[str, int, str, int, int]]]] = {}
        file_order: dict[tuple[str, int], int] = {}
        adverbs: set[str] = set()
        for pos, name in _DATA_FILES.items():
            with open(os.path.join(self.path, name), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith(" "):
                        continue
                    if pos == "adv":
                        fields = line.split(" ", 5)
                        if len(fields) > 4:
                            adverbs.add(_lemma(fields[4]))
                    if " ! " not in line and not (self.indirect and pos == "adj" and " & " in line):
                        continue
                    parsed = _parse_data_line(line)
                    if parsed is None:
                        continue
                    offset, ss_type, words, pointers = parsed
                    synsets[(pos, offset)] = (ss_type, words, pointers)
                    file_order[(pos, offset)] = len(file_order)
        ranks = self._sense_ranks({(pos, w) for (pos, _), (_, words, _) in synsets.items() for w in words})
        direct: dict[tuple[str, str], list[tuple[tuple[int, int, int], str]]] = {}

        def targets(tgt_pos: str, tgt_off: int, tgt: int) -> list[str]:
            target = synsets.get((tgt_pos, tgt_off))
            if target is None:
                return []
            words = target[1]
            return list(words) if tgt == 0 else ([words[tgt - 1]] if 0 < tgt <= len(words) else [])

        head_antonyms: dict[tuple[str, int], list[str]] = {}  # synset -> antonyms of its words (for satellites)
        for key, (_, words, pointers) in synsets.items():
            pos, offset = key
            for symbol, tgt_off, tgt_char, src, tgt in pointers:
                if symbol != "!":
                    continue
                sources = words if src == 0 else ([words[src - 1]] if 0 < src <= len(words) else [])
                ants = targets(_POS_OF_CHAR[tgt_char], tgt_off, tgt)
                head_antonyms.setdefault(key, []).extend(ants)
                for word in sources:
                    rank = (0, ranks.get((pos, word), {}).get(offset, 99), file_order[key])
                    direct.setdefault((word, pos), []).extend((rank, ant) for ant in ants)
        # adjective satellites: the head's antonyms through '&' (indirect antonyms)
        for key, (ss_type, words, pointers) in synsets.items():
            if not self.indirect or key[0] != "adj" or ss_type != "s":
                continue
            for symbol, head_off, _, _, _ in pointers:
                if symbol != "&":
                    continue
                for word in words:
                    rank = (1, ranks.get(("adj", word), {}).get(key[1], 99), file_order[key])
                    direct.setdefault((word, "adj"), []).extend(
                        (rank, ant) for ant in head_antonyms.get(("adj", head_off), []))
        index: dict[tuple[str, str], list[str]] = {}
        for k, cands in direct.items():
            seen: list[str] = []
            for _, ant in sorted(cands, key=lambda c: c[0]):
                if ant != k[0] and ant not in seen:
                    seen.append(ant)
            if seen:
                index[k] = seen
        self._adverbs = adverbs
        log.info("WordNet antonyms: %d (lemma, pos) entries from %s", len(index), self.path)
        return index

    def _sense_ranks(self, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], dict[int, int]]:
        """For each wanted (pos, lemma): synset offset -> sense rank (0 = most frequent) from index.<pos>."""
        out: dict[tuple[str, str], dict[int, int]] = {}
        lemmas = {pos: {w.replace(" ", "_") for p, w in wanted if p == pos} for pos in _DATA_FILES}
        for pos in _DATA_FILES:
            path = os.path.join(self.path, f"index.{pos}")
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    head = line.split(" ", 1)[0]
                    if line.startswith(" ") or head not in lemmas[pos]:
                        continue
                    parts = line.split()
                    try:
                        n = int(parts[2])
                        offsets = [int(o) for o in parts[-n:]]
                    except (ValueError, IndexError):
                        continue
                    out[(pos, _lemma(head))] = {o: i for i, o in enumerate(offsets)}
        return out

    # -- lookup

    def antonyms(self, word: str) -> list[str]:
        """Ranked antonyms of `word` (any case, inflected or not), inflected like it; [] when unknown."""
        if not self.available:
            return []
        index = self._load()
        text = " ".join(word.lower().replace("_", " ").split())
        if not text:
            return []
        found: list[str] = []
        for base, kind, pos in self._bases(text, index):
            for ant in index[(base, pos)]:
                ant = _inflect_phrase(ant, kind, pos)
                if kind == "ly" and ant not in self._adverbs:
                    continue  # an adjective's antonym made an adverb must be a WordNet adverb ('fewestly' is not)
                if ant != text and ant not in found:
                    found.append(ant)
            if found:
                return found
        return found

    def _bases(self, text: str, index: dict[tuple[str, str], list[str]]) -> Iterator[tuple[str, str, str]]:
        """(base, inflection to re-apply, pos) candidates for `text`, best first."""
        by_pos = sorted(_POS_RANK, key=_POS_RANK.__getitem__)
        yield from ((text, "", pos) for pos in by_pos if (text, pos) in index)
        for pos in by_pos:
            for suffix, ending, kind in _RULES[pos]:
                if not (text.endswith(suffix) and len(text) > len(suffix) + 1):
                    continue
                base = text[:-len(suffix)] + ending
                bases = [base]
                if not ending and len(base) > 2 and base[-1] == base[-2] and base[-1] not in "aeiouls":
                    bases.append(base[:-1])  # a doubled final consonant: winning -> win, bigger -> big
                yield from ((b, kind, pos) for b in bases if (b, pos) in index)
        for pos in by_pos:
            for base in self._exceptions.get(pos, {}).get(text, []):
                if (base, pos) in index:
                    yield base, _surface_inflection(text, pos), pos

    def rewrite(self, item: AntonymRequest) -> Rewritten | None:
        if not self.available:
            if not self._warned:
                log.info("WordNet files not found under %s; the wordnet antonym backend is skipped (install the "
                         "Debian package wordnet-base or set wordnet_path)", self.path)
                self._warned = True
            return None
        found = self.antonyms(item.term.strip())
        return rewritten_in_span(item, found[0], self.name) if found else None


def _parse_data_line(line: str) -> tuple[int, str, list[str], list[tuple[str, int, str, int, int]]] | None:
    """offset, ss_type, lemmas, pointers (symbol, target offset, target pos char, source no., target no.)."""
    fields = line.split(" | ", 1)[0].split()
    try:
        offset, ss_type, w_cnt = int(fields[0]), fields[2], int(fields[3], 16)
        words = [_lemma(fields[4 + 2 * i]) for i in range(w_cnt)]
        at = 4 + 2 * w_cnt
        p_cnt = int(fields[at])
        pointers = []
        for i in range(p_cnt):
            symbol, tgt_off, tgt_pos, st = fields[at + 1 + 4 * i: at + 5 + 4 * i]
            pointers.append((symbol, int(tgt_off), tgt_pos, int(st[:2], 16), int(st[2:], 16)))
    except (ValueError, IndexError):
        return None
    return offset, ss_type, words, pointers
