"""Defaults decided on the tune split (issue 53, item 4): the protocol's rule by hand, through `evaluate` on made-up
scores, the protocol's checks of its decisions, and that LAREV's candidates stand for the settings they name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from larev.errors import ConfigError
from larev.validity.decisions import decide
from larev.validity.protocol import load_protocol

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = REPO / "protocols" / "validity.yaml"


def _pair(low: float, high: float) -> dict:
    return {"difference": (low + high) / 2, "low": low, "high": high, "beats": low > 0}


def test_the_rule_by_hand():
    candidates = {"a": {"x.w": 0}, "b": {"x.w": 2}, "c": {"x.v": 1}, "d": {"x.u": 1}}
    comparisons = {
        "a": {"k1": _pair(0.1, 0.3), "k2": _pair(0.05, 0.2), "k3": _pair(-0.3, -0.1)},  # 2 better, 1 worse: +1
        "b": {"k1": _pair(0.1, 0.3), "k2": _pair(0.2, 0.4), "k3": _pair(0.1, 0.2), "k4": _pair(-0.1, 0.1)},  # +3
        "c": {"k1": _pair(-0.2, 0.3), "k2": _pair(-0.1, 0.1)},  # nothing beyond the interval: 0
    }  # d: not scored
    decision = decide("x", candidates, comparisons)
    assert decision["chosen"] == "b" and decision["settings"] == {"x.w": 2}
    a, b, c, d = (decision["candidates"][n] for n in "abcd")
    assert (a["better"], a["worse"], a["margin"], a["replaces"]) == (["k1", "k2"], ["k3"], 1, True)
    assert (b["margin"], b["criteria"]) == (3, 4) and b["worse"] == []
    assert (c["margin"], c["replaces"]) == (0, False)
    assert d == {"settings": {"x.u": 1}, "scored": False, "replaces": False}


def test_as_many_worse_as_better_keeps_the_default_and_ties_go_to_the_first_listed():
    even = {"a": {"k1": _pair(0.1, 0.2), "k2": _pair(-0.2, -0.1)}}
    assert decide("x", {"a": {"x.w": 0}}, even)["chosen"] is None
    assert decide("x", {"a": {"x.w": 0}}, even)["settings"] == {}
    tied = {"a": {"k1": _pair(0.1, 0.2)}, "b": {"k2": _pair(0.1, 0.2)}}
    assert decide("x", {"b": {"x.w": 2}, "a": {"x.w": 0}}, tied)["chosen"] == "b"
    assert decide("x", {"a": {"x.w": 0}, "b": {"x.w": 2}}, tied)["chosen"] == "a"
    # an interval with no end (a criterion with one draw) counts as neither
    assert decide("x", {"a": {"x.w": 0}}, {"a": {"k1": {"difference": 1.0, "low": None, "high": None}}})[
        "candidates"]["a"]["margin"] == 0


def _decisions_protocol(tmp_path: Path, decisions: dict) -> Path:
    raw = yaml.safe_load(PROTOCOL.read_text())
    raw["bootstrap"] = 200
    raw["tasks"]["nli"]["generators"] = []
    raw["tasks"]["nli"]["decisions"] = decisions
    path = tmp_path / "validity.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _per_seed(gaps: dict[str, float], n: int = 80):
    """Made-up scores: gold and every 'below' perturbation of the protocol, for two seeds; scorer m's perturbed
    text scores gaps[m] below gold's (plus noise), so a larger gap orders more instances as expected."""
    from larev.validity.evidence import SeedScores

    kinds = [k for k, v in load_protocol(PROTOCOL).perturbations.items() if v == "below"]
    per_seed = {}
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        ids = [f"i{k}" for k in range(n)]
        frames = []
        for scorer, gap in gaps.items():
            gold = rng.normal(size=n)
            frames.append(pl.DataFrame({"metric": scorer, "id": ids, "source": "gold", "score": gold}))
            for kind in kinds:
                frames.append(pl.DataFrame({"metric": scorer, "id": ids, "source": f"perturb_{kind}",
                                            "score": gold - gap + rng.normal(scale=0.5, size=n)}))
        per_seed[seed] = SeedScores(test=pl.concat(frames))
    return per_seed, kinds


