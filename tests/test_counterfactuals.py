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


PLANTED_CATEGORIES = ("fruit", "tool", "toy", "bird", "cup", "hat")


def planted_comparison_scores(seed: int = 0, counterfactuals: float = 1.0, n: int = 540) -> dict[str, dict]:
    """Mean LAREV scores (`new_information`, today's objective) of gold, borrowed and empty test rationales on
    planted data where only a comparison of r with the hypothesis tells entailment from contradiction, for phi_LA
    and the erm_envs control, with `counterfactuals` the share of training twins (`seed` draws the data and
    initialises the models). The hypothesis names a category; an entailment rationale names the same one, a
    contradiction rationale another, a neutral one a colour; b's relation word carries the label (E1), is masked
    (E2) or names another label (E3). A borrowed rationale (another test row's, same label) names its own row's
    category: on entailment rows it contradicts this hypothesis five times in six."""
    import polars as pl

    from larev.config import ScoreConfig, TrainConfig
    from larev.data.variants import borrowed_from
    from larev.formats import baseline_input
    from larev.methods.leakage_aware.config import LeakageAwareConfig
    from larev.methods.leakage_aware.instances import la_instances
    from larev.methods.leakage_aware.objective import probe_from
    from larev.methods.leakage_aware.training import train_leakage_aware
    from larev.metrics.rev import score_rev
    from larev.models.train import train_evaluator
    from tests.helpers import tiny_evaluator

    labels = ["entailment", "contradiction", "neutral"]
    cue = {"entailment": "implies", "contradiction": "contradicts", "neutral": "unrelated"}
    anti = {"entailment": "contradicts", "contradiction": "unrelated", "neutral": "implies"}
    colours = ("red", "green", "blue")
    terms = ExclusiveTerms((PLANTED_CATEGORIES,))
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        y, cat = labels[i % 3], rng.choice(PLANTED_CATEGORIES)
        said = {"entailment": cat, "contradiction": rng.choice([c for c in PLANTED_CATEGORIES if c != cat]),
                "neutral": rng.choice(colours)}[y]
        h = f"a man holds a {cat}"
        rows.append({"id": f"p{i}", "task": "nli", "choices": None, "label": y, "hypothesis": h,
                     "rationale": f"it is a {said}", "E1": f"{h} {cue[y]}", "E2": f"{h} <mask>",
                     "E3": f"{h} {anti[y]}"})
    frame = pl.DataFrame(rows, schema_overrides={"choices": pl.List(pl.String)})
    train, test = frame[: n * 8 // 9], frame[n * 8 // 9:]
    words = [*PLANTED_CATEGORIES, *colours, *cue.values(), "a", "man", "holds", "it", "is", "<mask>", "rationale",
             "baseline", ":"]
    config = TrainConfig(epochs=10, batch_size=8, learning_rate=3e-3, seed=seed)
    phi = tiny_evaluator(words + labels, seed=seed)
    train_evaluator(phi, [rationale_input(r, b) for r, b in zip(train["rationale"], train["E1"])],
                    train["label"].to_list(), [], [], [], config, progress=False)
    psi = probe_from(phi)
    train_evaluator(psi, [baseline_input(m) for m in train["E2"]], train["label"].to_list(), [], [], [], config,
                    progress=False, keep_eval=[psi.model.get_encoder()])
    donors = borrowed_from(test["label"].to_list(), same_label=True, seed=seed + 1)
    golds = test["rationale"].to_list()
    rationales = pl.concat([test.select("id", pl.lit(source).alias("source"), pl.Series("rationale", texts), "label")
                            for source, texts in (("gold", golds), ("borrowed", [golds[d] for d in donors]),
                                                  ("empty", [""] * test.height))])
    baselines = test.select("id", "label", pl.col("E1").alias("baseline"))

    def scores(objective: LeakageAwareConfig) -> dict[str, float]:
        objective = objective.resolved()
        borrowed = objective.lambda_borrowed > 0
        instances = la_instances(train, ["E1", "E2", "E3"], empty_rationales=True, borrowed=True,
                                 label_statements=objective.label_statements if borrowed else 0.0,
                                 baseline_rationales=objective.baseline_rationales if borrowed else 0.0,
                                 counterfactuals=counterfactuals, exclusive_terms=terms, seed=seed)
        phi_la = tiny_evaluator(words + labels, seed=seed + 1)
        train_leakage_aware(phi_la, psi, instances, [], [], config.model_copy(update={"batch_size": 4}), objective,
                            "nli", progress=False)
        table = score_rev(phi_la, None, rationales, test, baselines, ScoreConfig(), zero="empty")
        return dict(table.group_by("source").agg(pl.col("score").mean()).iter_rows())

    objective = LeakageAwareConfig()
    return {"larev": scores(objective),
            "erm_envs": scores(objective.model_copy(update={"lambda_irm": 0.0, "lambda_probe": 0.0,
                                                            "lambda_borrowed": 0.0, "label_statements": 0.0,
                                                            "baseline_rationales": 0.0}))}
