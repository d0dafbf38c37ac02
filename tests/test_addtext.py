"""AddText stress test core (larev/addtext, after Chen et al., "Can Rationalization Improve Robustness?",
section 4.1): perturbations keep the rationale, are seeded, do what their kind and position say, and the score
shift table is what a hand computation gives."""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from larev.stress.addtext import (BANNED, KINDS, PERTURBED_SCHEMA, POSITIONS, AddTextConfig, AddTextPerturber,
                           addtext_source, adv_text, as_rationale_file, default_wiki_corpus, insert_text,
                           lexical_overlap, load_corpus, perturb_rationales, score_shift_table, stable_seed)
from larev.stress.addtext.adv import AdvLexicon
from larev.stress.addtext.words import FUNCTION_WORDS, words
from larev.config import DemoDataConfig
from larev.data.demo import generate_demo
from larev.errors import InputError
from larev.schema import NLI_LABELS, validate_examples, validate_rationales

ESNLI_DEV = Path("/work/shared/data/esnli/dev.parquet")

# A few NLI examples in e-SNLI's tokenised style, written for this test.
_HANDMADE = [
    ("h0", "A boy in a red coat is feeding pigeons in a square .", "A child is outside .", "entailment",
     "a boy is a child and a square is outside ."),
    ("h1", "Two women are jogging along the river at dawn .", "The women are asleep in bed .", "contradiction",
     "women jogging at dawn cannot be asleep in bed ."),
    ("h2", "An old man plays chess with a young girl in the park .", "A grandfather plays chess with his "
     "granddaughter .", "neutral", "the man is not necessarily her grandfather ."),
    ("h3", "A dog catches a frisbee on the beach .", "An animal is playing .", "entailment",
     "a dog is an animal ; catching a frisbee is playing ."),
    ("h4", "Three workers repair a road under a bridge .", "They are outside .", "entailment",
     "repairing a road happens outside ."),
    ("h5", "A chef slices onions in a busy kitchen .", "A chef cooks dinner .", "neutral", "slicing ."),
]


@pytest.fixture(scope="module")
def handmade() -> pl.DataFrame:
    frame = pl.DataFrame(_HANDMADE, schema=["id", "premise", "hypothesis", "label", "rationale"], orient="row")
    return validate_examples(frame, task="nli", default_split="test")


@pytest.fixture(scope="module")
def demo_nli() -> pl.DataFrame:
    return generate_demo(DemoDataConfig(task="nli", n_train=30, n_validation=5, n_test=30, seed=3))


@pytest.fixture(scope="module")
def demo_qa() -> pl.DataFrame:
    return generate_demo(DemoDataConfig(task="qa", n_train=30, n_validation=5, n_test=30, seed=3))


def _gold(examples: pl.DataFrame) -> pl.DataFrame:
    return examples.select("id", pl.lit("gold").alias("source"), "rationale", "label")


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    it = iter(long)
    return all(any(w == x for x in it) for w in short)


def _check_splice(original: str, perturbed: str, inserted: str, position: str, word_index: int) -> None:
    """The perturbed text is the original with the inserted text spliced in at one place."""
    orig_words, ins_words = original.split(), inserted.split()
    assert perturbed.split() == orig_words[:word_index] + ins_words + orig_words[word_index:]
    assert _is_subsequence(orig_words, perturbed.split())
    if position == "start" or (position == "random" and word_index == 0):
        assert perturbed == inserted + " " + original
    elif position == "end" or word_index == len(orig_words):
        assert perturbed == original + " " + inserted
    else:
        assert 0 < word_index < len(orig_words)
        offset = perturbed.index(" " + inserted)
        assert perturbed[:offset] + perturbed[offset + len(inserted) + 1:] == original


# ---- config ------------------------------------------------------------------------------------------------

def test_config_defaults_and_validation():
    config = AddTextConfig()
    assert config.kinds == KINDS == ("rand", "wiki", "adv")
    assert config.positions == POSITIONS == ("start", "end", "random")
    assert config.n_rand_tokens == 10 and config.wiki_corpus is None
    assert config == AddTextConfig() != AddTextConfig(seed=1)  # frozen: equal values, equal configs
    for bad in ({"kinds": ("rand", "rand")}, {"kinds": ()}, {"kinds": ("typo",)}, {"positions": ("middle",)},
                {"n_rand_tokens": 0}, {"wiki_corpus": "  "}, {"sede": 1}):
        with pytest.raises(ValidationError):
            AddTextConfig(**bad)