def test_evaluate_decides_by_the_paired_criteria_on_the_tune_split_only(tmp_path):
    from larev.validity.evidence import evaluate

    protocol = load_protocol(_decisions_protocol(tmp_path, {"larev": {
        "larev_no_irm": {"larev.objective.lambda_irm": 0},            # orders every perturbation: better
        "control_erm_envs": {"larev.objective.lambda_irm": 0, "larev.objective.lambda_probe": 0},  # as larev
        "larev_no_probe": {"larev.objective.lambda_probe": 0}}}))    # not in this run
    per_seed, kinds = _per_seed({"larev": 0.0, "larev_no_irm": 1.5, "control_erm_envs": 0.0})
    results = evaluate(protocol, "nli", per_seed, {}, decide=True)
    decision = results["decisions"]["larev"]
    assert decision["chosen"] == "larev_no_irm" and decision["settings"] == {"larev.objective.lambda_irm": 0}
    better = decision["candidates"]["larev_no_irm"]["better"]
    assert better == sorted(f"perturb_order/{k}" for k in kinds) and not decision["candidates"]["larev_no_irm"]["worse"]
    assert decision["candidates"]["control_erm_envs"]["margin"] == 0
    assert decision["candidates"]["larev_no_probe"]["scored"] is False
    assert "decisions" not in evaluate(protocol, "nli", per_seed, {}, decide=False)


def test_a_candidate_scored_on_other_seeds_than_its_default_is_not_compared(tmp_path):
    from larev.validity.evidence import SeedScores, evaluate

    protocol = load_protocol(_decisions_protocol(tmp_path, {"larev": {"larev_no_irm": {"larev.objective.lambda_irm": 0}}}))
    per_seed, _ = _per_seed({"larev": 0.0, "larev_no_irm": 1.5})
    one = per_seed[1].test
    per_seed[1] = SeedScores(test=one.filter(one["metric"] != "larev_no_irm"))  # seed 1 lacks the candidate
    decision = evaluate(protocol, "nli", per_seed, {}, decide=True)["decisions"]["larev"]
    assert decision["candidates"]["larev_no_irm"]["scored"] is False and decision["chosen"] is None


def test_a_worse_candidate_does_not_replace_the_default(tmp_path):
    from larev.validity.evidence import evaluate

    protocol = load_protocol(_decisions_protocol(tmp_path, {"larev": {"larev_no_irm": {"larev.objective.lambda_irm": 0}}}))
    per_seed, kinds = _per_seed({"larev": 1.5, "larev_no_irm": 0.0})
    decision = evaluate(protocol, "nli", per_seed, {}, decide=True)["decisions"]["larev"]
    assert decision["chosen"] is None
    assert len(decision["candidates"]["larev_no_irm"]["worse"]) == len(kinds)


def test_the_protocol_checks_its_decisions(tmp_path):
    def refused(decisions: dict, match: str):
        with pytest.raises(ConfigError, match=match):
            load_protocol(_decisions_protocol(tmp_path, decisions))

    refused({"nonesuch": {"rev@x": {"a.b": 1}}}, "not one of scorers.metrics")
    refused({"larev": {}}, "no candidate")
    refused({"larev": {"rev": {"a.b": 1}}}, "neither one of LAREV's ablations or controls")  # another metric
    refused({"larev": {"larev": {"a.b": 1}}}, "neither one of LAREV's")
    refused({"larev": {"larev_thesis": {"a.b": 1}}}, "neither one of LAREV's")  # an ablation the protocol does not run
    refused({"rora": {"larev_no_irm": {"a.b": 1}}}, "candidates for larev only")  # another metric's ablation
    refused({"larev": {"larev@Bad Label": {"a.b": 1}}}, "LABEL of lower-case")
    refused({"larev": {"larev_no_irm": {}}}, "no settings")
    protocol = load_protocol(_decisions_protocol(tmp_path, {"larev_vs_empty": {
        "larev_vs_empty@borrowed-4": {"larev_vs_empty.lambda_borrowed": 4}}}))
    assert protocol.candidate_runs("nli") == {"larev_vs_empty@borrowed-4": ("larev_vs_empty",
                                                                            {"larev_vs_empty.lambda_borrowed": 4})}
    # a candidate run trains on what its metric trains on: its cells on those kinds are not judged
    assert protocol.trained_on_kinds("larev_vs_empty@borrowed-4") == protocol.trained_on["larev_vs_empty"]
    assert protocol.trained_on_kinds("larev_no_irm") == []


