"""Counterfactual rationales (larev/methods/leakage_aware/counterfactuals.py): the swap, the rules, the twins."""

from __future__ import annotations

import random

import polars as pl
import pytest

from larev.formats import rationale_input
from larev.methods.leakage_aware.counterfactuals import (EXCLUSIVE_TERMS, ExclusiveTerms, counterfactual_rationale,
                                                         swap_term)

TERMS = ExclusiveTerms((("fruit", "tool", "animal"), ("red", "blue")))


def test_swap_term_replaces_whole_words_and_keeps_capitals_and_articles_right():
    assert swap_term("Every plodax is a fruit.", "fruit", "animal") == "Every plodax is an animal."
    assert swap_term("An animal, an Animal; animals.", "animal", "tool") == "A tool, a Tool; animals."
    assert swap_term("Fruit is fruitful.", "fruit", "tool") == "Tool is fruitful."
    assert swap_term("People call a certain tool a dax.", "tool", "fruit") == "People call a certain fruit a dax."


def test_exclusive_terms_are_validated():
    with pytest.raises(ValueError, match="at least two"):
        ExclusiveTerms((("fruit",),))
    with pytest.raises(ValueError, match="classes 0 and 1"):
        ExclusiveTerms((("fruit", "tool"), ("tool", "red")))
    with pytest.raises(ValueError, match="lower-case"):
        ExclusiveTerms((("Fruit", "tool"),))
    assert TERMS.found("A red dax is a kind of tool, not fruitful.") == ["red", "tool"]
    assert set(EXCLUSIVE_TERMS["demo"].classes[0]) >= {"fruit", "tool", "gemstone"}


def test_entailment_becomes_contradiction_with_an_exclusive_term_neither_text_names():
    rng = random.Random(0)
    twin = counterfactual_rationale("A dax is a kind of fruit.", "A man holds a fruit.", "entailment", TERMS, rng)
    assert twin in {("A dax is a kind of tool.", "contradiction"), ("A dax is a kind of animal.", "contradiction")}
    # the only other term is the hypothesis's own: no twin for this class, the next term of r is tried
    twin = counterfactual_rationale("A red dax is a tool.", "A man holds a red tool and an animal, not a fruit.",
                                    "entailment", TERMS, rng)
    assert twin == ("A blue dax is a tool.", "contradiction")
    # r names nothing the hypothesis names: nothing ties r to it
    assert counterfactual_rationale("A dax is a kind of fruit.", "A man holds a tool.", "entailment", TERMS,
                                    rng) is None


def test_contradiction_becomes_entailment_with_the_hypothesis_term():
    rng = random.Random(0)
    assert counterfactual_rationale("Every dax is an animal.", "A man holds a fruit.", "contradiction", TERMS,
                                    rng) == ("Every dax is a fruit.", "entailment")
    # r and the hypothesis name the same term: r does not say the object is another thing
    assert counterfactual_rationale("A dax is a fruit.", "A man holds a fruit.", "contradiction", TERMS,
                                    rng) is None
    # a class the hypothesis does not name
    assert counterfactual_rationale("A dax is red.", "A man holds a fruit.", "contradiction", TERMS, rng) is None


def test_neutral_empty_and_unknown_labels_have_no_twin():
    rng = random.Random(0)
    for rationale, label in (("A dax is a fruit.", "neutral"), ("", "entailment"), ("A dax is a fruit.", "B")):
        assert counterfactual_rationale(rationale, "A man holds a tool.", label, TERMS, rng) is None


def _frame() -> pl.DataFrame:
    return pl.DataFrame({
        "id": ["e", "c", "n", "x"], "task": "nli", "choices": [None] * 4,
        "label": ["entailment", "contradiction", "neutral", "entailment"],
        "hypothesis": ["A man holds a fruit.", "A man holds a fruit.", "A man holds a fruit.", "A man holds a tool."],
        "rationale": ["A dax is a fruit.", "A dax is a tool.", "A dax is red.", "A dax is a fruit."],
        "E1": ["b0", "b1", "b2", "b3"], "E2": ["m0", "m1", "m2", "m3"], "E3": ["a0", None, "a2", "a3"]},
        schema_overrides={"choices": pl.List(pl.String)})


