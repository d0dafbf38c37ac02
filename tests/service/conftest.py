"""A real Prefect server process (not the test harness), a process worker, and the project deployed on them.

Everything here talks to the server over HTTP as a user's machines would: `larev service setup`, `prefect deploy`,
`prefect worker start`, the scheduler. The server runs on a free loopback port with its own PREFECT_HOME (SQLite),
its scheduler looking every 2 s instead of every 60 s so a short test schedule fires quickly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.isolation import free_port

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOOKS = Path(__file__).resolve().parent / "hooks"


def _up(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class Service:
    """The live server (its API URL and environment) and helpers to run commands against it."""

    def __init__(self, home: Path, api_url: str, env: dict[str, str]):
        self.home, self.api_url, self.env = home, api_url, env
        self.workers: list[subprocess.Popen] = []

    def run(self, *command: str, timeout: float = 300, check: bool = True, env: dict | None = None,
            cwd: Path = REPO) -> subprocess.CompletedProcess:
        done = subprocess.run(list(command), cwd=cwd, env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                                 f"{done.stderr[-3000:]}")
        return done

    def prefect(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run(str(BIN / "prefect"), *args, **kwargs)

    def start_worker(self, pool: str, log: Path, *, limit: int | None = None, name: str | None = None
                     ) -> subprocess.Popen:
        """A process worker of `pool` whose flow runs see LAREV_HOME=the checkout and the test hooks; `limit`: at
        most that many of its flow runs at once."""
        env = {**self.env, "LAREV_HOME": str(REPO), "PYTHONPATH": str(HOOKS),
               "PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_WORKER_PREFETCH_SECONDS": "5"}
        out = log.open("w")
        command = [str(BIN / "prefect"), "worker", "start", "--pool", pool, "--type", "process"]
        command += ["--limit", str(limit)] if limit is not None else []
        command += ["--name", name] if name is not None else []
        worker = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.workers.append(worker)
        return worker

    def client(self):
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, temporary_settings

        class _Scoped:
            def __enter__(inner):
                inner.settings = temporary_settings({PREFECT_API_URL: self.api_url})
                inner.settings.__enter__()
                inner.client = get_client(sync_client=True)
                return inner.client.__enter__()

            def __exit__(inner, *exc):
                inner.client.__exit__(*exc)
                inner.settings.__exit__(*exc)

        return _Scoped()

    def flow_run(self, flow_run_id):
        with self.client() as client:
            return client.read_flow_run(flow_run_id)

    def wait_for(self, flow_run_id, states: set[str], timeout: float, what: str):
        """The flow run once its state name is one of `states`; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        run = None
        while time.monotonic() < deadline:
            run = self.flow_run(flow_run_id)
            if run.state and run.state.name in states:
                return run
            time.sleep(2)
        state = f"{run.state.name}: {run.state.message}" if run and run.state else "no state"
        raise AssertionError(f"{what}: flow run {flow_run_id} not {sorted(states)} after {timeout:.0f} s ({state})")

    def wait_for_worker_log(self, flow_run_id, since, timeout: float, what: str) -> str:
        """The first message the worker (logger `prefect.flow_runs.worker`) logged for the run after `since`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            late = [r for r in self.log_records(flow_run_id)
                    if r.name == "prefect.flow_runs.worker" and r.timestamp > since]
            if late:
                return late[0].message
            time.sleep(1)
        raise AssertionError(f"{what}: the worker logged nothing for flow run {flow_run_id} within {timeout:.0f} s")

    def log_records(self, flow_run_id) -> list:
        """All the run's log records on the server, oldest first (read in pages of 200, the API's limit).

        One page was not enough: a retried run logs every cached task again, which pushed the retry's resume
        message past the first 200 records (seen in CI).
        """
        from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
        from prefect.client.schemas.sorting import LogSort

        records: list = []
        with self.client() as client:
            while True:
                page = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])), limit=200,
                                        offset=len(records), sort=LogSort.TIMESTAMP_ASC)
                records.extend(page)
                if len(page) < 200:
                    return records

    def logs(self, flow_run_id) -> str:
        return "\n".join(r.message for r in self.log_records(flow_run_id))

    def wait_for_log_message(self, flow_run_id, text: str, timeout: float, what: str) -> str:
        """The run's logs once one of its messages contains `text`; fails after `timeout` seconds.

        A run's state can reach the server before its last log records do: the flow's process sends logs in
        batches, and the server persists them in batches of its own. Reading once, right after Completed, found
        the retry's logs cut off after its cached tasks (seen in CI), so this polls.
        """
        deadline = time.monotonic() + timeout
        while True:
            logs = self.logs(flow_run_id)
            if text in logs:
                return logs
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: no log message of flow run {flow_run_id} contains {text!r} within "
                                     f"{timeout:.0f} s; its last messages:\n" + "\n".join(logs.splitlines()[-10:]))
            time.sleep(2)


@pytest.fixture(scope="session")
def live_service(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_API_URL=api_url, PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="2", HF_HUB_OFFLINE="1")
    log = (home / "server.log").open("w")
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    service = Service(home, api_url, env)
    try:
        deadline = time.monotonic() + 120
        while not _up(api_url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the Prefect server did not come up:\n{(home / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield service
    finally:
        import psutil

        for worker in service.workers:  # the worker and the flow runs it started (one may be paused by the hook)
            children = psutil.Process(worker.pid).children(recursive=True) if worker.poll() is None else []
            worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
            for child in children:
                if child.is_running():
                    child.kill()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


# seconds without a heartbeat before the automation marks a run Crashed (heartbeats every 30 s): the product's
# default. At 60 s, one of three runs of this suite on a busy machine saw the healthy retried run killed (-9) after
# about a minute; a heartbeat event the busy SQLite server dropped ('database is locked') is the likely cause.
CRASH_AFTER = 90


@pytest.fixture(scope="session")
def deployed(live_service):
    """Pools and crash detection by `larev service setup`, then the deployments by Prefect's own CLI."""
    setup = live_service.run(str(BIN / "larev"), "service", "setup", "--no-deploy", "--crash-after",
                             str(CRASH_AFTER), "--server", live_service.api_url)
    assert "crash detection" in setup.stdout
    started = time.monotonic()
    deploy = live_service.prefect("--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml",
                                  env={"LAREV_HOME": "/deploy/time/value/must/not/stick"})
    seconds = time.monotonic() - started
    spec = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    return {"spec": spec, "deploy": deploy, "seconds": seconds}


@pytest.fixture(scope="module")
def worker(live_service, deployed, tmp_path_factory) -> Path:
    """A process worker of the larev-cpu pool (one run at a time on 2 cores); its log file."""
    live_service.prefect("work-pool", "set-concurrency-limit", "larev-cpu", "1")
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    process = live_service.start_worker("larev-cpu", log)
    time.sleep(3)
    assert process.poll() is None, log.read_text()
    return log


def params_json(params) -> str:
    return json.dumps({"params": params.model_dump(mode="json")})
