"""Shared fixtures: one Prefect test harness per session, a loopback S3 server, tiny configs."""

from __future__ import annotations

import os

import pytest
import torch

from tests.s3server import s3_server  # noqa: F401  (module-scoped loopback S3 fixture)

torch.set_num_threads(2)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def prefect_harness():
    """A temporary Prefect API (SQLite) for every flow test of the session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory, prefect_harness):
    """(root, result) of one tiny demo pipeline run with every metric, shared by the tests that only read it
    (sharded scoring, FTC and AddText); tests that rerun it with other options use their own."""
    from flows.pipeline import larev_pipeline
    from tests.test_flows import tiny_params

    root = tmp_path_factory.mktemp("tiny-run")
    return root, larev_pipeline(tiny_params(root))
