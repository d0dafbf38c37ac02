"""Built-in rationale variants and their combination with user rationales."""

from __future__ import annotations

import polars as pl
import pytest

from larev.errors import ConfigError, InputError
from larev.schema import RATIONALE_SCHEMA, validate_examples, validate_rationales
from larev.data.variants import LEAKY_TEMPLATE, VARIANTS, combine_rationale_sets, make_variants


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


def test_all_variants_exact(examples, baselines):
    out = make_variants(examples, baselines)
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
    assert VARIANTS == ("gold", "leaky", "gold_leaky", "vacuous")


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
    out = make_variants(examples, baselines)
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
