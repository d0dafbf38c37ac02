"""Built-in rationale variants and their combination with user rationales."""

from __future__ import annotations

import polars as pl
import pytest

from larev.errors import ConfigError, InputError
from larev.schema import RATIONALE_SCHEMA, validate_examples, validate_rationales
from larev.data.variants import (LEAKY_TEMPLATE, THESIS_VARIANTS, VARIANTS, borrowed_from, combine_rationale_sets,
                                 make_variants)


@pytest.fixture
def examples() -> pl.DataFrame:
    return validate_examples(pl.DataFrame({
        "id": ["a", "b"],
        "premise": ["A dog running in the surf.", "A man sleeps."],
        "hypothesis": ["A dog is at the beach.", "The man runs."],
        "label": ["entailment", "contradiction"],
        "rationale": ["The surf is at a beach. ", "Sleeping is not running."],
    }), task="nli", default_split="test")


@pytest.fixture
def baselines() -> pl.DataFrame:
    return pl.DataFrame({"id": ["b", "a"], "baseline": ["B-base.", "A-base."], "baseline_backend": ["x", "x"]})


def test_all_variants_exact(examples, baselines, caplog):
    out = make_variants(examples, baselines)
    assert out.filter(pl.col("source") == "borrowed").is_empty()  # each label has one example: no donor
    assert "'borrowed': 2 of 2 examples have no donor" in caplog.text
    assert out.filter(pl.col("source").is_in(["borrowed_other", "empty"])).rows() == [
        ("a", "borrowed_other", "Sleeping is not running.", "entailment"),  # the only other-label example
        ("b", "borrowed_other", "The surf is at a beach. ", "contradiction"),
        ("a", "empty", "", "entailment"),
        ("b", "empty", "", "contradiction"),
    ]
    out = out.filter(pl.col("source").is_in(THESIS_VARIANTS))
    assert out.schema == pl.Schema(RATIONALE_SCHEMA)
    assert out.rows() == [
        ("a", "gold", "The surf is at a beach. ", "entailment"),
        ("b", "gold", "Sleeping is not running.", "contradiction"),
        ("a", "leaky", "The answer is entailment.", "entailment"),
        ("b", "leaky", "The answer is contradiction.", "contradiction"),
        ("a", "gold_leaky", "The surf is at a beach. The answer is entailment.", "entailment"),
        ("b", "gold_leaky", "Sleeping is not running. The answer is contradiction.", "contradiction"),
        ("a", "vacuous", "A-base.", "entailment"),
        ("b", "vacuous", "B-base.", "contradiction"),
    ]
    assert LEAKY_TEMPLATE.format(label="neutral") == "The answer is neutral."
    assert VARIANTS == ("gold", "leaky", "gold_leaky", "vacuous", "borrowed", "borrowed_other", "empty")


def test_borrowed_is_a_seeded_derangement_within_each_label():
    labels = ["e", "n", "e", "c", "e", "n", "c", "c", "e"]
    for seed in range(20):
        donors = borrowed_from(labels, same_label=True, seed=seed)
        assert all(d is not None and d != i and labels[d] == labels[i] for i, d in enumerate(donors))
        assert sorted(donors) == list(range(len(labels)))  # every rationale lent exactly once
        other = borrowed_from(labels, same_label=False, seed=seed)
        assert all(labels[d] != labels[i] for i, d in enumerate(other))
    assert borrowed_from(labels, same_label=True, seed=3) == borrowed_from(labels, same_label=True, seed=3)
    draws = {tuple(borrowed_from(labels, same_label=True, seed=s)) for s in range(20)}
    assert len(draws) > 1  # the seed matters
    # Sattolo draws one cycle per label: the four 'e' rows form a single 4-cycle, never two swaps
    donors = borrowed_from(labels, same_label=True, seed=0)
    row, seen = 0, []
    while row not in seen:
        seen.append(row)
        row = donors[row]
    assert sorted(seen) == [0, 2, 4, 8]
    assert borrowed_from(["e", "e"], same_label=False) == [None, None]
    assert borrowed_from(["e", "n"], same_label=True) == [None, None]


