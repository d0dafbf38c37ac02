"""The demo generator: determinism, shape, balance, knobs, and the information property it exists for."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

import polars as pl
import pytest

from larev.config import DemoDataConfig
from larev.data.demo import DEMO_CATEGORIES, REAL_WORDS, generate_demo
from larev.schema import EXAMPLE_SCHEMA, NLI_LABELS, validate_examples

STOP = {"a", "an", "the", "is", "are", "of", "that", "there", "it", "and"}


def _config(task: str, **kw) -> DemoDataConfig:
    return DemoDataConfig(task=task, **{"n_train": 3000, "n_validation": 50, "n_test": 900, **kw})


def _tokens(text: str | None) -> list[str]:
    return re.findall(r"[a-z]+", (text or "").lower())


# ---- a bag-of-words Naive Bayes, the simplest learner that can find label information ---------------------

def _features(row: dict, with_rationale: bool) -> list[str]:
    """Field-prefixed words, plus the count of content words the hypothesis shares with the other fields."""
    fields = ["premise", "hypothesis", "question"] + (["rationale"] if with_rationale else [])
    feats = [f"{f}:{w}" for f in fields for w in _tokens(row[f])]
    if row["task"] == "nli":
        context = "rationale" if with_rationale else "premise"
        shared = (set(_tokens(row["hypothesis"])) & set(_tokens(row[context]))) - STOP
        feats.append(f"shared:{len(shared)}")
    return feats


def _naive_bayes_accuracy(df: pl.DataFrame, with_rationale: bool) -> float:
    """Train on the train split, return accuracy on the test split (QA: argmax over the row's choices).

    Each feature's likelihood is the smoothed share of a label's training rows that have it, summed over the
    features present (a Bernoulli model without the absent-feature terms).
    """
    counts: dict[str, Counter] = defaultdict(Counter)
    priors: Counter = Counter()
    for row in df.filter(pl.col("split") == "train").iter_rows(named=True):
        counts[row["label"]].update(set(_features(row, with_rationale)))
        priors[row["label"]] += 1

    def score(label: str, feats: set[str]) -> float:
        c, n = counts[label], priors[label]
        return math.log(n + 1) + sum(math.log((c[f] + 0.5) / (n + 1)) for f in feats)

    test = df.filter(pl.col("split") == "test")
    hits = 0
    for row in test.iter_rows(named=True):
        feats = set(_features(row, with_rationale))
        candidates = NLI_LABELS if row["task"] == "nli" else row["choices"]
        hits += max(candidates, key=lambda label: score(label, feats)) == row["label"]
    return hits / test.height


# ---- basic contract -------------------------------------------------------------------------------------

@pytest.mark.parametrize("task", ["nli", "qa"])
def test_deterministic_in_seed(task):
    a = generate_demo(_config(task, n_train=200, n_test=50))
    b = generate_demo(_config(task, n_train=200, n_test=50))
    c = generate_demo(_config(task, n_train=200, n_test=50, seed=14))
    assert a.equals(b)
    assert not a.equals(c)


@pytest.mark.parametrize("task", ["nli", "qa"])
def test_splits_ids_and_contract(task):
    df = generate_demo(DemoDataConfig(task=task, n_train=40, n_validation=12, n_test=20))
    assert df.schema == pl.Schema(EXAMPLE_SCHEMA)
    assert df.group_by("split").len().sort("split").rows() == [("test", 20), ("train", 40), ("validation", 12)]
    assert df["id"][0] == f"demo-{task}-000000" and df["id"].n_unique() == df.height
    assert set(df["task"]) == {task}
    assert validate_examples(df, task=task).equals(df)


def test_nli_labels_balanced():
    df = generate_demo(_config("nli"))
    for split in ("train", "test"):
        shares = df.filter(pl.col("split") == split)["label"].value_counts(normalize=True)
        assert set(shares["label"]) == set(NLI_LABELS)
        assert all(abs(s - 1 / 3) < 0.01 for s in shares["proportion"])


def test_qa_choices_and_balance():
    df = generate_demo(_config("qa"))
    assert all(len(c) == 5 and len(set(c)) == 5 and lab in c for c, lab in zip(df["choices"].to_list(), df["label"]))
    positions = Counter(list(c).index(lab) for c, lab in zip(df["choices"].to_list(), df["label"]))
    assert all(abs(n / df.height - 0.2) < 0.03 for n in positions.values())  # the answer's slot is uniform
    # every category is the answer equally often
    by_category = Counter(next(c.name for c in DEMO_CATEGORIES if f" {c.name}" in r) for r in df["rationale"])
    assert max(by_category.values()) - min(by_category.values()) <= 0.02 * df.height


@pytest.mark.parametrize("task", ["nli", "qa"])
def test_nonce_words_are_fresh_and_not_real_words(task):
    df = generate_demo(_config(task, n_train=2000))
    text_col = "premise" if task == "nli" else "question"
    vocab = {w for t in df[text_col] for w in _tokens(t)}
    nonces = vocab - REAL_WORDS
    assert len(nonces) == df.height  # one unseen word per example
    assert all(5 <= len(n) for n in nonces)


def test_a_large_demo_split_is_generated_whole():
    """10,000 training rows (its speed is a benchmark's business, not a timed assertion's: under load the old
    1-second bound failed a fresh-clone run)."""
    df = generate_demo(DemoDataConfig(task="nli", n_train=10_000, n_validation=5, n_test=5))
    assert df.filter(df["split"] == "train").height == 10_000 and df["id"].n_unique() == df.height


# ---- the information property ---------------------------------------------------------------------------

@pytest.mark.parametrize("task, chance", [("nli", 1 / 3), ("qa", 1 / 5)])
def test_label_needs_the_rationale(task, chance):
    df = generate_demo(_config(task))
    input_only = _naive_bayes_accuracy(df, with_rationale=False)
    with_rationale = _naive_bayes_accuracy(df, with_rationale=True)
    print(f"{task}: input-only {input_only:.3f}, input+rationale {with_rationale:.3f}")
    assert input_only < (0.5 if task == "nli" else 0.35)
    assert abs(input_only - chance) < 0.06
    assert with_rationale > 0.9


# ---- knobs ----------------------------------------------------------------------------------------------

def _label_words(df: pl.DataFrame) -> list[bool]:
    """Whether each rationale names a label: NLI any label word, QA its own answer."""
    if df["task"][0] == "nli":
        return [any(label in r for label in NLI_LABELS) for r in df["rationale"]]
    return [label in r for label, r in zip(df["label"], df["rationale"])]


@pytest.mark.parametrize("task", ["nli", "qa"])
def test_rationale_leakage(task):
    clean = generate_demo(_config(task, n_train=300, n_test=100))
    leaky = generate_demo(_config(task, n_train=300, n_test=100, rationale_leakage=1.0))
    assert not any(_label_words(clean))
    assert all(label in r for label, r in zip(leaky["label"], leaky["rationale"]))
    # the knob changes the rationales only, and only by appending
    assert leaky.drop("rationale").equals(clean.drop("rationale"))
    assert all(r.startswith(c) for r, c in zip(leaky["rationale"], clean["rationale"]))


@pytest.mark.parametrize("task", ["nli", "qa"])
def test_input_cues_raise_input_only_accuracy(task):
    df = generate_demo(_config(task, input_cue_rate=0.5))
    clean = generate_demo(_config(task))
    text_col = "hypothesis" if task == "nli" else "question"
    changed = (df[text_col] != clean[text_col]).mean()
    assert 0.4 < changed < 0.6
    assert df.drop(text_col).equals(clean.drop(text_col))
    accuracy = _naive_bayes_accuracy(df, with_rationale=False)
    print(f"{task}: input-only with cue rate 0.5: {accuracy:.3f}")
    assert accuracy > (0.6 if task == "nli" else 0.5)