def test_stable_seed_is_a_fixed_sha256_value():
    # Not Python's salted hash(): the same number in every process and on every platform.
    assert stable_seed(0, "rand", "h0") == 0xE41E839D3EC5EDDE
    assert stable_seed(0, "rand", "h0") != stable_seed(1, "rand", "h0") != stable_seed(0, "rand", "h1")


# ---- word preservation and positions ------------------------------------------------------------------------

def test_every_kind_and_position_keeps_the_rationale(handmade, demo_nli, demo_qa):
    for examples in (handmade, demo_nli, demo_qa):
        out = perturb_rationales(_gold(examples), examples, AddTextConfig(seed=5))
        assert out.schema == pl.Schema(PERTURBED_SCHEMA)
        assert out.height == examples.height * len(KINDS) * len(POSITIONS)
        originals = dict(zip(examples["id"], examples["rationale"]))
        for r in out.iter_rows(named=True):
            _check_splice(originals[r["id"]], r["rationale"], r["inserted"], r["addtext_position"],
                          r["insert_word"])
            assert r["source"] == addtext_source("gold", r["addtext_kind"], r["addtext_position"])
        # label-preserving: every perturbed row keeps the original's label
        labels = dict(zip(examples["id"], examples["label"]))
        assert all(labels[i] == lab for i, lab in zip(out["id"], out["label"]))


def test_positions_do_what_they_say(handmade):
    perturber = AddTextPerturber(handmade, AddTextConfig())
    rationale = "one two three four five six seven"
    start = perturber.perturb("h0", "gold", rationale, "wiki", "start")
    end = perturber.perturb("h0", "gold", rationale, "wiki", "end")
    assert start.text == start.inserted + " " + rationale and start.word_index == 0
    assert end.text == rationale + " " + end.inserted and end.word_index == 7
    assert start.inserted == end.inserted  # one text per (id, kind): positions are not confounded with texts
    gaps = {perturber.perturb("h0", f"model-{k}", rationale, "wiki", "random").word_index for k in range(60)}
    assert gaps <= set(range(1, 7)) and len(gaps) >= 4  # strictly between two words, and spread out
    # a one-word rationale has no gap between words: the random position falls back to its start or end
    one = perturber.perturb("h0", "gold", "slicing.", "rand", "random")
    assert one.word_index in (0, 1)
    _check_splice("slicing.", one.text, one.inserted, "random", one.word_index)


def test_random_position_keeps_the_original_whitespace():
    ins = insert_text("a  b\tc\n", "X Y", "random", seed=3)
    assert ins.text[:ins.offset] + ins.text[ins.offset + len(ins.piece):] == "a  b\tc\n"
    assert ins.piece == " X Y" and ins.word_index in (1, 2)
    with pytest.raises(ValueError):
        insert_text("a b", " padded", "end", seed=0)


_AWKWARD = st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\u2028", "\x85", "\u00a0", "\x1c", "\x0b", "\u3000",
                            ",", ".", ";", "\u00e9", "\u4e2d", "\U0001f600", "n't", "not", "entailment"])
_RATIONALE = st.lists(st.one_of(_AWKWARD, st.text(st.characters(exclude_categories=("Cs",)), max_size=6)),
                      min_size=1, max_size=12).map("".join).filter(lambda t: t.strip() != "")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(rationale=_RATIONALE, kind=st.sampled_from(KINDS), position=st.sampled_from(POSITIONS),
       seed=st.integers(0, 2**32), row=st.integers(0, len(_HANDMADE) - 1))
def test_property_original_words_survive_in_order(handmade, rationale, kind, position, seed, row):
    perturber = AddTextPerturber(handmade, AddTextConfig(seed=seed))
    p = perturber.perturb(_HANDMADE[row][0], "src", rationale, kind, position)
    assert p.text == rationale[:p.offset] + p.piece + rationale[p.offset:]
    _check_splice(rationale, p.text, p.inserted, position, p.word_index)
    again = AddTextPerturber(handmade, AddTextConfig(seed=seed)).perturb(_HANDMADE[row][0], "src", rationale,
                                                                         kind, position)
    assert again == p


# ---- determinism -------------------------------------------------------------------------------------------

