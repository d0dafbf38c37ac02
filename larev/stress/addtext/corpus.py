"""Unrelated fluent sentences for AddText-Wiki: a generated encyclopedia-like default corpus, or a user file.

Chen et al. ("Can Rationalization Improve Robustness?", section 4.1) insert "an arbitrarily sampled sentence
from Wikipedia", grammatical but irrelevant to the input. The project works offline and ships no Wikipedia
text, so `default_wiki_corpus()` writes its own stand-in: a small template grammar producing encyclopedia-style
sentences about invented towns, rivers, mountains, people, objects, institutions and dates. The topics are
chosen to be unrelated to NLI scenes and QA questions, and no sentence contains a word of `words.BANNED`
(label names, negations, hedges), which the grammar guarantees by construction and `default_wiki_corpus`
checks. All templates and word lists are this module's own.

`load_corpus(path)` reads a user corpus instead: a UTF-8 text file with one sentence per line (blank lines are
skipped); an unreadable, empty or non-UTF-8 file is an `InputError` naming the file and line.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

from larev.stress.addtext.words import is_banned, words
from larev.errors import InputError

# ---- the grammar's lexicon -------------------------------------------------------------------------------

_TOWN_HEADS = ("Ash", "Bel", "Cor", "Dun", "Elm", "Fen", "Gar", "Hal", "Kel", "Lor", "Mar", "Ost", "Pen", "Rav",
               "Sel", "Tor", "Val", "Wes", "Yar", "Brom", "Carn", "Drey", "Ember", "Frost", "Glen", "Hart")
_TOWN_TAILS = ("bridge", "ford", "holm", "mere", "stead", "wick", "dale", "haven", "moor", "thorpe", "field",
               "combe", "minster", "worth", "gate", "stow")
_RIVERS = ("Alder", "Brenn", "Cawl", "Drusk", "Evren", "Fallow", "Gwent", "Harl", "Isel", "Kestra", "Lune",
           "Merrow", "Orla", "Pell", "Quarr", "Rill", "Severl", "Tamsin", "Usk", "Wend")
_LANDS = ("Aldmark", "Borovia", "Caledra", "Dalmeny", "Estrel", "Fennland", "Gorvania", "Halvard", "Istria Minor",
          "Joravia", "Kestland", "Lysaria")
_REGIONS = ("northern uplands", "southern lowlands", "eastern marches", "western coast", "central plateau",
            "lake district", "river valley", "border hills")
_RANGES = ("Harrow Range", "Silverback Hills", "Keld Mountains", "Grey Fells", "Oster Ridge", "Tallow Peaks")
_SEAS = ("Narrow Sea", "Gulf of Vell", "Amber Bay", "Northern Sound", "Bay of Orla", "Pale Strait")
_DIRECTIONS = ("north", "south", "east", "west", "northeast", "southwest")
_GIVEN = ("Aldric", "Beatrix", "Cassian", "Dorothea", "Edmund", "Fenella", "Godric", "Hester", "Ivo", "Juliana",
          "Konrad", "Leontine", "Matthias", "Ottilie", "Piers", "Rosamund", "Sigrid", "Tobias", "Ursula", "Wendel")
_FAMILY = ("Ashcombe", "Brightwater", "Corvell", "Dunmore", "Everard", "Falkner", "Greaves", "Holloway",
           "Ingram", "Kettering", "Lockhart", "Marlowe", "Northcott", "Pemberton", "Quenby", "Radcliffe")
_PROFESSIONS = ("cartographer", "astronomer", "botanist", "clockmaker", "printer", "engraver", "shipwright",
                "organ builder", "surveyor", "glassblower", "bookbinder", "geologist")
_SUBJECTS = ("tidal mills", "sundials", "bell founding", "canal locks", "coastal charts", "alpine mosses",
             "lens grinding", "weather records", "medieval coinage", "bridge design", "star catalogues")
_BUILDINGS = ("town hall", "corn exchange", "old library", "clock tower", "customs house", "guildhall",
              "observatory", "covered market", "lighthouse", "assembly rooms")
_OBJECTS = ("astrolabe", "spinning wheel", "hourglass", "barometer", "quill cutter", "butter churn", "sextant",
            "loom weight", "lantern clock", "weaving comb", "tinderbox", "seed drill")
_MATERIALS = ("brass", "oak", "pewter", "iron", "walnut", "bronze", "ash wood", "copper")
_OBJECT_CLASSES = ("instrument", "household tool", "device", "implement", "fitting")
_PURPOSES = ("measuring the height of stars", "keeping time at sea", "spinning wool", "storing grain",
             "lighting fires", "sowing seed in rows", "marking distances", "grinding pigments")
_INSTITUTIONS = ("Royal Society of Surveyors", "Museum of Rural Life", "Academy of Fine Arts",
                 "Institute of Navigation", "Botanical Garden", "Guild of Clockmakers", "Maritime Museum",
                 "College of Music")
_ITEMS = ("maps", "printed books", "pressed plants", "coins", "glass plates", "letters", "ship models",
          "musical scores", "tapestries", "pottery shards")
_EVENTS = ("fire", "flood", "trade fair", "royal visit", "harbour expansion", "railway boom")
_FESTIVALS = ("lantern festival", "harvest fair", "music festival", "boat race", "wool market", "summer games")
# May is left out: 'may' is a hedge (words.HEDGES).
_MONTHS = ("January", "February", "March", "April", "June", "July", "August", "September", "October",
           "November", "December")
_CLIMATES = ("mild oceanic", "cool continental", "dry", "humid", "temperate")
_SHIP_KINDS = ("steamship", "paddle steamer", "schooner", "ferry", "sailing barge")
_SHIP_NAMES = ("Meridian", "Kestrel", "Lady Orla", "Northern Star", "Amberline", "Swift", "Heron")
_ORDINALS = ("twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth")

_TEMPLATES = (
    "{Town} is a market town in the {region} of {Land}, on the {bank} bank of the River {River}.",
    "The River {River} rises in the {Range} and flows {direction} for about {km} kilometres into the {Sea}.",
    "Mount {Peak} is the highest summit of the {Range}, rising {height} metres above sea level.",
    "The {building} of {Town} was built between {year} and {year2} to designs by {Person}.",
    "{Person} was {a_profession} born in {Town} in {year}, remembered for a treatise on {subject}.",
    "The {object} is {a_material} {object_class} first recorded in {Land} in the {ordinal} century.",
    "In {year}, a {event} in {Town} led to the founding of the {Institution}.",
    "The {Institution} in {Town} holds about {count} {items}, most of them acquired after {year}.",
    "The {festival} of {Town} is held every {month} and draws visitors from across the {region}.",
    "The {ship_kind} {Ship} was launched in {year} and sailed between {Town} and {Town2} until {year2}.",
    "The railway between {Town} and {Town2} opened in {month} {year} and was extended to the coast in {year2}.",
    "{Town} has a {climate} climate, with an average {month} temperature of {temp} degrees.",
    "{A_object} was traditionally made of {material} and used for {purpose}.",
    "The population of {Town} grew from {count} in {year} to {count2} in {year2}.",
    "{Person} served as the first director of the {Institution} from {year} to {year2}.",
    "The old bridge at {Town} crosses the River {River} with {arches} stone arches.",
)


def _a(phrase: str) -> str:
    """The phrase with its indefinite article ('an oak', 'an hourglass', 'a brass')."""
    vowel = phrase[0].lower() in "aeiou" or phrase.lower().startswith("hour")
    return ("an " if vowel else "a ") + phrase


def _fill(template: str, rng: random.Random) -> str:
    town, town2 = rng.sample([h + t for h in _TOWN_HEADS for t in _TOWN_TAILS], 2)
    year = rng.randint(1150, 1890)
    slots = {
        "Town": town, "Town2": town2, "River": rng.choice(_RIVERS), "Land": rng.choice(_LANDS),
        "region": rng.choice(_REGIONS), "bank": rng.choice(("left", "right")), "Range": rng.choice(_RANGES),
        "Sea": rng.choice(_SEAS), "direction": rng.choice(_DIRECTIONS), "km": rng.randint(40, 620),
        "Peak": rng.choice(_RIVERS[:10]) + rng.choice(("horn", "berg", "crest")),
        "height": rng.randint(900, 3400), "building": rng.choice(_BUILDINGS),
        "Person": f"{rng.choice(_GIVEN)} {rng.choice(_FAMILY)}", "profession": rng.choice(_PROFESSIONS),
        "subject": rng.choice(_SUBJECTS), "object": rng.choice(_OBJECTS), "material": rng.choice(_MATERIALS),
        "object_class": rng.choice(_OBJECT_CLASSES), "ordinal": rng.choice(_ORDINALS),
        "event": rng.choice(_EVENTS), "Institution": rng.choice(_INSTITUTIONS), "items": rng.choice(_ITEMS),
        "festival": rng.choice(_FESTIVALS), "month": rng.choice(_MONTHS), "climate": rng.choice(_CLIMATES),
        "temp": rng.randint(2, 24), "ship_kind": rng.choice(_SHIP_KINDS), "Ship": rng.choice(_SHIP_NAMES),
        "purpose": rng.choice(_PURPOSES), "arches": rng.choice(("three", "five", "seven", "nine")),
        "year": year, "year2": year + rng.randint(3, 90),
        "count": f"{rng.randint(2, 90) * 100:,}", "count2": f"{rng.randint(91, 400) * 100:,}",
    }
    material, obj = slots["material"], slots["object"]
    slots.update(a_material=_a(material), A_object=_a(obj).capitalize(), a_profession=_a(slots["profession"]))
    return template.format(**slots)


@functools.lru_cache(maxsize=4)
def default_wiki_corpus(size: int = 2000, seed: int = 0) -> tuple[str, ...]:
    """`size` distinct generated encyclopedia-like sentences (fixed for given size and seed; the per-row
    choice among them follows the AddText seed). Templates are used in turn, so every kind of sentence is
    equally common."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    i = 0
    while len(out) < size:
        sentence = _fill(_TEMPLATES[i % len(_TEMPLATES)], rng)
        i += 1
        bad = [w for w in words(sentence) if is_banned(w)]
        if bad:  # cannot happen with the lists above; kept as a guard if they are ever edited
            raise AssertionError(f"generated sentence carries label words {bad}: {sentence!r}")
        out.setdefault(sentence, None)
        if i > 50 * size:
            raise RuntimeError("the wiki grammar cannot produce that many distinct sentences")
    return tuple(out)


def load_corpus(path: str | Path) -> tuple[str, ...]:
    """A user corpus for AddText-Wiki: one sentence per line of a UTF-8 text file (a BOM is allowed; blank
    lines are skipped; each line is stripped of surrounding whitespace). InputError names the file and line
    of the first problem: a missing file, bytes that are not UTF-8, a file without any sentence."""
    path = Path(path)
    file = str(path)
    if not path.is_file():
        raise InputError("corpus file not found" if not path.exists() else "corpus path is not a file", file=file)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise InputError(f"line {line}: not valid UTF-8 (byte 0x{data[e.start]:02x} at byte offset {e.start}); "
                         "save the corpus as UTF-8 with one sentence per line", file=file) from None
    # Only \n (and \r\n) end a line: str.splitlines would also split on \x85, \u2028, ... inside a sentence.
    sentences = [line.strip() for line in text.split("\n")]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise InputError("the corpus has no sentences (it is empty or every line is blank); give one sentence "
                         "per line", file=file)
    return tuple(sentences)
