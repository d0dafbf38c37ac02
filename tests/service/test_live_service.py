"""larev run as a service on a real Prefect server, a real process worker and the Prefect CLI (`make test-service`).

In order: `larev service setup` and `prefect deploy --all` create every deployment of deployments/prefect.yaml;
a worker runs the pipeline deployment started by name; a short schedule creates rescore-inbox runs on its own and
the worker scores an inbox file with one; a deployment run whose process is SIGKILLed is marked Crashed and its
retry (the same flow run) resumes from the checkpoint with the uninterrupted run's scores; a plain `larev`-style
run killed the same way is marked Crashed by the missing-heartbeat automation.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from larev.config import TrainConfig
from larev.methods.leakage_aware.config import LarevConfig
from larev.methods.rora.config import RoraConfig
from tests.service.conftest import BIN, CRASH_AFTER, REPO, params_json
from tests.test_flows import tiny_params

pytestmark = pytest.mark.service



def _params(root: Path, name: str = "svc"):
    """A tiny REV-only pipeline with 3 epochs per model: long enough to be killed after the first checkpoint."""
    return tiny_params(root, run_name=name, train=TrainConfig(epochs=3, batch_size=16),
                       larev=LarevConfig(enabled=False), rora=RoraConfig(enabled=False))


def _scores(run_dir: Path) -> pl.DataFrame:
    return (pl.read_parquet(run_dir / "scores.parquet").sort("id", "source", "metric")
            .select("id", "source", "metric", "score", "logp_with", "logp_base"))


def _wait_for_file(path: Path, timeout: float, what: str) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.5)
    raise AssertionError(f"{what}: {path} did not appear within {timeout:.0f} s")


def test_deploy_all_creates_every_deployment(live_service, deployed):
    assert deployed["deploy"].returncode == 0
    with live_service.client() as client:
        deployments = client.read_deployments()
    names = {f"{d.name}" for d in deployments}
    assert names == {d["name"] for d in deployed["spec"]["deployments"]}
    # the pull step reads LAREV_HOME on the worker at run time: nothing was filled in at deploy time
    assert all(d.pull_steps == [{"flows.service.enter_larev_home": {}}] for d in deployments)
    assert "/deploy/time/value" not in json.dumps([d.model_dump(mode="json") for d in deployments])
    # the commands that failed with HTTP 422 under fastapi >= 0.151 work
    assert "larev-cpu" in live_service.prefect("work-pool", "ls").stdout
    assert "rescore-inbox" in live_service.prefect("deployment", "ls").stdout
    print(f"prefect deploy --all: {deployed['seconds']:.1f} s")


@pytest.fixture(scope="module")
def reference_run(live_service, worker, tmp_path_factory):
    """The pipeline deployment started by name (`prefect deployment run`) and run by the worker."""
    root = tmp_path_factory.mktemp("reference")
    params = _params(root)
    started = time.monotonic()
    done = live_service.prefect("deployment", "run", "larev-pipeline/larev-pipeline", "--params", params_json(params))
    flow_run_id = re.search(r"UUID: ([0-9a-f-]{36})", done.stdout).group(1)
    run = live_service.wait_for(flow_run_id, {"Completed"}, 400, "the pipeline deployment run")
    return {"root": root, "params": params, "flow_run": run, "seconds": time.monotonic() - started,
            "run_dir": Path(params.run_dir) / params.run_name}


def test_a_worker_runs_the_pipeline_deployment_started_by_name(reference_run, live_service):
    scores = _scores(reference_run["run_dir"])
    assert scores.height == 7 * 12 and scores["metric"].unique().to_list() == ["rev"]
    assert reference_run["flow_run"].deployment_id is not None
    print(f"pipeline deployment run: {reference_run['seconds']:.1f} s")


def test_a_short_schedule_fires_and_the_worker_scores_the_inbox(live_service, reference_run, tmp_path):
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId, FlowRunFilter
    from prefect.client.schemas.schedules import IntervalSchedule

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    ids = _scores(reference_run["run_dir"])["id"].unique().sort().to_list()[:5]
    pl.DataFrame({"id": ids, "source": "model-x", "rationale": "model x explains it"}).write_ndjson(
        inbox / "model-x.jsonl")
    # a generator's output as lm-evaluation-harness logs it, with a reasoning trace the inbox strips
    log = [{"doc_id": n, "doc": {"id": i}, "resps": [[f"<think>step {n}</think> a generated reason {n}"]],
            "filtered_resps": ["x"], "target": ""} for n, i in enumerate(ids[:4])]
    (inbox / "samples_gen-y_2026-11-28T10-00-00.jsonl").write_text("\n".join(json.dumps(r) for r in log) + "\n")
    # a file `larev generate` wrote for the run (its two rule-based known defects: no training), dropped as it is
    live_service.run(str(BIN / "larev"), "generate", "--run", str(reference_run["run_dir"]), "--generators",
                     "label-only,hypothesis-copy", "--out", str(inbox / "generated.jsonl"), "--no-progress",
                     "--server", live_service.api_url)
    with live_service.client() as client:
        deployment = client.read_deployment_by_name("rescore-inbox/rescore-inbox")
        started = time.monotonic()
        client.create_deployment_schedules(deployment.id, [DeploymentScheduleCreate(
            schedule=IntervalSchedule(interval=timedelta(seconds=15)), active=True, max_scheduled_runs=2,
            parameters={"params": {"run": str(reference_run["run_dir"]), "inbox": str(inbox),
                                   "settle_seconds": 0}})])
    deadline, completed = time.monotonic() + 400, None
    while time.monotonic() < deadline and completed is None:
        with live_service.client() as client:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(),
                                         deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])))
        completed = next((r for r in runs if r.auto_scheduled and r.state and r.state.name == "Completed"), None)
        failed = [r for r in runs if r.state and r.state.is_final() and not r.state.is_completed()]
        assert not failed, f"a scheduled rescore run ended {failed[0].state.name}: {failed[0].state.message}"
        time.sleep(3)
    with live_service.client() as client:  # stop the test schedule (the hourly one stays)
        for schedule in client.read_deployment_schedules(deployment.id):
            if schedule.schedule.model_dump().get("interval") is not None:
                client.delete_deployment_schedule(deployment.id, schedule.id)
    assert completed is not None, "no scheduled rescore-inbox run completed"
    seconds = time.monotonic() - started
    scored = sorted(p.name for p in reference_run["run_dir"].iterdir() if p.name.startswith("inbox-model-x"))
    assert scored, "the scheduled run wrote no scores for the inbox file"
    summary = pl.read_parquet(reference_run["run_dir"] / scored[0] / "summary.parquet")
    assert summary["source"].to_list() == ["model-x"] and summary["n"].to_list() == [5]
    deadline = time.monotonic() + 120  # the generated log may land in the next scheduled run
    while time.monotonic() < deadline:
        board = pl.read_parquet(reference_run["run_dir"] / "leaderboard.parquet")
        if {"gen-y", "label-only", "hypothesis-copy"} <= set(board["source"].to_list()):
            break
        time.sleep(3)
    generated = board.filter(pl.col("source") == "gen-y")
    assert generated.height == 1 and generated["n"].to_list() == [4], "the generated log is not on the leaderboard"
    gold = board.filter(pl.col("source") == "gold")["signature"].to_list()
    assert generated["signature"].to_list() == gold and gold[0].startswith("metric:rev.v1|")
    assert "model-x" in board["source"].to_list()
    test_rows = _scores(reference_run["run_dir"])["id"].n_unique()
    for source in ("label-only", "hypothesis-copy"):  # ranked under the generator's name and gold's signature
        entry = board.filter(pl.col("source") == source)
        assert entry["signature"].to_list() == gold, source
    inbox_runs = [p for p in reference_run["run_dir"].iterdir() if p.name.startswith("inbox-generated")]
    summary = pl.concat([pl.read_parquet(p / "summary.parquet") for p in inbox_runs])
    assert sorted(summary["source"].unique().to_list()) == ["hypothesis-copy", "label-only"]
    assert summary.group_by("source").agg(pl.col("n").max())["n"].to_list() == [test_rows, test_rows]  # every row
    print(f"schedule created -> scheduled run completed: {seconds:.1f} s")


def test_a_killed_deployment_run_is_crashed_and_its_retry_resumes(live_service, reference_run, tmp_path):
    params = _params(tmp_path)
    marker = tmp_path / "paused.txt"
    with live_service.client() as client:
        deployment = client.read_deployment_by_name("larev-pipeline/larev-pipeline")
        flow_run = client.create_flow_run_from_deployment(
            deployment.id, parameters=json.loads(params_json(params)),
            job_variables={"env": {"LAREV_TEST_PAUSE_MARKER": str(marker)}})
    pid, label, epoch = _wait_for_file(marker, 400, "the first checkpoint of the run").split()
    assert (label, epoch) == ("phi_base", "1")
    os.kill(int(pid), signal.SIGKILL)
    started = time.monotonic()
    crashed = live_service.wait_for(flow_run.id, {"Crashed"}, CRASH_AFTER + 120, "the killed run")
    print(f"SIGKILL -> Crashed: {time.monotonic() - started:.1f} s ({crashed.state.message})")
    # The run's process runner reports the crash first; the worker proposes Crashed again once it has reaped the
    # process, then logs its advice. A retry in between is crashed by that late report (seen in CI): wait for it.
    live_service.wait_for_worker_log(flow_run.id, crashed.state.timestamp, 120, "the worker's crash report")
    live_service.prefect("flow-run", "retry", str(flow_run.id))
    resumed = live_service.wait_for(flow_run.id, {"Completed"}, 400, "the retried run")
    assert resumed.run_count >= 2  # the same flow run, run again
    live_service.wait_for_log_message(flow_run.id, "phi_base: resuming from the checkpoint after epoch 1 of 3", 60,
                                      "the retried run")
    run_dir = Path(params.run_dir) / params.run_name
    assert _scores(run_dir).equals(_scores(reference_run["run_dir"]))


def test_a_killed_local_run_is_marked_crashed_by_its_missing_heartbeats(live_service, deployed, tmp_path):
    """A run started from the command line has no worker watching it: only its heartbeats can tell."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    params = _params(tmp_path, name="local-kill")
    params_file, marker = tmp_path / "params.json", tmp_path / "saved.txt"
    params_file.write_text(params.model_dump_json())
    env = {**live_service.env, "PYTHONPATH": str(REPO), "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30"}
    child = subprocess.Popen([sys.executable, "-m", "tests.sigkill_child", str(params_file), str(marker)],
                             cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_file(marker, 300, "the first checkpoint of the local run")
        time.sleep(2)  # the first heartbeat has gone out
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    with live_service.client() as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=["larev-local-kill"])))
    assert len(runs) == 1 and runs[0].state.name == "Running"
    started = time.monotonic()
    crashed = live_service.wait_for(runs[0].id, {"Crashed"}, CRASH_AFTER + 120, "the killed local run")
    assert "no heartbeat" in crashed.state.message
    print(f"SIGKILL -> Crashed by missing heartbeats: {time.monotonic() - started:.1f} s")


