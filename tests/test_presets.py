"""Presets as data and the one resolution step (larev/presets.py): values worked out by hand from the table."""

from __future__ import annotations

import pytest

from larev.presets import (Preset, data_kind, load_presets, preset_values, resolve_settings, unset_settings)


def preset(name, settings, backbone="*", task="*", data="*"):
    return Preset(name=name, backbone=backbone, task=task, data=data, chosen_on="by hand", settings=settings)


TOY = (preset("base", {"a.x": 1, "a.y": "tokens"}),
       preset("small", {"a.x": 2}, backbone=("tiny",)),
       preset("qa", {"a.y": "label_set"}, task="qa"),
       preset("demo-only", {"a.z": 0.0}, data="demo"))


def test_later_matching_presets_override_earlier_ones_and_others_do_not_apply():
    assert preset_values("tiny", "nli", "real", TOY) == {"a.x": (2, "small"), "a.y": ("tokens", "base")}
    assert preset_values("big", "qa", "demo", TOY) == {"a.x": (1, "base"), "a.y": ("label_set", "qa"),
                                                       "a.z": (0.0, "demo-only")}
    with pytest.raises(ValueError, match="task must be one of"):
        preset_values("tiny", "summarisation", "real", TOY)
    assert data_kind("demo") == "demo" and data_kind("files") == data_kind("hub") == "real"


def test_resolution_fills_only_what_is_unset_and_records_where_each_value_came_from():
    params = {"a": {"x": None, "y": "auto", "z": None, "kept": None},
              "model": {"dropout": 0.1},
              "larev": {"la_dropout": None, "la_min_steps": 3, "objective": {"lambda_irm": 0.0, "lambda_probe": 0.5}},
              "larev_vs_empty": {"la_min_steps": None, "lambda_irm": None, "lambda_probe": 2.0},
              "train": {"learning_rate": 0.5}, "inner": {"train": {"learning_rate": None}}}
    filled, provenance = resolve_settings(params, backbone="tiny", task="qa", data="real", presets=TOY)
    assert filled["a"] == {"x": 2, "y": "label_set", "z": None, "kept": None}  # a.z: demo data only
    assert filled["larev"]["la_dropout"] == 0.1 and filled["inner"]["train"]["learning_rate"] == 0.5
    assert filled["larev_vs_empty"] == {"la_min_steps": 3, "lambda_irm": 0.0, "lambda_probe": 2.0}  # set: kept
    assert provenance == {"a.x": "small", "a.y": "qa", "larev.la_dropout": "=model.dropout",
                          "larev_vs_empty.la_min_steps": "=larev.la_min_steps",
                          "larev_vs_empty.lambda_irm": "=larev.objective.lambda_irm",
                          "inner.train.learning_rate": "=train.learning_rate"}
    assert params["a"]["x"] is None  # the input is not changed
    assert unset_settings(filled, ("a", "larev")) == ["a.z", "a.kept"]
    given = {**params, "a": {"x": 7, "y": "tokens", "z": 0.3, "kept": 1}}
    again, provenance = resolve_settings(given, backbone="tiny", task="qa", data="demo", presets=TOY)
    assert again["a"] == given["a"] and not any(p.startswith("a.") for p in provenance)
    with pytest.raises(ValueError, match="sets 'a.missing'"):
        resolve_settings(params, backbone="tiny", task="nli", data="real",
                         presets=(preset("typo", {"a.missing": 1}),))


def test_the_table_loads_says_where_each_value_was_chosen_and_keeps_demo_choices_on_demo_data():
    presets = load_presets()
    assert len({p.name for p in presets}) == len(presets) and all(p.chosen_on for p in presets)
    # a default chosen on demo data applies to demo data only; one that reaches real data names real rows, a
    # paper or a rule
    for p in presets:
        if p.data == "demo":
            assert "demo data" in p.chosen_on, p.name
        else:
            assert any(w in p.chosen_on for w in ("e-SNLI", "CoS-E", "thesis", "a rule of", "fine-tuning")), p.name
    # no default comes from the demo generator's own rule (its exclusive categories)
    assert not any("exclusive_terms" in path for p in presets for path in p.settings)