def test_same_seed_same_output_different_seed_different_text(demo_nli):
    rationales = _gold(demo_nli)
    a = perturb_rationales(rationales, demo_nli, AddTextConfig(seed=11))
    assert a.equals(perturb_rationales(rationales, demo_nli, AddTextConfig(seed=11)))
    b = perturb_rationales(rationales, demo_nli, AddTextConfig(seed=12))
    for kind in KINDS:
        left = a.filter(pl.col("addtext_kind") == kind)
        right = b.filter(pl.col("addtext_kind") == kind)
        differ = (left["inserted"] != right["inserted"]).mean()
        assert differ >= 0.8, (kind, differ)
    gaps = a.filter(pl.col("addtext_position") == "random")["insert_word"]
    assert (gaps != b.filter(pl.col("addtext_position") == "random")["insert_word"]).any()
    # a row's perturbation does not depend on the other rows of the file
    one = perturb_rationales(rationales.head(1), demo_nli, AddTextConfig(seed=11))
    assert one.equals(a.filter(pl.col("id") == rationales["id"][0]))


# ---- the kinds ---------------------------------------------------------------------------------------------

def test_rand_draws_n_tokens_from_the_vocabulary(demo_nli, handmade):
    out = perturb_rationales(_gold(demo_nli), demo_nli, AddTextConfig(kinds=("rand",), n_rand_tokens=7))
    texts = [t for c in ("premise", "hypothesis", "rationale") for t in demo_nli[c]]
    vocab = {w for t in texts for w in words(t)}
    for inserted in out["inserted"]:
        tokens = inserted.split()
        assert len(tokens) == 7 and set(tokens) <= vocab and not set(tokens) & BANNED
    given_list = ["alpha", "beta gamma ", "", "not", "neutral"]
    out = perturb_rationales(_gold(handmade), handmade, AddTextConfig(kinds=("rand",), n_rand_tokens=30),
                             vocabulary=given_list)
    seen = {w for t in out["inserted"] for w in t.split()}
    assert seen == {"alpha", "beta", "gamma"}  # banned words of a given list are never drawn


def test_wiki_inserts_one_corpus_sentence(demo_nli):
    corpus = set(default_wiki_corpus())
    out = perturb_rationales(_gold(demo_nli), demo_nli, AddTextConfig(kinds=("wiki",)))
    assert set(out["inserted"]) <= corpus and out["inserted"].n_unique() > 10


def test_default_wiki_corpus_carries_no_label_words():
    corpus = default_wiki_corpus()
    assert len(corpus) == len(set(corpus)) == 2000
    label_words = {"entail", "entails", "entailment", "contradict", "contradicts", "contradiction", "neutral",
                   "not", "no", "never", "nothing", "none", "n't", *NLI_LABELS}
    for sentence in corpus:
        tokens = set(words(sentence))
        assert not tokens & label_words and not tokens & BANNED, sentence
        assert "n't" not in sentence and sentence[0].isupper() and sentence.endswith(".")
        assert not re.search(r"\b[Aa] [aeiouAEIOU]", sentence), sentence  # articles agree ("an oak")
    assert default_wiki_corpus(50, seed=1) != default_wiki_corpus(50, seed=2)


def test_adv_overlaps_the_hypothesis_but_differs(handmade, demo_nli):
    for examples in (handmade, demo_nli):
        out = perturb_rationales(_gold(examples), examples, AddTextConfig(kinds=("adv",), positions=("end",)))
        joined = out.join(examples.select("id", "premise", "hypothesis"), on="id")
        overlaps = []
        for r in joined.iter_rows(named=True):
            adv, hyp = r["inserted"], r["hypothesis"]
            assert adv != hyp and adv.lower() != hyp.lower()
            new = set(words(adv)) - set(words(hyp)) - FUNCTION_WORDS  # (an article may change: "an" -> "a")
            assert new, (hyp, adv)  # some words were swapped in ...
            assert not new & set(words(r["premise"])) and not new & BANNED  # ... none from the input
            overlaps.append(lexical_overlap(adv, hyp))
            assert lexical_overlap(adv, hyp) > lexical_overlap(adv, "the an a")  # more than function words
        assert sum(overlaps) / len(overlaps) >= 0.5, overlaps
    wiki = default_wiki_corpus()[:50]
    hyp = demo_nli["hypothesis"][0]
    assert max(lexical_overlap(s, hyp) for s in wiki) < 0.5


