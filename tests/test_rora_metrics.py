"""RORA eq. 10, RQ and LAS against hand-computed values; RORA's training instances; the IRM loop with K
environments and no probe."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from larev.config import TrainConfig
from larev.methods.leakage_aware.training import train_leakage_aware
from larev.metrics.accuracy import accuracy_gain, las_aggregate
from larev.metrics.scores import summarise
from larev.metrics.rora import pointwise_rora
from larev.methods.rora.config import training_sources, RoraConfig, model_source
from larev.methods.rora.environments import counterfactual_requests, environment_names, rora_instances
from tests.helpers import tiny_evaluator

LABELS = ["entailment", "contradiction", "neutral"]


def test_eq10_by_hand():
    # log 0.6 - log 0.3 = log 2; log 0.2 - log 0.4 = -log 2
    got = pointwise_rora(np.log([0.6, 0.2]), np.log([0.3, 0.4]))
    assert got == pytest.approx([math.log(2), -math.log(2)])
    assert got.mean() == pytest.approx(0.0)


def test_rq_and_las_by_hand():
    with_r = np.array([True, True, False, True, False, True])
    without = np.array([False, True, True, False, False, False])
    gain = accuracy_gain(with_r, without)
    assert gain.tolist() == [1, 0, -1, 1, 0, 1]
    assert gain.mean() == pytest.approx(1 / 3)  # RQ
    leaks = np.array([True, True, True, False, False, False])
    # leaking group mean (1 + 0 - 1) / 3 = 0; non-leaking (1 + 0 + 1) / 3 = 2/3; macro average 1/3
    assert las_aggregate(gain, leaks) == pytest.approx(1 / 3)
    assert math.isnan(las_aggregate(gain, np.ones(6, bool)))
    assert math.isnan(las_aggregate(gain, np.zeros(6, bool)))


def test_summary_uses_the_las_macro_average_and_means_elsewhere():
    scores = pl.DataFrame({
        "metric": ["las"] * 4 + ["rq"] * 4, "source": ["gold"] * 8, "score": [1.0, 0.0, 1.0, 1.0] * 2,
        "correct_with": [True] * 8, "correct_base": [False] * 8,
        "leaks": [True, True, False, False, None, None, None, None]})
    s = {m: v for m, v in summarise(scores).select("metric", "score").iter_rows()}
    assert s["las"] == pytest.approx((0.5 + 1.0) / 2) and s["rq"] == pytest.approx(0.75)


FRAME = pl.DataFrame({"id": ["a", "b"], "task": ["nli", "qa"], "premise": ["p", None], "hypothesis": ["h", None],
                      "question": [None, "q?"], "choices": [None, ["x", "y"]], "label": ["neutral", "y"],
                      "rationale": ["so it is neutral.", "y it is."]},
                     schema_overrides={"choices": pl.List(pl.String)})


def test_counterfactual_requests_one_per_label():
    req = counterfactual_requests(FRAME, [[[9, 16]], []], max_spans=4)
    assert req.height == 3 + 2
    first = req.filter(pl.col("row") == 0)
    assert first["env_label"].to_list() == LABELS
    assert first["masked"][0] == "so it is <extra_id_0>." and first["n_spans"].to_list() == [1, 1, 1]
    assert first["input"][1].startswith("label: contradiction input: premise: p hypothesis: h")
    assert req.filter(pl.col("row") == 1)["n_spans"].to_list() == [0, 0]


def test_rora_instances_pad_missing_environments_with_the_original():
    inst = rora_instances(FRAME, [["e1", "e2", "e3"], ["r1", "r2"]], n_env=3)
    assert inst[0].inputs[2] == "input: premise: p hypothesis: h rationale: e3" and inst[0].label == "neutral"
    assert inst[1].inputs[2] == "input: question: q? choices: x ; y rationale: y it is."
    assert inst[1].candidates == ("x", "y")
    assert environment_names(3) == ("D1", "D2", "D3")


def test_sources_and_model_source():
    per_source = RoraConfig(train_on="each_source")
    assert per_source.sources(["gold", "leaky", "vacuous"]) == ["gold", "leaky", "vacuous"]
    assert per_source.sources(["leaky"]) == ["gold", "leaky"]
    assert RoraConfig().sources(["gold", "leaky"]) == ["gold"]  # the default trains on gold only
    assert training_sources(["leaky", "gold", "vacuous"]) == ["gold", "leaky", "vacuous"]
    assert model_source("leaky", ["gold", "leaky"]) == "leaky"
    assert model_source("gpt-4", ["gold", "leaky"]) == "gold"


def test_irm_loop_with_label_environments_and_no_probe_trains():
    words = ["input", "premise", "hypothesis", "rationale", ":", "p", "h", "x", "so", "it", "is", "."] + LABELS
    phi = tiny_evaluator(words + LABELS)
    frame = FRAME.filter(pl.col("task") == "nli")
    frame = pl.concat([frame] * 8)
    inst = rora_instances(frame, [[f"so it is {e}." for e in LABELS]] * 8, n_env=3)
    before = [p.detach().clone() for p in phi.model.parameters()]
    cfg = RoraConfig()
    result = train_leakage_aware(phi, None, inst, inst[:2], [LABELS] * 2, TrainConfig(epochs=1, batch_size=4),
                                 cfg.objective, task="nli", progress=False, env_names=environment_names(3))
    assert any(not (a == b.detach()).all() for a, b in zip(before, phi.model.parameters()))
    assert {"val_logp_D1", "val_logp_D2", "val_logp_D3"} <= set(result.history[0])
    assert math.isnan(result.trace[0].probe)  # no probe term in RORA
    with pytest.raises(ValueError, match="needs the probe"):
        train_leakage_aware(phi, None, inst, [], [], TrainConfig(epochs=1), cfg.objective.model_copy(
            update={"lambda_probe": 0.1}), task="nli", progress=False, env_names=environment_names(3))


def test_rora_diagnostics_table():
    from larev.methods.rora.report import rora_diagnostics

    tables = {
        "rora_spans:leaky": pl.DataFrame({"id": ["a", "b"], "span_source": ["threshold", "none"]}),
        "rora_words:leaky": pl.DataFrame({"word": ["neutral", "the"], "attribution": [0.8, 0.0], "count": [5, 9],
                                          "leaky": [True, False]}),
        "counterfactuals:leaky": pl.DataFrame({"id": ["a"] * 3 + ["b"] * 3, "rationale": ["x", "y", "z"] + ["w"] * 3,
                                               "n_missing": [0, 1, 0, 0, 0, 0]}),
    }
    text = rora_diagnostics(tables)
    assert "## RORA diagnostics" in text
    assert "| leaky | 2 | 0.500 | 0.000 | neutral | 0.500 | 1 |" in text
    assert rora_diagnostics({}) == ""