def test_la_instances_follow_each_row_with_its_twin_in_every_environment_it_has():
    from larev.methods.leakage_aware.instances import la_instances

    df, envs = _frame(), ["E1", "E2", "E3"]
    plain = la_instances(df, envs, empty_rationales=True, borrowed=True, seed=2)
    twins = la_instances(df, envs, empty_rationales=True, borrowed=True, counterfactuals=1.0,
                         exclusive_terms=TERMS, seed=2)
    own = [x for x in twins if x.empty_input is not None]
    assert own == plain  # the instances' own rows and every other draw unchanged
    extra = [x for x in twins if x.empty_input is None]
    assert [x.label for x in extra] == ["contradiction", "entailment"]  # rows e and c; n neutral, x unrelated
    assert twins[1] is extra[0] and twins[3] is extra[1]  # each right after its row
    r_e = extra[0].inputs[0].split("rationale: ")[1].split(" baseline")[0]
    assert r_e in {"A dax is a tool.", "A dax is an animal."}
    assert extra[0].inputs == tuple(rationale_input(r_e, b) for b in ("b0", "m0", "a0"))
    assert extra[1].inputs == (rationale_input("A dax is a fruit.", "b1"), rationale_input("A dax is a fruit.", "m1"),
                               None)  # row c lacks E3
    assert extra[1].probe_input == plain[1].probe_input and extra[1].zero_env is None
    assert extra[1].borrowed_input is None
    off = la_instances(df, envs, counterfactuals=0.0, exclusive_terms=TERMS, seed=2)
    assert len(off) == df.height
    with pytest.raises(ValueError, match="need exclusive terms"):
        la_instances(df, envs, counterfactuals=0.5)


def test_a_fresh_phi_la_takes_the_dropout_it_is_given():
    from larev.config import ModelConfig
    from larev.methods.leakage_aware.config import LarevConfig, la_model_for

    embedded = ModelConfig()
    assert la_model_for(embedded, 0.0).dropout == 0.0 and la_model_for(embedded, 0.2).dropout == 0.2
    assert la_model_for(embedded, 0.1) is embedded  # unchanged: the same config (and cache key)
    assert LarevConfig().la_dropout is None  # unset: the preset, else model.dropout (tests/test_presets.py)
    with pytest.raises(ValueError):
        LarevConfig(la_dropout=1.0)


def test_the_comparison_diagnostic_trains_on_the_twins_and_reports_each_epoch(capsys):
    """`python benchmarks/comparison.py` (the diagnostic behind `larev.la_dropout`'s demo preset, docs/defaults.md)
    on a tiny slice of demo data. The script is not in an installed package: it is loaded from its file."""
    import importlib.util
    from pathlib import Path

    from larev.config import DemoDataConfig

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "comparison.py"
    spec = importlib.util.spec_from_file_location("benchmarks_comparison", script)
    comparison = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(comparison)

    tiny = DemoDataConfig(seed=7, n_train=30, n_validation=6, n_test=6)
    accuracy = comparison.comparison_accuracy(dropout=0.0, epochs=2, twins=True, data=tiny)
    assert len(accuracy) == 2 and all(0.0 <= a <= 1.0 for a in accuracy)
    assert comparison.main(["--epochs", "1", "--dropout", "0", "--n-train", "30"]) == 0
    assert "dropout 0.0 twins False seed 0: validation accuracy by epoch 0." in capsys.readouterr().out
    with pytest.raises(SystemExit):
        comparison.main(["--dropout", "x"])
    assert "invalid float value" in capsys.readouterr().err