def test_adv_construction_examples():
    lexicon = AdvLexicon.from_texts(["A kettle is on the stove .", "The kettle is old .", "A lamp is on a desk .",
                                     "The lamp is bright .", "Some hammers lie on the bench .",
                                     "Two hammers are heavy ."])
    assert {"kettle", "lamp"} <= set(lexicon.heads) and "hammers" in lexicon.plural_heads
    adv = adv_text("A man is not sleeping on a sofa .", lexicon, seed=1)
    tokens = adv.split()
    assert tokens[2:4] == ["is", "sleeping"] and "not" not in tokens  # verb kept, negation dropped
    assert tokens[1] != "man" and tokens[-2] != "sofa"
    assert adv_text("They are outside .", lexicon, seed=1).startswith("The ")  # pronoun -> "the <person>"
    # one query word maps to one replacement; articles agree; numbers change
    adv = adv_text("Two women watch two dogs .", lexicon, seed=4)
    first, _, _, second, _ = adv.split()[:5]
    assert first.lower() == second.lower() != "two"
    assert adv_text("A dog is here .", lexicon, seed=0, avoid={"cat"}) != "A dog is here ."


def test_qa_insertions_avoid_the_rows_answer_choices(demo_qa):
    out = perturb_rationales(_gold(demo_qa), demo_qa, AddTextConfig(positions=("end",)))
    choices = {r["id"]: {w for c in r["choices"] for w in words(c)} - FUNCTION_WORDS
               for r in demo_qa.iter_rows(named=True)}
    for r in out.iter_rows(named=True):
        assert not set(words(r["inserted"])) & choices[r["id"]], r
    adv = out.filter(pl.col("addtext_kind") == "adv").join(demo_qa.select("id", "question"), on="id")
    assert all(a != q and a.endswith("?") for a, q in zip(adv["inserted"], adv["question"]))


# ---- frames ------------------------------------------------------------------------------------------------

def test_output_scores_as_a_rationale_file(demo_nli):
    rationales = _gold(demo_nli).drop("label")  # label filled with the gold one by validation
    out = perturb_rationales(rationales, demo_nli)
    checked = validate_rationales(out, demo_nli)  # provenance columns are dropped, the rest is the contract
    assert checked.columns == ["id", "source", "rationale", "label"] and checked.height == out.height
    both = as_rationale_file(out, originals=rationales)
    assert both.height == out.height + rationales.height
    assert validate_rationales(both, demo_nli).height == both.height
    assert set(out["orig_source"]) == {"gold"}
    with pytest.raises(InputError, match="already a source"):
        clash = pl.concat([rationales, rationales.with_columns(source=pl.lit(addtext_source("gold", "rand",
                                                                                             "end")))])
        perturb_rationales(clash, demo_nli, AddTextConfig(kinds=("rand",), positions=("end",)))
    with pytest.raises(InputError, match="not among the test examples"):
        perturb_rationales(pl.DataFrame({"id": ["nope"], "source": ["s"], "rationale": ["r"]}), demo_nli)


# ---- score shift -------------------------------------------------------------------------------------------

def test_score_shift_table_matches_a_hand_computation():
    rows = [  # (id, source, metric, score)
        ("a", "gold", "rev", 1.0), ("b", "gold", "rev", 2.0), ("c", "gold", "rev", 0.5),
        ("a", "gold+addtext-rand-end", "rev", 1.5),  # +0.5 rise
        ("b", "gold+addtext-rand-end", "rev", 1.0),  # -1.0 fall
        ("c", "gold+addtext-rand-end", "rev", 0.5 + 1e-9),  # +1e-9: float noise, neither
        ("a", "gold+addtext-adv-start", "rev", 3.0),  # +2.0
        ("b", "gold+addtext-adv-start", "rev", 2.25),  # +0.25
        ("a", "gold", "rora", -1.0), ("a", "gold+addtext-rand-end", "rora", -1.0),  # 0
        ("a", "other", "rev", 9.0),  # a source that was not perturbed: ignored
    ]
    scores = pl.DataFrame(rows, schema=["id", "source", "metric", "score"], orient="row").with_columns(
        label=pl.lit("entailment"), logp_with=pl.lit(0.0))  # extra score-table columns are ignored
    table = score_shift_table(scores)
    got = {(r["metric"], r["addtext_kind"], r["addtext_position"]): r for r in table.iter_rows(named=True)}
    assert list(got) == [("rev", "rand", "end"), ("rev", "adv", "start"), ("rev", "all", "all"),
                         ("rora", "rand", "end"), ("rora", "all", "all")]
    r = got[("rev", "rand", "end")]
    assert r["n"] == 3 and math.isclose(r["mean_shift"], (0.5 - 1.0 + 1e-9) / 3)
    assert math.isclose(r["rise_share"], 1 / 3) and math.isclose(r["fall_share"], 1 / 3)
    assert math.isclose(r["mean_orig"], 3.5 / 3) and math.isclose(r["mean_perturbed"], (1.5 + 1.0 + 0.5 + 1e-9) / 3)
    r = got[("rev", "adv", "start")]
    assert r["n"] == 2 and math.isclose(r["mean_shift"], 1.125) and r["rise_share"] == 1.0
    r = got[("rev", "all", "all")]
    assert r["n"] == 5 and math.isclose(r["mean_shift"], (0.5 - 1.0 + 1e-9 + 2.0 + 0.25) / 5)
    assert math.isclose(r["rise_share"], 3 / 5) and math.isclose(r["fall_share"], 1 / 5)
    r = got[("rora", "all", "all")]
    assert r["n"] == 1 and r["mean_shift"] == 0.0 and r["rise_share"] == 0.0
    assert set(table["orig_source"]) == {"gold"}
    # with no tolerance the 1e-9 shift counts as a rise
    strict = score_shift_table(scores, tolerance=0.0).filter(
        (pl.col("metric") == "rev") & (pl.col("addtext_kind") == "rand"))
    assert math.isclose(strict["rise_share"][0], 2 / 3)


