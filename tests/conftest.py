"""Shared fixtures: one Prefect test harness per session, a loopback S3 server, tiny configs; and the session's
isolation: its own PREFECT_HOME and server port, nothing left running (tests/isolation.py)."""

from __future__ import annotations

import os

from tests import isolation

SESSION = isolation.begin()  # before anything imports Prefect

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.s3server import s3_server  # noqa: E402, F401  (module-scoped loopback S3 fixture)

torch.set_num_threads(2)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def prefect_harness():
    """A temporary Prefect API (SQLite, a free port) for every flow test of the session. PREFECT_API_URL names it
    while it runs, so a `larev` command a test calls (in this process or a child) talks to it instead of starting
    a server of its own."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        before = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = PREFECT_API_URL.value()
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = before


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """Fail the suite when it left something behind (after the session fixtures' teardown), and clean it up."""
    isolation.stop_prefect_servers()
    problems = isolation.leftovers(SESSION)
    isolation.remove_homes(SESSION)
    if not problems:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["the test session left things behind:", *(f"  - {p}" for p in problems)]
    if reporter is not None:
        reporter.write_sep("=", "isolation check failed", red=True)
        for line in lines:
            reporter.write_line(line)
    isolation.stop(isolation.leftover_processes(SESSION))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory, prefect_harness):
    """(root, result) of one tiny demo pipeline run with every metric, shared by the tests that only read it
    (sharded scoring, FTC and AddText); tests that rerun it with other options use their own."""
    from flows.pipeline import larev_pipeline
    from tests.test_flows import tiny_params

    root = tmp_path_factory.mktemp("tiny-run")
    return root, larev_pipeline(tiny_params(root))