def test_an_unknown_setting_in_a_decision_fails_before_any_step(tmp_path):
    from flows.validity import ValidityParams, check_decisions

    path = _decisions_protocol(tmp_path, {"rora": {"rora@typo": {"rora.objective.lambda_irn": 0}}})
    params = ValidityParams(protocol=str(path), out=str(tmp_path / "out"))
    with pytest.raises(ConfigError, match="rora@typo: rora.objective.lambda_irn.*no field 'lambda_irn'"):
        check_decisions(load_protocol(path), params, "6000:8000")
    path = _decisions_protocol(tmp_path, {"rora": {"rora@bad": {"rora.objective.lambda_irm": "many"}}})
    with pytest.raises((ConfigError, ValueError), match="lambda_irm"):
        check_decisions(load_protocol(path), ValidityParams(protocol=str(path), out=str(tmp_path / "out")),
                        "6000:8000")


def test_larevs_candidates_stand_for_the_ablations_they_name():
    """Each LAREV candidate in the protocol is the ablation or control the run scores: the settings it names,
    applied to today's resolved defaults for the protocol's backbone, give that scorer's phi_LA objective."""
    from flows.pipeline import PipelineParams
    from larev.methods.leakage_aware.config import LarevConfig
    from tasks.metric import resolved_params

    protocol = load_protocol(PROTOCOL)
    params = PipelineParams.model_validate({"data": {"source": "files", "task": "nli", "train": "t.parquet", "test": "t.parquet"},
                                            "model": {"backbone": protocol.backbone},
                                            # the weights the candidates were read against (the default then)
                                            "larev": {"objective": {"lambda_irm": 1.0, "lambda_probe": 0.005}}})
    resolved, _ = resolved_params(params, "nli", ("larev",))
    larev = resolved.larev
    objectives = {larev.objective_for(a, "nli") for a in (None, "no_irm", "no_probe", "erm_envs")}
    assert len(objectives) == 4  # four different objectives: the check below can tell them apart
    for name, settings in protocol.tasks["nli"].decisions["larev"].items():
        ablation = name.removeprefix("larev_").removeprefix("control_")
        objective = larev.objective.model_copy(update={k.removeprefix("larev.objective."): v
                                                       for k, v in settings.items()})
        assert LarevConfig(**{**larev.model_dump(), "objective": objective.model_dump()}).objective_for(
            None, "nli") == larev.objective_for(ablation, "nli"), name


def test_the_defaults_follow_the_committed_decisions():
    """Every decision in the committed tune results (docs/validity/nli-tune.json) is what the code gives on the
    protocol's backbone for the task's real data: a chosen candidate's settings are today's resolved defaults, and
    where the default stays, no candidate's settings are all in force. docs/defaults.md cites the run."""
    import json

    from flows.pipeline import PipelineParams
    from tasks.metric import resolved_params

    results = json.loads((REPO / "docs" / "validity" / "nli-tune.json").read_text())
    protocol = load_protocol(PROTOCOL)
    assert set(results["decisions"]) == set(protocol.tasks["nli"].decisions)
    params = PipelineParams.model_validate({"data": {"source": "files", "task": "nli", "train": "t.parquet",
                                                     "test": "t.parquet"}, "model": {"backbone": results["backbone"]}})
    resolved, _ = resolved_params(params, "nli", ("larev", "larev_vs_empty", "rora"))
    tree = resolved.model_dump(mode="json")

    def value(path: str):
        node = tree
        for part in path.split("."):
            node = node[part]
        return node

    defaults = (REPO / "docs" / "defaults.md").read_text()
    for metric, decision in results["decisions"].items():
        assert all(candidate["scored"] for candidate in decision["candidates"].values()), metric
        if decision["chosen"]:  # the chosen settings are in force
            assert {k: value(k) for k in decision["settings"]} == pytest.approx(decision["settings"]), metric
        else:  # the default stays: no candidate's settings are all in force
            for name, candidate in decision["candidates"].items():
                assert {k: value(k) for k in candidate["settings"]} != pytest.approx(candidate["settings"]), name
        section = defaults.split(f"\n## {metric}\n", 1)[1].split("\n## ", 1)[0]  # the metric's section cites it
        assert results["commit"][:7] in section and results["protocol"][:12] in section, metric


def test_the_docs_show_the_committed_decisions():
    """docs/validity.md's decisions are the committed tune results' (docs/validity/nli-tune.json), as
    `decision_lines` writes them."""
    import json

    from larev.validity.report import decision_lines

    results = json.loads((REPO / "docs" / "validity" / "nli-tune.json").read_text())
    lines = decision_lines(results)
    assert lines[0] == "## Defaults decided on this split"
    assert "\n".join(lines[4:]).rstrip() in (REPO / "docs" / "validity.md").read_text()