def test_a_stale_server_pid_file_does_not_keep_the_local_server_down(tmp_path, monkeypatch):
    """A server.pid naming a server that died does not keep larev's local server down (it is cleared, instead of
    waiting 90 s and falling back to a temporary server); the server gets the crash-detection automation, and
    its output goes to a log file, not to a pipe of the process that started it (Prefect's `--background`
    did that, and the server died of a broken pipe at its first logged error once that process had exited)."""
    from flows.server import start_local_server
    from tests.isolation import free_port
    from tests.service.conftest import _up

    home = tmp_path / "prefect-home"
    home.mkdir()
    (home / "server.pid").write_text("999999")  # no such process
    monkeypatch.setenv("PREFECT_HOME", str(home))
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    port = free_port()
    try:
        api_url = start_local_server(port=port, wait_s=60)  # None if it never came up
        assert api_url == f"http://127.0.0.1:{port}/api" and _up(api_url)
        # the crash-detection automation went to this server, not to a temporary one of the client's own
        from prefect.automations import Automation
        from prefect.settings import PREFECT_API_URL, temporary_settings

        from flows.service import CRASH_AUTOMATION
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            assert Automation.read(name=CRASH_AUTOMATION).name == CRASH_AUTOMATION
        pid = int((home / "server.pid").read_text())
        assert os.readlink(f"/proc/{pid}/fd/1") == str(home / "larev-server.log")
        assert os.getsid(pid) == pid  # a session of its own: the CLI's Ctrl-C or exit does not reach it
    finally:
        subprocess.run([str(BIN / "prefect"), "server", "stop"], env={**os.environ, "PREFECT_HOME": str(home)},
                       capture_output=True, timeout=60)