def test_score_shift_table_rejects_unpaired_and_repeated_scores():
    unpaired = pl.DataFrame({"id": ["a"], "source": ["gold+addtext-wiki-random"], "metric": ["rev"],
                             "score": [1.0]})
    with pytest.raises(InputError, match="no score of the original rationale"):
        score_shift_table(unpaired)
    repeated = pl.DataFrame({"id": ["a", "a"], "source": ["gold", "gold"], "metric": ["rev", "rev"],
                             "score": [1.0, 2.0]})
    with pytest.raises(InputError, match="repeated score"):
        score_shift_table(repeated)


# ---- user corpus -------------------------------------------------------------------------------------------

def test_user_corpus_and_its_errors(tmp_path, handmade):
    good = tmp_path / "corpus.txt"
    good.write_text("\ufeffThe lighthouse was painted in 1901.\n\n  The canal froze in winter.  \r\n",
                    encoding="utf-8")
    assert load_corpus(good) == ("The lighthouse was painted in 1901.", "The canal froze in winter.")
    out = perturb_rationales(_gold(handmade), handmade, AddTextConfig(kinds=("wiki",), wiki_corpus=str(good)))
    assert set(out["inserted"]) <= set(load_corpus(good))

    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\n", encoding="utf-8")
    for path in (empty, blank):
        with pytest.raises(InputError, match="no sentences") as err:
            load_corpus(path)
        assert str(path) in str(err.value)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("First line.\nSecond line.\nCaf\u00e9 third line.\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"line 3: not valid UTF-8") as err:
        perturb_rationales(_gold(handmade), handmade, AddTextConfig(kinds=("wiki",), wiki_corpus=str(bad)))
    assert str(bad) in str(err.value)
    with pytest.raises(InputError, match="not found"):
        load_corpus(tmp_path / "missing.txt")
    negated = tmp_path / "negated.txt"
    negated.write_text("This is not a fact.\nNo one came.\n", encoding="utf-8")
    with pytest.raises(InputError, match="no usable AddText-Wiki sentence"):
        AddTextPerturber(handmade, AddTextConfig(kinds=("wiki",), wiki_corpus=str(negated)))


# ---- the real data (read at run time, never copied) --------------------------------------------------------

@pytest.mark.skipif(not ESNLI_DEV.is_file(), reason="e-SNLI dev file not available")
def test_esnli_dev_head():
    from larev.data.files import load_examples_file

    examples = load_examples_file(ESNLI_DEV, task="nli", split="test").head(300)
    out = perturb_rationales(_gold(examples), examples, AddTextConfig(seed=2))
    originals = dict(zip(examples["id"], examples["rationale"]))
    for r in out.iter_rows(named=True):
        _check_splice(originals[r["id"]], r["rationale"], r["inserted"], r["addtext_position"], r["insert_word"])
    adv = out.filter((pl.col("addtext_kind") == "adv") & (pl.col("addtext_position") == "end")).join(
        examples.select("id", "hypothesis"), on="id")
    overlaps = [lexical_overlap(a, h) for a, h in zip(adv["inserted"], adv["hypothesis"])]
    assert sum(overlaps) / len(overlaps) >= 0.5
    assert all(a != h for a, h in zip(adv["inserted"], adv["hypothesis"]))
