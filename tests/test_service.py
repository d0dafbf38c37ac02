"""Running larev as a service: the deployment file, GPU-pool routing, scheduled inbox re-evaluation, and a full
pipeline on a loopback S3 server with a fully cached rerun."""

from __future__ import annotations

import importlib
import json
import logging
import re
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
import yaml
from prefect.states import Failed

from flows.cli import main
from flows.pipeline import larev_pipeline
from flows.rescore import RescoreParams, rescore_inbox
from flows.step import StepParams, larev_step
from larev.config import TrainConfig
from larev.errors import LarevError
from larev.methods.leakage_aware.config import LarevConfig
from larev.methods.rora.config import RoraConfig
from storage import ArtifactStore
from tasks.runtime import remote
from tasks.runtime.runner import StepError, StepRunner
from tasks.inbox import ledger_key
from tasks.rev import train_model
from tests.test_flows import ALL_STEPS, METRICS, tiny_params

pytestmark = pytest.mark.usefixtures("prefect_harness")
REPO = Path(__file__).resolve().parents[1]
GPU_STEPS = ["train-phi_base", "train-phi", "leakage-terms", "probe", "train-larev", "train-theta",
             "infiller-gold", "counterfactuals-gold", "train-rora-gold",
             *(f"train-proxy-{source}" for source in ("gold", "leaky", "gold_leaky", "vacuous"))]


def _descriptions(node) -> list[str]:
    if isinstance(node, dict):
        found = [node["description"]] if isinstance(node.get("description"), str) else []
        return found + [d for v in node.values() for d in _descriptions(v)]
    if isinstance(node, list):
        return [d for v in node for d in _descriptions(v)]
    return []


def test_prefect_yaml_entrypoints_import_and_build_parameter_schemas():
    from prefect.utilities.callables import parameter_schema

    spec = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    pools = {pool["name"] for pool in spec["definitions"]["work_pools"].values()}
    assert {"larev-cpu", "larev-gpu", "larev-gpu-docker"} <= pools
    docker_gpu = spec["definitions"]["work_pools"]["gpu_docker"]["job_variables"]
    assert docker_gpu["container_create_kwargs"]["device_requests"][0]["capabilities"] == [["gpu"]]
    names = set()
    for deployment in spec["deployments"]:
        names.add(deployment["name"])
        assert deployment["work_pool"]["name"] in pools
        path, func = deployment["entrypoint"].split(":")
        flow_obj = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), func)
        schema = parameter_schema(flow_obj.fn).model_dump()
        assert list(schema["properties"]) == ["params"]
        model = schema["definitions"][schema["properties"]["params"]["$ref"].rsplit("/", 1)[-1]]
        undocumented = [k for k, v in model["properties"].items() if "description" not in v and "$ref" not in v
                        and "allOf" not in v]
        assert not undocumented, f"{deployment['name']}: parameters without a description: {undocumented}"
        # the UI renders descriptions as Markdown and drops anything tag-like ('<run_dir>/<run_name>' showed as '/')
        tagged = [d for d in _descriptions(schema) if re.search(r"<[^>\s]*>", d)]
        assert not tagged, f"{deployment['name']}: descriptions the UI would cut: {tagged}"
        for schedule in deployment.get("schedules", []):
            from prefect.client.schemas.schedules import CronSchedule

            CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])
        if "parameters" in deployment:  # preset parameters validate against the flow's model
            flow_obj.validate_parameters(deployment["parameters"])
    assert names == {"larev-pipeline", "larev-step-gpu", "larev-step-gpu-docker", "score-rationales",
                     "compare-sources", "stress-test", "rescore-inbox", "generate-rationales", "quality-benchmark",
                     "validity-benchmark", "benchmark-seed"}
    assert [d for d in spec["deployments"] if d["name"] == "rescore-inbox"][0]["schedules"][0]["cron"]


