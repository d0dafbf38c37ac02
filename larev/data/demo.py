"""The project's own synthetic dataset: labels that follow from input + rationale, never from the input alone.

Every example is about an object named by an invented nonce word ("plodax", "kibtezmur", ...), fresh for each
example and built from syllables checked against every real word list below, so the input cannot reveal what
the object is. The gold rationale states a fact about the nonce word, and that fact is what decides the label.
All word lists and templates are this module's own.

NLI (`task='nli'`)
    premise     "{Subject} {is/are} {verb} a {nonce} {place}."  (three phrasings)
    hypothesis  "{Subject} {is/are} {verb} a {category}."      (three phrasings; same subject and verb)
    rationale   entailment / contradiction: a category fact, "A {nonce} is a kind of {category'}." (five
                phrasings), sometimes followed by an irrelevant property fact. The hypothesis is entailed when its
                category is the nonce's category and contradicted otherwise.
                neutral: only property facts ("A {nonce} is often green.", "Most {nonce}s are shiny.", ...), so
                the object's category and hence the hypothesis stay undecided.
    Conventions (as in SNLI): premise and hypothesis describe the same scene and the same single object, and
    the categories in `DEMO_CATEGORIES` are mutually exclusive. The hypothesis category is uniform over the
    categories for every label, so the input alone is at chance (1/3).

QA (`task='qa'`)
    question    where the nonce is kept / what it is used for / who owns it (three phrasings each)
    choices     five: the answer for the nonce's category and four answers of other categories, shuffled
    rationale   a category fact as above (sometimes with a property fact); the answer follows from it and the
                fixed world knowledge `DEMO_WORLD` (category -> place, use, owner), learnable from training data.
    The question alone names only a nonce word, so it is at chance (1/5).

Knobs (both default 0.0 and then change nothing; every random draw is made whatever their values, so raising
one changes only the rows it touches):
    rationale_leakage  share of gold rationales that also state the label outright ("So the answer is X.").
    input_cue_rate     share of inputs carrying a label-correlated cue word, like SNLI's annotation artifacts:
                       an adverb tied to the NLI label in the hypothesis ("probably" for neutral, ...), an
                       adjective tied to the QA answer's category before the nonce ("a fizzy plodax").
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import polars as pl

from larev.config import DemoDataConfig
from larev.schema import EXAMPLE_SCHEMA, NLI_LABELS, validate_examples


@dataclass(frozen=True)
class Category:
    """One kind of object and what the demo world knows about it (the QA answers and the QA cue word)."""

    name: str
    place: str  # where it is kept
    use: str  # what it is used for
    owner: str  # who is most likely to own one
    cue: str  # adjective correlated with the category (QA input cue only)


# Mutually exclusive by convention; every category's place, use, owner and cue are distinct.
DEMO_CATEGORIES: tuple[Category, ...] = (
    Category("fruit", "kitchen", "making a snack", "a grocer", "juicy"),
    Category("vegetable", "cellar", "making soup", "a gardener", "leafy"),
    Category("tool", "garage", "fixing a shelf", "a carpenter", "rusty"),
    Category("animal", "barn", "guarding the yard", "a shepherd", "furry"),
    Category("vehicle", "parking lot", "getting to work", "a courier", "wheeled"),
    Category("garment", "wardrobe", "keeping warm", "a tailor", "woollen"),
    Category("instrument", "music room", "playing a song", "a musician", "tuneful"),
    Category("toy", "playroom", "amusing a child", "a toddler", "squeaky"),
    Category("flower", "vase", "decorating a table", "a florist", "fragrant"),
    Category("gemstone", "jewellery box", "making a ring", "a jeweller", "sparkling"),
    Category("pastry", "bread bin", "eating with coffee", "a baker", "flaky"),
    Category("beverage", "refrigerator", "quenching thirst", "a bartender", "fizzy"),
)
DEMO_WORLD: dict[str, Category] = {c.name: c for c in DEMO_CATEGORIES}

# (text, plural)
SUBJECTS: tuple[tuple[str, bool], ...] = (
    ("a man", False), ("a woman", False), ("an old woman", False), ("an old man", False),
    ("a young boy", False), ("a little girl", False), ("a tourist", False), ("the farmer", False),
    ("a nurse", False), ("a teenager", False), ("two children", True), ("three friends", True),
    ("a few students", True), ("the twins", True), ("some workers", True),
)
VERBS = ("holding", "carrying", "looking at", "pointing at", "photographing", "drawing", "examining", "selling",
         "buying", "describing", "showing off", "admiring")
SCENE_PLACES = ("in the park", "at the market", "on the beach", "near the station", "in a small garden",
                "behind the house", "at the fair", "in the hallway", "on a crowded street", "by the river",
                "outside a cafe", "on the porch")

PREMISE_TEMPLATES = (
    "{Subj} {be} {verb} a {nonce} {place}.",
    "{Place}, {subj} {be} {verb} a {nonce}.",
    "{Subj} {place} {be} {verb} a {nonce}.",
)
# {adv} is empty or an NLI cue adverb followed by a space.
HYPOTHESIS_TEMPLATES = (
    "{Subj} {be} {adv}{verb} {a_cat}.",
    "There is {a_cat} that {subj} {be} {adv}{verb}.",
    "{Subj} {place} {be} {adv}{verb} {a_cat}.",
)
CATEGORY_FACTS = (
    "A {nonce} is a kind of {cat}.",
    "A {nonce} is one type of {cat}.",
    "Every {nonce} is {a_cat}.",
    "The word {nonce} names a sort of {cat}.",
    "People call a certain {cat} a {nonce}.",
)
COLOURS = ("red", "green", "pale yellow", "dark blue", "orange", "grey", "purple", "brown")
HABITATS = ("in many countries", "near the coast", "in old towns", "in the north", "far from cities",
            "in warm regions")
TEXTURES = ("smooth", "rough", "heavy", "light", "shiny", "soft")
PROPERTY_FACTS = (
    ("A {nonce} is often {colour}.", "The usual colour of a {nonce} is {colour}."),
    ("A {nonce} is usually found {habitat}.", "One can come across a {nonce} {habitat}."),
    ("Most {nonces} are {texture}.", "A {nonce} tends to be {texture}."),
)
EXTRA_FACT_RATE = 0.35  # share of category rationales followed by an irrelevant property fact

QUESTION_TEMPLATES = {
    "place": ("Where would you most likely keep a {nonce}?", "Where is a {nonce} usually kept?",
              "If you had a {nonce} at home, where would you put it?"),
    "use": ("What would you use a {nonce} for?", "What is a {nonce} mostly used for?",
            "For what purpose would someone get a {nonce}?"),
    "owner": ("Who is most likely to own a {nonce}?", "Whose work would involve a {nonce} every day?",
              "Who would you most likely borrow a {nonce} from?"),
}
N_CHOICES = 5

NLI_CUES = {"entailment": "indeed", "contradiction": "actually", "neutral": "probably"}
LEAK_TEMPLATES = ("So the answer is {label}.", "The label is therefore {label}.", "Hence: {label}.")

SYLLABLES = ("bli", "dax", "wug", "fep", "zor", "tov", "kib", "mur", "plo", "gri", "sna", "vek", "quo", "jem",
             "lun", "tib", "dro", "yaf", "nix", "wob", "zel", "kro", "fim", "gub", "pax", "sib", "tez", "vok",
             "rul", "hib", "mep", "dov", "glim", "brel", "skor", "thup")


def _words(*texts: str) -> set[str]:
    return {w for t in texts for w in re.findall(r"[a-z]+", t.lower())}


# Every real word the generator writes: nonce words must differ from all of them.
REAL_WORDS: frozenset[str] = frozenset(_words(
    *(f"{c.name} {c.place} {c.use} {c.owner} {c.cue}" for c in DEMO_CATEGORIES),
    *(s for s, _ in SUBJECTS), *VERBS, *SCENE_PLACES, *PREMISE_TEMPLATES, *HYPOTHESIS_TEMPLATES,
    *CATEGORY_FACTS, *COLOURS, *HABITATS, *TEXTURES, *(t for pair in PROPERTY_FACTS for t in pair),
    *(t for ts in QUESTION_TEMPLATES.values() for t in ts), *NLI_CUES.values(), *LEAK_TEMPLATES, *NLI_LABELS,
    "is are a an es s",
))


def _article(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _plural(word: str) -> str:
    return word + ("es" if word.endswith(("s", "x", "sh", "ch", "z")) else "s")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Generator:
    """One seeded stream of draws; nonce words are unique across the whole dataset."""

    def __init__(self, config: DemoDataConfig):
        self.config = config
        self.rng = random.Random(config.seed)
        self.used: set[str] = set()

    def nonce(self) -> str:
        rng = self.rng
        for attempt in range(1000):
            n_syll = rng.choice((2, 3)) if attempt < 100 else 4  # 4 syllables only once 2-3 run short
            syllables = [rng.choice(SYLLABLES) for _ in range(n_syll)]
            word = "".join(syllables)
            if any(a == b for a, b in zip(syllables, syllables[1:])):
                continue  # no stutters like 'paxpax'
            if word not in self.used and word not in REAL_WORDS:
                self.used.add(word)
                return word
        raise RuntimeError("ran out of nonce words")  # unreachable for any realistic size

    def balanced(self, values: tuple[str, ...], n: int) -> list[str]:
        out = [values[i % len(values)] for i in range(n)]
        self.rng.shuffle(out)
        return out

    def property_fact(self, nonce: str) -> str:
        rng = self.rng
        template = rng.choice(rng.choice(PROPERTY_FACTS))
        return template.format(nonce=nonce, nonces=_plural(nonce), colour=rng.choice(COLOURS),
                               habitat=rng.choice(HABITATS), texture=rng.choice(TEXTURES))

    def category_rationale(self, nonce: str, cat: str) -> str:
        rng = self.rng
        text = rng.choice(CATEGORY_FACTS).format(nonce=nonce, cat=cat, a_cat=_article(cat))
        extra = self.property_fact(nonce)  # drawn always, so the stream does not depend on the coin below
        return f"{text} {extra}" if rng.random() < EXTRA_FACT_RATE else text

    def leak(self, rationale: str, label: str) -> str:
        template = self.rng.choice(LEAK_TEMPLATES)
        return f"{rationale} {template.format(label=label)}" if self.rng.random() < self.config.rationale_leakage \
            else rationale

    def cue(self) -> bool:
        return self.rng.random() < self.config.input_cue_rate

    def nli(self, label: str) -> dict[str, object]:
        rng = self.rng
        (subj, plural), verb, place = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(SCENE_PLACES)
        nonce = self.nonce()
        names = [c.name for c in DEMO_CATEGORIES]
        cat = rng.choice(names)
        if label == "entailment":
            hyp_cat = cat
        elif label == "contradiction":
            hyp_cat = rng.choice([n for n in names if n != cat])
        else:
            hyp_cat = rng.choice(names)
        slots = {"subj": subj, "Subj": _cap(subj), "be": "are" if plural else "is", "verb": verb,
                 "place": place, "Place": _cap(place), "nonce": nonce, "a_cat": _article(hyp_cat)}
        premise = rng.choice(PREMISE_TEMPLATES).format(**slots)
        adv = NLI_CUES[label] + " " if self.cue() else ""
        hypothesis = rng.choice(HYPOTHESIS_TEMPLATES).format(**slots, adv=adv)
        category_text = self.category_rationale(nonce, cat)
        neutral_text = self.property_fact(nonce)
        rationale = neutral_text if label == "neutral" else category_text
        return {"premise": premise, "hypothesis": hypothesis, "rationale": self.leak(rationale, label)}

    def qa(self, cat: str) -> dict[str, object]:
        rng = self.rng
        nonce = self.nonce()
        kind = rng.choice(tuple(QUESTION_TEMPLATES))
        named = f"{DEMO_WORLD[cat].cue} {nonce}" if self.cue() else nonce
        question = rng.choice(QUESTION_TEMPLATES[kind]).format(nonce=named)
        answer = getattr(DEMO_WORLD[cat], kind)
        others = [getattr(c, kind) for c in DEMO_CATEGORIES if c.name != cat]
        choices = rng.sample(others, N_CHOICES - 1) + [answer]
        rng.shuffle(choices)
        rationale = self.category_rationale(nonce, cat)
        return {"question": question, "choices": choices, "label": answer,
                "rationale": self.leak(rationale, answer)}


def generate_demo(config: DemoDataConfig) -> pl.DataFrame:
    """Generate the demo dataset in canonical form (see the module docstring for the design).

    Deterministic in `config`: splits 'train', 'validation', 'test' of n_train / n_validation / n_test rows,
    ids `demo-{task}-{index:06d}` numbered across splits, labels balanced within each split.
    """
    gen = _Generator(config)
    columns: dict[str, list] = {name: [] for name in EXAMPLE_SCHEMA}
    index = 0
    for split, n in (("train", config.n_train), ("validation", config.n_validation), ("test", config.n_test)):
        if config.task == "nli":
            rows = [{**gen.nli(label), "label": label} for label in gen.balanced(NLI_LABELS, n)]
        else:
            rows = [gen.qa(cat) for cat in gen.balanced(tuple(DEMO_WORLD), n)]
        for row in rows:
            row.update(id=f"demo-{config.task}-{index:06d}", task=config.task, split=split)
            for name, values in columns.items():
                values.append(row.get(name))
            index += 1
    frame = pl.DataFrame(columns, schema=EXAMPLE_SCHEMA)
    return validate_examples(frame, file="<demo>", task=config.task)
