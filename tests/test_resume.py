"""A pipeline killed with SIGKILL in the middle of training resumes from its last checkpoint on rerun, and its
scores equal an uninterrupted run's with the same seed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from prefect.settings import PREFECT_API_URL

from flows.pipeline import larev_pipeline
from larev.config import TrainConfig
from larev.methods.leakage_aware.config import LarevConfig
from larev.methods.rora.config import RoraConfig
from storage import ArtifactStore
from tests.test_flows import tiny_params

pytestmark = pytest.mark.usefixtures("prefect_harness")
REPO = Path(__file__).resolve().parents[1]


def _params(root: Path):
    return tiny_params(root, train=TrainConfig(epochs=3, batch_size=16), larev=LarevConfig(enabled=False),
                       rora=RoraConfig(enabled=False))


def _scores(result) -> pl.DataFrame:
    return pl.read_parquet(Path(result["run_dir"]) / "scores.parquet").sort("id", "source", "metric")


def _checkpoint_keys(store: ArtifactStore) -> list[str]:
    return [key for step in store.ls() for fp in store.ls(step) for key in store.ls(fp) if key.endswith("checkpoints")]


def test_sigkill_mid_training_resumes_from_the_last_checkpoint(tmp_path, caplog):
    straight = _scores(larev_pipeline(_params(tmp_path / "straight")))

    params = _params(tmp_path / "killed")
    params_file = tmp_path / "params.json"
    params_file.write_text(params.model_dump_json())
    marker, child_log = tmp_path / "saved.txt", tmp_path / "child.log"
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": str(REPO)}
    with child_log.open("w") as log_out:
        child = subprocess.Popen([sys.executable, "-m", "tests.sigkill_child", str(params_file), str(marker)],
                                 cwd=REPO, env=env, stdout=log_out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if not marker.exists():
            tail = "".join(child_log.read_text(errors="replace").splitlines(keepends=True)[-30:])
            state = "exited with " + str(child.returncode) if child.poll() is not None else "still running"
            pytest.fail(f"the child never checkpointed ({state}); its last output:\n{tail}")
        assert marker.read_text().splitlines() == ["phi_base epoch 1"]
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=60)

    store = ArtifactStore(params.artifact_root)
    assert _checkpoint_keys(store), "the killed run left no checkpoint behind"
    with caplog.at_level(logging.INFO, logger="larev"):
        resumed = larev_pipeline(params)
    assert "phi_base: resuming from the checkpoint after epoch 1 of 3" in caplog.text
    ran = [s.step for s in resumed["steps"] if not s.cached]
    assert "train-phi_base" in ran and "examples" not in ran  # finished steps came from the cache
    assert _checkpoint_keys(store) == []  # the checkpoints, and their emptied folder, are gone
    again = _scores(resumed)
    assert again.height == straight.height > 0
    assert again.select("id", "source", "metric", "score", "logp_with", "logp_base").equals(
        straight.select("id", "source", "metric", "score", "logp_with", "logp_base"))