def test_step_arguments_round_trip_and_unknown_tasks_are_refused():
    from larev.config import ModelConfig
    from storage.ref import ArtifactRef

    ref = ArtifactRef(uri="/x/a", key="a", digest="d" * 64)
    args = {"store": ArtifactStore("/tmp/larev-store"), "role": "phi", "examples": ref, "baselines": ref,
            "tokenizer": None, "model": ModelConfig(d_model=16), "train": TrainConfig(epochs=1), "progress": False}
    payload = json.loads(json.dumps(remote.encode_arguments(train_model, args)))
    assert payload["store"] == "/tmp/larev-store" and payload["model"]["d_model"] == 16
    back = remote.decode_arguments(train_model, payload)
    assert back["store"].root == "/tmp/larev-store" and back["examples"] == ref and back["train"].epochs == 1
    assert remote.task_ref(train_model) == "tasks.rev:train_model"
    assert remote.resolve_task("tasks.rev:train_model") is train_model
    for bad in ("os:system", "tasks.training:load_tokenizer", "tasks.rev:nope", "tasks.nowhere:step",
                "tasks.rev.os:system"):
        with pytest.raises(Exception, match="not a larev task|unknown larev step"):
            remote.resolve_task(bad)
    with pytest.raises(Exception, match="no argument"):
        remote.decode_arguments(train_model, {**payload, "extra": 1})


def test_gpu_stages_run_on_the_gpu_deployment_and_are_then_cached_locally(tmp_path, monkeypatch):
    sent = []

    def fake_run_deployment(name, parameters):  # a worker of the GPU pool, in this process
        sent.append((name, parameters["params"]["label"]))
        state = larev_step(StepParams(**json.loads(json.dumps(parameters))["params"]), return_state=True)
        return SimpleNamespace(id="fake-flow-run", state=state)

    monkeypatch.setattr(remote, "run_deployment", fake_run_deployment)
    params = tiny_params(tmp_path, gpu_deployment="larev-step/larev-step-gpu")
    result = larev_pipeline(params)
    assert sorted(label for _, label in sent) == sorted(GPU_STEPS)
    assert {name for name, _ in sent} == {"larev-step/larev-step-gpu"}
    records = {r.step: r for r in result["steps"]}
    assert [r.step for r in result["steps"]] == ALL_STEPS
    assert all(records[s].where == "larev-step/larev-step-gpu" and not records[s].cached for s in GPU_STEPS)
    assert all(r.where == "local" for s, r in records.items() if s not in GPU_STEPS)
    scores = pl.read_parquet(Path(result["run_dir"]) / "scores.parquet")
    assert sorted(scores["metric"].unique()) == METRICS

    sent.clear()  # a rerun finds every step in the cache and sends nothing
    again = larev_pipeline(params)
    assert sent == [] and all(r.cached for r in again["steps"])

    def failing_run_deployment(name, parameters):
        return SimpleNamespace(id="failed-run", state=Failed(message="CUDA out of memory"))

    monkeypatch.setattr(remote, "run_deployment", failing_run_deployment)
    refs = result["refs"]
    runner = StepRunner(ArtifactStore(params.artifact_root), gpu_deployment="larev-step/larev-step-gpu")
    with pytest.raises(StepError, match="train-phi failed on deployment larev-step/larev-step-gpu.*CUDA out of memory"):
        runner.run(train_model, runner.store, "phi", refs["examples"], refs["baselines"], refs["tokenizer"],
                   params.model, TrainConfig(epochs=1, batch_size=8, seed=1), step_label="train-phi")


# ------------------------------------------------------------------------------------- scheduled rescoring


@pytest.fixture(scope="module")
def rev_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("rescore")
    result = larev_pipeline(tiny_params(root, larev=LarevConfig(enabled=False), rora=RoraConfig(enabled=False)))
    return root, result


def _rationales(run_dir: str, source: str, n: int = 6) -> pl.DataFrame:
    ids = pl.read_parquet(Path(run_dir) / "scores.parquet")["id"].unique().sort().to_list()[:n]
    return pl.DataFrame({"id": ids, "source": [source] * len(ids),
                         "rationale": [f"{source} says something about it" for _ in ids]})