@pytest.mark.parametrize("backbone, task, data, expected", [
    ("embedded", "nli", "demo", {"lambda_irm": 1.0, "irm_on": "tokens", "la_start": "fresh", "label_edits": "none",
                                 "la_dropout": 0.0, "la_min_steps": 400, "ranking": "global"}),
    # decided on the validity benchmark's tune split: ERM over the environments (IRM and probe weights 0)
    ("embedded", "nli", "real", {"lambda_irm": 0.0, "irm_on": "tokens", "la_start": "fresh", "label_edits": "none",
                                 "la_dropout": 0.1, "la_min_steps": 0, "ranking": "global"}),
    ("minilm-frozen", "qa", "real", {"lambda_irm": 10.0, "irm_on": "label_set", "la_start": "phi",
                                     "label_edits": "rationale_and_baseline", "la_dropout": 0.1, "la_min_steps": 0,
                                     "ranking": "per_row"}),
    ("t5-large", "nli", "real", {"lambda_irm": 25.0, "irm_on": "tokens", "la_start": "fresh", "label_edits": "none",
                                 "la_dropout": 0.1, "la_min_steps": 0, "ranking": "global"}),
    ("t5-large", "qa", "real", {"lambda_irm": 5.0, "irm_on": "tokens", "la_start": "fresh", "label_edits": "none",
                                "la_dropout": 0.1, "la_min_steps": 0, "ranking": "per_row"}),
])
def test_larev_resolves_per_backbone_task_and_data(backbone, task, data, expected):
    """The pipeline's parameters resolved for each kind of run: every LAREV setting concrete, as the table says."""
    from flows.pipeline import PipelineParams
    from tasks.metric import resolved_params

    params = PipelineParams(model={"backbone": "embedded"})  # the backbone enters resolution by name
    values = params.model_dump(mode="json")
    filled, _ = resolve_settings(values, backbone=backbone, task=task, data=data)
    larev = filled["larev"]
    got = {"lambda_irm": larev["objective"]["lambda_irm"], "irm_on": larev["objective"]["irm_on"],
           "la_start": larev["la_start"], "label_edits": larev["label_edits"], "la_dropout": larev["la_dropout"],
           "la_min_steps": larev["la_min_steps"], "ranking": larev["attribution"]["spans"]["ranking"]}
    assert got == expected
    lr = {"embedded": 1e-3, "minilm-frozen": 2e-3}.get(backbone, 1e-4)
    assert filled["train"]["learning_rate"] == lr and filled["larev"]["probe_train"]["learning_rate"] == lr
    assert filled["larev"]["la_train"]["learning_rate"] == (5e-4 if backbone == "minilm-frozen" else lr)
    zero_terms = {"minilm-frozen": (4.0, 0.75)}.get(backbone, (2.0, 0.5))
    decided = (backbone, task, data) == ("embedded", "nli", "real")  # the validity benchmark's tune split decided
    own = filled["larev_vs_empty"]
    assert (own["lambda_borrowed"], own["zero_terms_start"]) == ((4.0, 0.5) if decided else zero_terms)
    assert own["la_min_steps"] == (1200 if (backbone, task, data) == ("embedded", "nli", "demo") else
                                   larev["la_min_steps"])
    assert (own["lambda_irm"], own["lambda_probe"]) == ((1.0, 0.005) if decided else (
        larev["objective"]["lambda_irm"], larev["objective"]["lambda_probe"]))  # unset: larev's
    assert unset_settings(filled, ("model", "train", "score", "baselines", "larev", "larev_vs_empty", "rora")) == []
    if (backbone, data) == ("embedded", "demo"):  # the seam's own step (the default params: demo data) agrees
        assert params.data.source == "demo"
        resolved, provenance = resolved_params(params, task, ("larev", "larev_vs_empty", "rora"))
        assert resolved.larev.la_dropout == expected["la_dropout"] and resolved.larev.la_min_steps == 400
        assert provenance["larev.objective.lambda_irm"] == f"small-backbone-{task}"
        assert provenance["larev.la_dropout"] == "demo-embedded"


def test_resolution_refuses_a_setting_no_preset_fills(monkeypatch):
    from flows.pipeline import PipelineParams
    from tasks.metric import resolved_params

    monkeypatch.setattr("larev.presets.load_presets", lambda path=None: ())
    with pytest.raises(ValueError, match="no preset fills .*larev.objective.lambda_irm"):
        resolved_params(PipelineParams(), "nli", ("larev",))
