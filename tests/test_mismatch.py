"""The signal that ties a rationale to its instance (`larev.lambda_mismatched`): phi_LA also learns y_i from
[r_j, b_i^m], r_j another training instance's rationale of another label. Its term by hand, its inputs (donors of
another label, training rows only, one environment each), where the settings reach, and the planted test row the
check refuses."""

from __future__ import annotations

import polars as pl
import pytest
import torch

from larev.formats import rationale_input
from larev.methods.leakage_aware.config import LarevConfig
from larev.methods.leakage_aware.instances import la_instances, mismatched_donors
from larev.methods.leakage_aware.objective import la_objective

LABELS = ["entailment", "entailment", "neutral", "neutral", "contradiction", "contradiction"]
ENVS = ["E1", "E2", "E3"]


def _frame(split: list[str] | None = None) -> pl.DataFrame:
    n = len(LABELS)
    return pl.DataFrame({"id": [f"i{k}" for k in range(n)], "task": "nli", "choices": [None] * n, "label": LABELS,
                         "rationale": [f"r{k}" for k in range(n)], "E1": [f"b{k}" for k in range(n)],
                         "E2": [f"m{k}" for k in range(n)], "E3": [None, *[f"a{k}" for k in range(1, n)]],
                         "split": split or ["train"] * n},
                        schema_overrides={"choices": pl.List(pl.String)})


def test_the_mismatched_term_by_hand():
    """mean ERM (1 + 2) / 2 = 1.5, IRM 0.1 + 0.2 at weight 2 = 0.6, probe 0.4 at weight 0.5 subtracted = 0.2,
    the mismatched term 0.8 at weight 0.5 = 0.4: 1.5 + 0.6 - 0.2 + 0.4 = 2.3; not computed (None), it adds nothing."""
    erm, irm = [torch.tensor(1.0), torch.tensor(2.0)], [torch.tensor(0.1), torch.tensor(0.2)]
    got = la_objective(erm, irm, torch.tensor(0.4), 2.0, 0.5, mismatched_loss=torch.tensor(0.8), w_mismatched=0.5)
    assert got.item() == pytest.approx(2.3)
    assert la_objective(erm, irm, torch.tensor(0.4), 2.0, 0.5, w_mismatched=0.5).item() == pytest.approx(1.9)


def test_each_instance_reads_another_labels_training_rationale_in_one_of_its_environments():
    df = _frame()
    plain = la_instances(df, ENVS, seed=4)
    rows = la_instances(df, ENVS, mismatched=True, seed=4)
    assert all(x.mismatched_input is None and x.mismatch_env is None for x in plain)
    assert [x.inputs for x in rows] == [x.inputs for x in plain]  # the instances' own rows are unchanged
    assert [x.label for x in rows] == LABELS  # trained to the instance's own label
    donors = []
    for k, x in enumerate(rows):
        assert x.inputs[x.mismatch_env] is not None  # an environment the row has (row 0 lacks E3)
        donor = int(x.mismatched_input.split("rationale: r")[1][0])
        donors.append(donor)
        assert labels_differ(donor, k)
        assert x.mismatched_input == rationale_input(f"r{donor}", df[ENVS[x.mismatch_env]][k])
    assert donors == mismatched_donors(df, seed=4)
    assert la_instances(df, ENVS, mismatched=True, seed=4) == rows  # seeded
    # a row whose label no other row lacks has no donor: none here; every row got one
    assert all(x.mismatched_input is not None for x in rows)


def labels_differ(donor: int, row: int) -> bool:
    return LABELS[donor] != LABELS[row] and donor != row


def test_a_planted_test_row_fails_the_training_rows_check():
    """The donors are training rows only: a test row planted among them (or a validation row) is refused, naming
    it, before any input is built."""
    planted = _frame(split=["train", "train", "test", "train", "train", "train"])
    with pytest.raises(ValueError, match=r"training rows only.*split\(s\) \['test'\].*'i2'"):
        la_instances(planted, ENVS, mismatched=True)
    with pytest.raises(ValueError, match="validation"):
        mismatched_donors(_frame(split=["train"] * 5 + ["validation"]), seed=0)
    la_instances(planted, ENVS)  # without the signal the rows are not read as donors


def test_larev_passes_its_weight_to_every_phi_la_it_trains():
    """`larev.lambda_mismatched` reaches the objective of the main phi_LA and of each ablation (and so of the
    erm_envs control); 0 by default, so the thesis's objective is unchanged unless asked."""
    assert LarevConfig().objective_for(None, "nli").lambda_mismatched == 0.0
    on = LarevConfig(lambda_mismatched=0.5)
    for ablation in (None, "no_irm", "no_probe", "erm_envs", "thesis"):
        assert on.objective_for(ablation, "nli").lambda_mismatched == 0.5


def test_phi_la_plan_builds_mismatched_inputs_for_training_rows_only():
    """The plan's training instances carry the mismatched inputs (the validation rows never donate), its
    validation instances none; the meta counts them."""
    from larev.methods.leakage_aware.config import LeakageAwareConfig
    from larev.methods.leakage_aware.fit import phi_la_plan
    from larev.config import TrainConfig

    df = pl.concat([_frame(), _frame().with_columns(pl.format("v{}", pl.col("id")).alias("id"),
                                                    pl.lit("validation").alias("split"))])
    objective = LeakageAwareConfig(lambda_irm=0.0, lambda_probe=0.0, empty_rationales=False, lambda_borrowed=0.0,
                                   lambda_mismatched=1.0, zero_terms_start=0.0)
    plan = phi_la_plan(df, ENVS, TrainConfig(epochs=1), objective, min_steps=0, label_edits="none",
                       exclusive_terms="none", mask_token="<mask>")
    assert all(x.mismatched_input is not None for x in plan.train_instances)
    assert all(x.mismatched_input is None for x in plan.val_instances)
    assert all(" r" in x.mismatched_input for x in plan.train_instances)
    assert plan.meta["zero_rows"]["mismatched"] == len(LABELS)