def test_scheduled_rescoring_scores_each_file_once_and_quarantines_bad_ones(rev_run, tmp_path, monkeypatch,
                                                                             capsys, caplog):
    root, result = rev_run
    run_dir = result["run_dir"]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    import flows.rescore as rescore_module

    calls = []
    real_score = rescore_module.score_rationales

    def counting_score(params):
        calls.append(Path(params.rationales).name)
        return real_score(params)

    monkeypatch.setattr(rescore_module, "score_rationales", counting_score)
    params = RescoreParams(run=run_dir, inbox=str(inbox), settle_seconds=0)
    _rationales(run_dir, "model-a").write_parquet(inbox / "model-a.parquet")
    first = rescore_inbox(params)
    assert first["scored"] == ["model-a.parquet"] and first["quarantined"] == []

    # between the scans: one more good file, and one that breaks the contract (an id the run never saw)
    _rationales(run_dir, "model-b").write_ndjson(inbox / "model-b.jsonl")
    bad = _rationales(run_dir, "model-c").with_columns(id=pl.format("no-such-id-{}", pl.int_range(pl.len())))
    bad.write_csv(inbox / "model-c.csv")
    with caplog.at_level(logging.INFO):
        second = rescore_inbox(params)
    assert second["scored"] == ["model-b.jsonl"] and second["quarantined"] == ["model-c.csv"]
    # nothing scored twice, and the bad file is set aside before any scoring run starts: an expected outcome,
    # reported in one line without a failed run or a traceback
    assert calls == ["model-a.parquet", "model-b.jsonl"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert f"quarantined {inbox / 'model-c.csv'} -> " in caplog.text

    # a third scan, from the command line: nothing new
    assert main(["rescore", "--run", run_dir, "--inbox", str(inbox), "--settle-seconds", "0"]) == 0
    printed = capsys.readouterr().out
    assert "Scored: nothing new; quarantined: none" in printed and len(calls) == 2
    store = ArtifactStore(json.loads((Path(run_dir) / "run.json").read_text())["artifact_root"])
    assert f"Results table of this inbox: {store.root}/inbox/" in printed

    assert not (inbox / "model-c.csv").exists() and (inbox / "quarantine" / "model-c.csv").exists()
    error = (inbox / "quarantine" / "model-c.csv.error.txt").read_text()
    assert "no-such-id" in error and f"{inbox / 'model-c.csv'}: row 0, column 'id'" in error  # the inbox file,
    assert "/tmp/tmp" not in error  # not the scan's temporary copy
    ledger = store.read_parquet(ledger_key(str(inbox), "ledger"))
    assert sorted(zip(ledger["file"], ledger["status"])) == [("model-a.parquet", "scored"),
                                                            ("model-b.jsonl", "scored"),
                                                            ("model-c.csv", "quarantined")]
    results = store.read_parquet(ledger_key(str(inbox), "results"))
    assert sorted(results["source"].unique()) == ["model-a", "model-b"]
    assert results.group_by("file").agg(pl.len())["len"].to_list() == [1, 1]  # REV only: one row per file
    assert (Path(run_dir) / ledger["output"][0]).exists() or Path(ledger["output"][0]).exists()


def test_a_scoring_run_that_fails_leaves_the_file_for_the_next_scan(rev_run, tmp_path, monkeypatch):
    """A scoring subflow that ends Failed (its own input check, say, after the run directory changed) is not the
    file's fault: the file is not quarantined nor recorded, the scan says it will retry, and the next scan does."""
    from prefect.exceptions import FailedRun

    import flows.rescore as rescore_module

    _, result = rev_run
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    _rationales(result["run_dir"], "model-x").write_parquet(inbox / "model-x.parquet")
    real_score = rescore_module.score_rationales

    def failed_run(params):
        raise FailedRun("the run directory changed under the scan")

    monkeypatch.setattr(rescore_module, "score_rationales", failed_run)
    params = RescoreParams(run=result["run_dir"], inbox=str(inbox), settle_seconds=0)
    with pytest.raises(LarevError, match="model-x.parquet: FailedRun: the run directory changed under the scan"):
        rescore_inbox(params)
    assert (inbox / "model-x.parquet").exists() and not (inbox / "quarantine").exists()

    monkeypatch.setattr(rescore_module, "score_rationales", real_score)
    assert rescore_inbox(params)["scored"] == ["model-x.parquet"]


# --------------------------------------------------------------------------------------------------- S3


def test_pipeline_on_s3_then_a_fully_cached_rerun(s3_server, tmp_path, monkeypatch):
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    bucket = s3_server.new_bucket()
    params = tiny_params(tmp_path).model_copy(update={"artifact_root": f"s3://{bucket}/larev"})
    cold = larev_pipeline(params)
    assert [s.step for s in cold["steps"] if not s.cached] == ALL_STEPS
    warm = larev_pipeline(params)
    assert [s.step for s in warm["steps"] if not s.cached] == []
    keys = [o["Key"] for page in s3_server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    steps = {k.split("/")[1] for k in keys if k.startswith("larev/")}
    assert {"examples", "train", "train-la", "train-rora", "report", "_prefect"} <= steps
    assert any(k.endswith("/report/" + k.split("/report/")[-1]) and k.endswith("scores.parquet") for k in keys)
    assert not [k for k in keys if "/checkpoints/" in k]  # deleted once each model was stored
    run_json = json.loads((Path(cold["run_dir"]) / "run.json").read_text())
    assert run_json["artifact_root"] == f"s3://{bucket}/larev"
    assert all(ref["uri"].startswith(f"s3://{bucket}/larev/") for ref in run_json["artifacts"].values())


# ----------------------------------------------------------------------------------------- relocatable projects


def test_a_copied_project_scores_with_its_own_store_and_keeps_its_cache(tmp_path, monkeypatch):
    import shutil

    from flows.score import ScoreParams, score_rationales

    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    params = tiny_params(Path("."), larev=LarevConfig(enabled=False), rora=RoraConfig(enabled=False)).model_copy(
        update={"artifact_root": ".larev/store", "run_dir": "runs"})
    larev_pipeline(params)
    record = json.loads((project / "runs" / "tiny" / "run.json").read_text())
    assert record["artifact_root"] == "../../.larev/store"  # relative to the run directory, inside the project

    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    project.rename(tmp_path / "gone")  # nothing may still point at the original folder
    monkeypatch.chdir(copy)
    again = larev_pipeline(params)  # the moved store serves every step from its cache
    assert [s.step for s in again["steps"] if not s.cached] == []
    assert all(ref.uri.startswith(str(copy)) for ref in again["refs"].values())
    _rationales("runs/tiny", "model-z").write_parquet(copy / "mine.parquet")
    scored = score_rationales(ScoreParams(run="runs/tiny", rationales="mine.parquet", name="mine", progress=False))
    assert [s.step for s in scored["steps"] if not s.cached] == ["rationales", "score-rev", "report"]
    summary = pl.read_parquet(copy / "runs" / "tiny" / "mine" / "summary.parquet")
    assert summary["source"].to_list() == ["model-z"]
    new_steps = {key.split("/")[0] for key in ArtifactStore(str(copy / ".larev" / "store")).ls()}
    assert {"rationales", "score"} <= new_steps  # the copy's own store got the new artifacts
    assert not (tmp_path / "project").exists()


def test_a_run_whose_store_is_missing_fails_with_both_paths(tmp_path):
    from larev.errors import ConfigError
    from tasks.export import read_run

    run_dir = tmp_path / "runs" / "x"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"artifact_root": "../../.larev/store", "params": {},
                                                  "artifacts": {}}))
    with pytest.raises(ConfigError, match=r"'../../.larev/store', which resolves to .*\.larev/store: no such folder"):
        read_run(run_dir)


