"""A benchmark's seeds on a work pool: `larev bench quality --seeds 2 --seed-deployment benchmark-seed/benchmark-seed`
against the live server, with two process workers of the larev-bench pool (one flow run each). The two seeds run as
two flow runs of the per-seed flow on the two workers, at the same time, and the benchmark's results equal those of
the same benchmark run in one process."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from larev.config import TrainConfig
from larev.methods.leakage_aware.config import LarevConfig
from larev.methods.rora.config import RoraConfig
from tests.service.conftest import BIN, params_json
from tests.test_flows import tiny_params

pytestmark = pytest.mark.service

SEED_DEPLOYMENT = "benchmark-seed/benchmark-seed"


def _bench(live_service, root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    params = tiny_params(root, run_name="two-workers", train=TrainConfig(epochs=2, batch_size=16),
                         larev=LarevConfig(enabled=False), rora=RoraConfig(enabled=False))
    root.mkdir(parents=True, exist_ok=True)
    params_file = root / "params.json"
    params_file.write_text(json.dumps(json.loads(params_json(params))["params"]))
    return live_service.run(str(BIN / "larev"), "bench", "quality", "--params", str(params_file), "--seeds", "2",
                            "--out", str(out), "--bootstrap", "10", "--no-stress", "--no-progress",
                            "--server", live_service.api_url, *extra, timeout=900)


def test_two_workers_run_the_two_seeds_at_once_and_give_the_one_process_results(live_service, deployed,
                                                                                tmp_path):
    logs = [tmp_path / f"bench-worker-{k}.log" for k in (1, 2)]
    workers = [live_service.start_worker("larev-bench", log, limit=1, name=f"bench-worker-{k}")
               for k, log in enumerate(logs, 1)]
    time.sleep(3)
    assert all(w.poll() is None for w in workers), [log.read_text() for log in logs]
    pooled = tmp_path / "pooled"
    started = time.monotonic()
    done = _bench(live_service, pooled, pooled / "out", "--seed-deployment", SEED_DEPLOYMENT)
    pooled_seconds = time.monotonic() - started
    assert "over 2 seeds" in done.stdout

    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    with live_service.client() as client:
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
            name=DeploymentFilterName(any_=["benchmark-seed"])), limit=20)
    runs = [r for r in runs if r.name.startswith("bench-quality-two-workers-seed")]
    assert sorted(r.name for r in runs) == ["bench-quality-two-workers-seed0", "bench-quality-two-workers-seed1"]
    assert all(r.state.name == "Completed" for r in runs)
    first, second = sorted(runs, key=lambda r: r.start_time)
    assert second.start_time < first.end_time  # at the same time, not one after the other
    # one flow run on each worker. Both workers may try to submit a run (the one that loses is aborted by the server
    # and logs the run's id), so count only what the run's own process prints through the worker that started it.
    picked = [[r.name for r in runs if f"Flow run '{r.name}' - Finished in state Completed()" in log.read_text()]
              for log in logs]
    assert sorted(len(p) for p in picked) == [1, 1], picked

    alone = tmp_path / "alone"
    started = time.monotonic()
    _bench(live_service, alone, alone / "out")
    alone_seconds = time.monotonic() - started
    for seed in (0, 1):
        a, b = (pl.read_parquet(root / "runs" / f"two-workers-seed{seed}" / "scores.parquet")
                .sort("id", "source", "metric") for root in (pooled, alone))
        assert a.select("id", "source", "metric").equals(b.select("id", "source", "metric"))
        assert (a["score"] - b["score"]).abs().max() < 1e-5
        assert (json.loads((pooled / "out" / f"seed-{seed}" / "results.json").read_text())["scores"].keys()
                == json.loads((alone / "out" / f"seed-{seed}" / "results.json").read_text())["scores"].keys())
    print(f"two seeds: {pooled_seconds:.0f} s on two workers, {alone_seconds:.0f} s in one process")
