"""AddText perturbations of rationales: one rationale at a time (`AddTextPerturber.perturb`) or a whole
rationale file (`perturb_rationales`).

After Chen et al., "Can Rationalization Improve Robustness?", section 4.1: an AddText attack adds a piece of
text to an input without changing its label, to test whether a model is invariant to extraneous information.
Here the "input" being attacked is the rationale a metric scores; the label stays the row's label, and the
three kinds of added text are

  rand  `n_rand_tokens` tokens drawn uniformly (with replacement) from the task vocabulary (AddText-Rand)
  wiki  one unrelated fluent sentence from a corpus (AddText-Wiki; see corpus.py for the offline default)
  adv   the example's query rewritten to overlap it lexically but talk about other entities (AddText-Adv;
        see adv.py for the construction and why it preserves the label)

inserted at the start, the end or a random gap between two words (insert.py). None of them contains a word
of `words.BANNED` or, for QA, a word of the row's answer choices.

Seeds: the inserted text of a row depends only on (config.seed, kind, id), so the same id gets the same
text at every position and for every rationale source, and differences between positions or sources are not
confounded with different texts; the random gap depends on (config.seed, id, source).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from larev.stress.addtext.adv import AdvLexicon, adv_text
from larev.stress.addtext.config import AddTextConfig, Kind
from larev.stress.addtext.corpus import default_wiki_corpus, load_corpus
from larev.stress.addtext.insert import Position, insert_text
from larev.stress.addtext.words import is_banned, row_forbidden, stable_seed, words
from larev.stress.addtext.words import vocabulary as task_vocabulary
from larev.errors import ConfigError, InputError
from larev.schema import RATIONALE_SCHEMA, validate_rationales

log = logging.getLogger(__name__)

SOURCE_TAG = "+addtext-"

# The rationale contract's columns, then the provenance of each perturbed row.
PERTURBED_SCHEMA: dict[str, pl.DataType] = {
    **RATIONALE_SCHEMA,
    "orig_source": pl.String,  # the source of the rationale that was perturbed
    "addtext_kind": pl.String,  # rand | wiki | adv
    "addtext_position": pl.String,  # start | end | random (as asked; a one-word rationale's gap is its start/end)
    "inserted": pl.String,  # the added text
    "insert_word": pl.Int64,  # how many original words precede the added text
}


def addtext_source(source: str, kind: str, position: str) -> str:
    """The source name of a perturbed rationale: distinct from the original's, so both can be scored in one
    run, and parseable back (`larev.stress.addtext.shift.parse_addtext_sources`)."""
    return f"{source}{SOURCE_TAG}{kind}-{position}"


@dataclass(frozen=True)
class Perturbation:
    """One perturbed rationale with its provenance; `text` is `original` with `piece` spliced in at `offset`."""

    text: str
    original: str
    kind: str
    position: str
    inserted: str
    piece: str
    offset: int
    word_index: int


def rand_text(vocab: Sequence[str], n_tokens: int, seed: int, avoid: frozenset[str] = frozenset()) -> str:
    """AddText-Rand: `n_tokens` words drawn uniformly with replacement from `vocab`, skipping `avoid` and banned
    words; space-separated, with no punctuation (section 4.1: "a random sequence of tokens uniformly sampled
    from the task vocabulary")."""
    rng = random.Random(seed)
    usable: list[str] | None = None
    out = []
    for _ in range(n_tokens):
        for _ in range(64):
            w = rng.choice(vocab)
            if w not in avoid and not is_banned(w):
                break
        else:
            if usable is None:
                usable = [w for w in vocab if w not in avoid and not is_banned(w)]
            if not usable:
                raise InputError("the AddText-Rand vocabulary has no usable word (all are banned label words or "
                                 "this row's answer-choice words)")
            w = rng.choice(usable)
        out.append(w)
    return " ".join(out)


def wiki_text(corpus: Sequence[str], seed: int, avoid: frozenset[str] = frozenset()) -> str:
    """AddText-Wiki: one sentence drawn uniformly from `corpus`, skipping sentences with an `avoid` word."""
    rng = random.Random(seed)
    for _ in range(64):
        s = rng.choice(corpus)
        if not avoid or avoid.isdisjoint(words(s)):
            return s
    usable = [s for s in corpus if avoid.isdisjoint(words(s))]
    if not usable:
        raise InputError("every AddText-Wiki corpus sentence contains one of this row's answer-choice words")
    return rng.choice(usable)


class AddTextPerturber:
    """Perturbs single rationales of the given examples (canonical examples frame: id, task, premise,
    hypothesis, question, choices, label, rationale).

    vocabulary: the AddText-Rand vocabulary (entries are split on whitespace and lower-cased); default: the
    distinct words of the examples' texts (premise, hypothesis, question, choices, gold rationale). corpus:
    AddText-Wiki sentences; default: config.wiki_corpus read with `load_corpus`, else the generated
    `default_wiki_corpus`. Corpus sentences containing a banned word are left out (logged), since they could carry
    label signal.
    """

    def __init__(self, examples: pl.DataFrame, config: AddTextConfig | None = None, *,
                 vocabulary: Sequence[str] | None = None, corpus: Sequence[str] | None = None):
        self.config = config = config or AddTextConfig()
        cols = ("id", "task", "premise", "hypothesis", "question", "choices", "label")
        missing = [c for c in cols if c not in examples.columns]
        if missing:
            raise InputError(f"examples lack column(s) {missing}; pass canonical examples (larev.schema)",
                             file="<examples>", column=missing[0])
        self._rows = {r["id"]: r for r in examples.select(cols).iter_rows(named=True)}
        texts = _texts(examples, with_rationale=True)
        if vocabulary is not None:  # a given list: its whitespace-separated tokens, lower-cased
            self.vocabulary = tuple(sorted({t.lower() for w in vocabulary for t in str(w).split()}))
        else:
            self.vocabulary = task_vocabulary(texts)
        if "rand" in config.kinds and not [w for w in self.vocabulary if not is_banned(w)]:
            raise ConfigError("the AddText-Rand vocabulary is empty (or only banned words); give words or examples "
                              "with text")
        self.corpus: tuple[str, ...] = ()
        if "wiki" in config.kinds:
            self.corpus = self._corpus(corpus)
        self.lexicon = AdvLexicon.from_texts(_texts(examples, with_rationale=False))
        self._inserted: dict[tuple[str, str], str] = {}

    def _corpus(self, corpus: Sequence[str] | None) -> tuple[str, ...]:
        where = "<corpus>"
        if corpus is None and self.config.wiki_corpus is not None:
            where = self.config.wiki_corpus
            corpus = load_corpus(where)
        elif corpus is None:  # checked free of banned words when generated
            return default_wiki_corpus(self.config.wiki_corpus_size)
        kept = tuple(s.strip() for s in corpus if s.strip() and not any(is_banned(w) for w in words(s)))
        if len(kept) < len(corpus):
            log.info("%s: left out %d of %d AddText-Wiki sentences with label words, negations or hedges", where,
                     len(corpus) - len(kept), len(corpus))
        if not kept:
            raise InputError("no usable AddText-Wiki sentence: every one contains a label word, negation or hedge "
                             "(e.g. 'not', 'no', 'entails')", file=where)
        return kept

    def _example(self, id: str) -> dict:
        try:
            return self._rows[id]
        except KeyError:
            raise InputError(f"id {id!r} is not among the examples", file="<rationales>", column="id") from None

    def inserted_text(self, id: str, kind: Kind) -> str:
        """The text AddText-`kind` adds to every rationale of example `id` (cached; seed: config.seed, kind, id)."""
        key = (id, kind)
        if key not in self._inserted:
            ex = self._example(id)
            avoid = row_forbidden(ex["task"], ex["choices"], ex["label"])
            seed = stable_seed(self.config.seed, kind, id)
            if kind == "rand":
                text = rand_text(self.vocabulary, self.config.n_rand_tokens, seed, avoid)
            elif kind == "wiki":
                if not self.corpus:
                    raise ConfigError("AddText-Wiki was not among config.kinds when this perturber was built")
                text = wiki_text(self.corpus, seed, avoid)
            elif kind == "adv":
                query = ex["hypothesis"] if ex["task"] == "nli" else ex["question"]
                if not query or not query.strip():
                    raise InputError(f"example {id!r} has no {'hypothesis' if ex['task'] == 'nli' else 'question'} "
                                     "to build AddText-Adv from", file="<examples>")
                inputs = [ex["premise"], ex["hypothesis"], ex["question"], *(ex["choices"] or ())]
                text = adv_text(query, self.lexicon, seed, avoid | {w for t in inputs if t for w in words(t)})
            else:
                raise ConfigError(f"unknown AddText kind {kind!r}")
            self._inserted[key] = text
        return self._inserted[key]

    def perturb(self, id: str, source: str, rationale: str, kind: Kind, position: Position) -> Perturbation:
        """One perturbed rationale: the example's AddText-`kind` text spliced in at `position`."""
        inserted = self.inserted_text(id, kind)
        ins = insert_text(rationale, inserted, position, stable_seed(self.config.seed, "position", id, source))
        return Perturbation(text=ins.text, original=rationale, kind=kind, position=position, inserted=inserted,
                            piece=ins.piece, offset=ins.offset, word_index=ins.word_index)


def _texts(examples: pl.DataFrame, *, with_rationale: bool) -> list[str]:
    cols = [c for c in ("premise", "hypothesis", "question") if c in examples.columns]
    if with_rationale and "rationale" in examples.columns:
        cols.append("rationale")
    out = [t for c in cols for t in examples[c].to_list() if t]
    if "choices" in examples.columns:
        out += [c for cs in examples["choices"].to_list() if cs for c in cs if c]
    return out


def perturb_rationales(rationales: pl.DataFrame, examples: pl.DataFrame, config: AddTextConfig | None = None, *,
                       vocabulary: Sequence[str] | None = None,
                       corpus: Sequence[str] | None = None) -> pl.DataFrame:
    """AddText-perturbed copies of rationales: one row per (rationale row, kind, position) in `PERTURBED_SCHEMA`.

    rationales: rows (id, source, rationale[, label]) validated with `larev.schema.validate_rationales` against
    `examples` (canonical examples, e.g. from `load_examples_file` or `generate_demo`); a null label becomes the
    gold one. The label of a perturbed row is its original's (AddText is label-preserving, section 4.1), its
    source is `addtext_source(source, kind, position)`. Rows come grouped by kind, then position (config
    order), each group in the input's row order. The result passes `validate_rationales` as it is (extra
    columns are dropped there); `as_rationale_file` selects the contract columns, optionally after the
    original rows.
    """
    config = config or AddTextConfig()
    rationales = validate_rationales(rationales, examples)
    perturber = AddTextPerturber(examples, config, vocabulary=vocabulary, corpus=corpus)
    taken = set(zip(rationales["id"].to_list(), rationales["source"].to_list()))
    rows = []
    for kind in config.kinds:
        for position in config.positions:
            for id, source, rationale, label in rationales.select(list(RATIONALE_SCHEMA)).iter_rows():
                new_source = addtext_source(source, kind, position)
                if (id, new_source) in taken:
                    raise InputError(f"the perturbed source {new_source!r} of id {id!r} is already a source of the "
                                     "input; rename it", file="<rationales>", column="source")
                p = perturber.perturb(id, source, rationale, kind, position)
                rows.append((id, new_source, p.text, label, source, kind, position, p.inserted, p.word_index))
    return pl.DataFrame(rows, schema=PERTURBED_SCHEMA, orient="row")


def as_rationale_file(perturbed: pl.DataFrame, originals: pl.DataFrame | None = None) -> pl.DataFrame:
    """The rationale-contract columns (id, source, rationale, label) of perturbed rows, after the original rows
    when `originals` is given, so one file scores both (what `score_shift_table` needs)."""
    columns = list(RATIONALE_SCHEMA)
    parts = [] if originals is None else [originals]
    parts.append(perturbed)
    out = []
    for p in parts:
        p = p if "label" in p.columns else p.with_columns(label=pl.lit(None, pl.String))
        out.append(p.select([pl.col(c).cast(t) for c, t in RATIONALE_SCHEMA.items()]))
    return pl.concat(out).select(columns)