# ------------------------------------------------------------------------------- service set-up, by hand


def test_the_pull_step_enters_larev_home_as_the_worker_has_it(tmp_path, monkeypatch):
    from flows.service import enter_larev_home
    from larev.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAREV_HOME", str(REPO))
    assert enter_larev_home() == {"directory": str(REPO)} and Path.cwd() == REPO
    monkeypatch.setenv("LAREV_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match=f"LAREV_HOME={tmp_path} is not a larev project"):
        enter_larev_home()
    monkeypatch.delenv("LAREV_HOME")
    assert enter_larev_home()["directory"] == str(REPO)  # unset: the checkout larev runs from


@pytest.mark.parametrize("module, model, required", [
    ("flows.score", "ScoreParams", {"run": "r", "rationales": "f.jsonl"}),
    ("flows.rescore", "RescoreParams", {"run": "r", "inbox": "inbox"}),
    ("flows.stress", "StressParams", {"run": "r"}),
])
def test_device_is_one_of_auto_cpu_cuda_in_every_flow(module, model, required):
    from pydantic import ValidationError

    params = getattr(importlib.import_module(module), model)
    assert params(**required, device="cuda").device == "cuda"
    with pytest.raises(ValidationError, match="device"):
        params(**required, device="tpu")


def test_crash_detection_waits_for_missed_heartbeats():
    from flows.service import HEARTBEAT_SECONDS, crash_automation
    from larev.errors import ConfigError

    automation = crash_automation(90)
    trigger = automation.trigger
    assert trigger.after == {"prefect.flow-run.heartbeat"} and "prefect.flow-run.Completed" in trigger.expect
    assert trigger.within.total_seconds() == 90 and automation.actions[0].state.value == "CRASHED"
    with pytest.raises(ConfigError, match="would mark healthy runs crashed"):
        crash_automation(HEARTBEAT_SECONDS + 5)