def test_borrowed_rows_carry_their_own_label_and_another_rationale():
    ex = validate_examples(pl.DataFrame({
        "id": [f"x{i}" for i in range(6)], "premise": ["p"] * 6, "hypothesis": ["h"] * 6,
        "label": ["entailment", "neutral", "entailment", "neutral", "entailment", "contradiction"],
        "rationale": [f"r{i}" for i in range(6)]}), task="nli", default_split="test")
    out = make_variants(ex, pl.DataFrame(schema={"id": pl.String, "baseline": pl.String}),
                        ["borrowed", "borrowed_other"])
    borrowed = out.filter(pl.col("source") == "borrowed")
    assert borrowed["id"].to_list() == ["x0", "x1", "x2", "x3", "x4"]  # x5 is the only contradiction
    owner = {f"r{i}": y for i, y in enumerate(ex["label"])}
    for row in borrowed.iter_rows(named=True):
        assert row["rationale"] != f"r{row['id'][1:]}" and owner[row["rationale"]] == row["label"]
    for row in out.filter(pl.col("source") == "borrowed_other").iter_rows(named=True):
        assert owner[row["rationale"]] != row["label"]


def test_subset_and_order(examples, baselines):
    out = make_variants(examples, baselines, ["vacuous", "leaky"])
    assert out["source"].to_list() == ["vacuous", "vacuous", "leaky", "leaky"]


def test_unknown_or_repeated_variant(examples, baselines):
    with pytest.raises(ConfigError, match=r"unknown rationale variant\(s\) \['golden'\].*'gold_leaky'"):
        make_variants(examples, baselines, ["golden"])
    with pytest.raises(ConfigError, match="repeated"):
        make_variants(examples, baselines, ["gold", "gold"])


def test_missing_inputs(examples, baselines):
    with pytest.raises(InputError, match="row 0.*no baseline for example 'a'"):
        make_variants(examples, baselines.filter(pl.col("id") == "b"))
    with pytest.raises(InputError, match="several baselines for id 'a'"):
        make_variants(examples, pl.concat([baselines, baselines.filter(pl.col("id") == "a")]))
    no_gold = examples.with_columns(pl.Series("rationale", ["ok", None], pl.String))
    with pytest.raises(InputError, match="row 1, column 'rationale'"):
        make_variants(no_gold, baselines)
    assert make_variants(no_gold, baselines.head(0), ["leaky"]).height == 2  # neither gold nor baselines needed


def test_variants_pass_rationale_validation(examples, baselines):
    out = make_variants(examples, baselines, [v for v in VARIANTS if v != "empty"])  # a user file may not be empty
    assert validate_rationales(out, examples).equals(out)


def test_combine_rationale_sets(examples, baselines):
    variants = make_variants(examples, baselines, ["leaky"])
    user = validate_rationales(pl.DataFrame({"id": ["a", "b"], "source": ["gpt", "gpt"],
                                             "rationale": ["Dogs surf at beaches.", "One cannot sleep and run."]}),
                               examples)
    combined = combine_rationale_sets(variants, user)
    assert combined["source"].to_list() == ["leaky", "leaky", "gpt", "gpt"]
    clash = user.with_columns(pl.lit("leaky").alias("source"))
    with pytest.raises(InputError, match=r"\['leaky'\] collide with built-in variants"):
        combine_rationale_sets(variants, clash)


def test_bulk_rationales_cycle_the_ids_with_unique_sources_and_keep_each_gold_rationale():
    from larev.data.variants import bulk_rationales

    examples = pl.DataFrame({"id": ["a", "b"], "rationale": ["x y", "z"]})
    bulk = bulk_rationales(examples, 5, seed=3)
    assert bulk["id"].to_list() == ["a", "b", "a", "b", "a"]
    assert bulk["source"].to_list() == ["model-0", "model-0", "model-1", "model-1", "model-2"]
    assert bulk.select("id", "source").is_unique().all()
    for gold, text in zip(["x y", "z", "x y", "z", "x y"], bulk["rationale"]):
        assert text == gold or text.startswith(gold + " ")
        assert set(text.split()) <= {"x", "y", "z"}
    assert bulk.equals(bulk_rationales(examples, 5, seed=3))
    assert bulk_rationales(examples, 0).height == 0
