"""Benchmarks of the score flow at scale, each configuration measured side by side in one run.

`larev bench scale`: throughput in one process and sharded over 1, 2, ... Dask workers on the same rationale
file, each configuration's scores checked against the in-process ones. Every configuration recomputes its steps
(`refresh`), so none is served from another's cache. A Dask configuration's time includes starting its
LocalCluster (worker processes import torch and load the models): that is what a user pays per run.

`larev bench memory`: peak resident memory of `larev score` (a child process per measurement) on files of
growing size, whole-file vs streamed in shards: the streamed path's memory should not grow with the file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import polars as pl

from flows.score import ScoreParams, read_run, score_rationales
from larev.data.variants import bulk_rationales
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.data import examples_in_test_split
from tasks.runtime.sharding import ScaleOutConfig

KEY = ["metric", "id", "source"]
EXACT = ["label", "pred_with", "pred_base", "correct_with", "correct_base", "leaks"]
VALUES = ["logp_with", "logp_base", "score"]


def compare_scores(scores: pl.DataFrame, reference: pl.DataFrame) -> dict:
    """How a configuration's scores differ from the reference: same rows and predictions (bools), and the
    largest absolute difference of any log-probability or score."""
    a, b = scores.sort(KEY), reference.sort(KEY)
    same_rows = a.height == b.height and a.select(KEY).equals(b.select(KEY))
    same_predictions = same_rows and a.select(EXACT).equals(b.select(EXACT))
    gap = (max(float(np.nanmax(np.abs(a[c].to_numpy() - b[c].to_numpy()), initial=0.0)) for c in VALUES)
           if same_rows else float("nan"))
    return {"same_rows": same_rows, "same_predictions": same_predictions, "max_abs_diff": gap}


def quick_run(work: Path) -> str:
    """A REV + LAREV run on the demo data with the embedded default backbone, one epoch per model (the
    weights do not change the cost of scoring); returns its run directory."""
    from flows.pipeline import PipelineParams, larev_pipeline
    from larev.config import TrainConfig
    from larev.methods.leakage_aware.config import LarevConfig
    from larev.methods.rora.config import RoraConfig

    defaults = LarevConfig()
    params = PipelineParams(run_name="bench-scale", artifact_root=str(work / "store"), run_dir=str(work / "runs"),
                            train=TrainConfig(epochs=1), progress=False, rora=RoraConfig(enabled=False),
                            larev=LarevConfig(la_train=defaults.la_train.model_copy(update={"epochs": 1}),
                                              probe_train=defaults.probe_train.model_copy(update={"epochs": 1}),
                                              la_min_steps=0))
    return larev_pipeline(params)["run_dir"]


def measure_scale_out(run_dir: str, out: Path, *, n_rows: int, shard_rows: int, workers: list[int],
                      seed: int = 0) -> dict:
    """Score one bulk rationale file of n_rows rows in-process and sharded on LocalClusters of each worker
    count; returns the figures (also written to <out>/scale.json)."""
    run = read_run(run_dir)
    store = ArtifactStore(run["artifact_root"])
    examples = examples_in_test_split(store, ArtifactRef(**run["artifacts"]["examples"]))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"rationales-{n_rows}.parquet"
    bulk_rationales(examples, n_rows, seed=seed).write_parquet(path)
    configs = [("in-process", ScaleOutConfig())]
    configs += [(f"dask x{w}", ScaleOutConfig(shard_rows=shard_rows, dask_workers=w)) for w in workers]
    rows, reference = [], None
    for label, scale in configs:
        print(f"{label}: scoring {n_rows:,} rationales ...", flush=True)
        started = time.perf_counter()
        result = score_rationales(ScoreParams(run=run_dir, rationales=str(path), name=f"bench-scale-{len(rows)}",
                                              progress=False, scale_out=scale, refresh=True, leaderboard=False))
        seconds = time.perf_counter() - started
        scores = pl.read_parquet(Path(result["run_dir"]) / "scores.parquet")
        reference = scores if reference is None else reference
        metrics = sorted(scores["metric"].unique())
        rows.append({"config": label, "workers": scale.dask_workers if scale.enabled else 0,
                     "shard_rows": scale.shard_rows, "seconds": seconds, "rows_per_second": n_rows / seconds,
                     "metrics": metrics, **compare_scores(scores, reference)})
        print(f"  {seconds:.1f}s, {n_rows / seconds:,.0f} rationale rows/s ({len(metrics)} metrics each)", flush=True)
    by_workers = {r["workers"]: r for r in rows}
    ratios = {f"dask_x{w}_vs_in_process": by_workers[w]["rows_per_second"] / by_workers[0]["rows_per_second"]
              for w in workers}
    if 1 in by_workers and len(workers) > 1:
        ratios |= {f"dask_x{w}_vs_dask_x1": by_workers[w]["rows_per_second"] / by_workers[1]["rows_per_second"]
                   for w in workers if w != 1}
    report = {"n_rows": n_rows, "shard_rows": shard_rows, "cpu_count": os.cpu_count(), "run": run_dir,
              "configs": rows, "ratios": ratios}
    (out / "scale.json").write_text(json.dumps(report, indent=2))
    return report


def print_report(report: dict) -> None:
    print(f"\n{report['n_rows']:,} rationale rows, every metric of the run, shards of {report['shard_rows']:,} rows, "
          f"{report['cpu_count']} CPU cores")
    print(f"{'config':<12} {'seconds':>8} {'rows/s':>8}  same rows  same predictions  max |diff| vs in-process")
    for r in report["configs"]:
        print(f"{r['config']:<12} {r['seconds']:8.1f} {r['rows_per_second']:8.0f}  {str(r['same_rows']):<9}  "
              f"{str(r['same_predictions']):<16}  {r['max_abs_diff']:.2e}")
    for name, value in report["ratios"].items():
        print(f"{name:<26} {value:.2f}")


def tiny_run(work: Path) -> str:
    """A REV-only run on the demo data with a small model (d_model 32, one layer, one epoch): scoring memory
    depends on the tables, not on the model, and a small model keeps the large files quick to score."""
    from flows.pipeline import PipelineParams, larev_pipeline
    from larev.config import ModelConfig, TrainConfig
    from larev.methods.leakage_aware.config import LarevConfig
    from larev.methods.rora.config import RoraConfig

    params = PipelineParams(run_name="bench-memory", artifact_root=str(work / "store"), run_dir=str(work / "runs"),
                            model=ModelConfig(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16),
                            train=TrainConfig(epochs=1), progress=False, larev=LarevConfig(enabled=False),
                            rora=RoraConfig(enabled=False))
    return larev_pipeline(params)["run_dir"]


_CHILD = ("import resource, sys; from flows.cli import main; code = main(sys.argv[1:]); "
          "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True); sys.exit(code)")


def _score_in_child(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of `larev <argv>` run in a fresh process."""
    import subprocess
    import sys

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    peaks = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("PEAK_RSS_KIB")]
    if done.returncode != 0 or not peaks:
        raise RuntimeError(f"`larev {' '.join(argv)}` failed:\n{done.stderr[-3000:]}")
    return seconds, int(peaks[-1]) / 1024


def measure_memory(run_dir: str, out: Path, *, sizes: list[int], shard_rows: int, api_url: str | None,
                   seed: int = 0) -> dict:
    """For each file size: peak RSS and seconds of scoring the whole file in one step and in shards."""
    run = read_run(run_dir)
    store = ArtifactStore(run["artifact_root"])
    examples = examples_in_test_split(store, ArtifactRef(**run["artifacts"]["examples"]))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **({"PREFECT_API_URL": api_url} if api_url else {})}
    rows = []
    for n_rows in sizes:
        path = out / f"rationales-{n_rows}.parquet"
        bulk_rationales(examples, n_rows, seed=seed).write_parquet(path)
        for mode, extra in (("whole file", []), (f"shards of {shard_rows:,}", ["--shard-rows", str(shard_rows)])):
            print(f"{n_rows:,} rows, {mode} ...", flush=True)
            argv = ["score", "--run", run_dir, "--rationales", str(path), "--name", f"bench-memory-{len(rows)}",
                    "--no-progress", "--refresh", *extra]
            seconds, peak = _score_in_child(argv, env)
            rows.append({"rows": n_rows, "mode": mode, "seconds": seconds, "peak_rss_mib": peak,
                         "rows_per_second": n_rows / seconds})
            print(f"  {seconds:.1f}s, peak RSS {peak:,.0f} MiB", flush=True)
        path.unlink()
    report = {"shard_rows": shard_rows, "run": run_dir, "measurements": rows}
    (out / "memory.json").write_text(json.dumps(report, indent=2))
    return report


def print_memory_report(report: dict) -> None:
    print(f"\n{'rows':>10}  {'mode':<20} {'seconds':>8} {'rows/s':>8} {'peak RSS MiB':>13}")
    for r in report["measurements"]:
        print(f"{r['rows']:>10,}  {r['mode']:<20} {r['seconds']:8.1f} {r['rows_per_second']:8.0f} "
              f"{r['peak_rss_mib']:13,.0f}")
    by_mode: dict[str, list[dict]] = {}
    for r in report["measurements"]:
        by_mode.setdefault(r["mode"], []).append(r)
    for mode, group in by_mode.items():
        if len(group) > 1:
            small, large = group[0], group[-1]
            print(f"{mode}: {large['rows'] / small['rows']:.0f}x the rows -> "
                  f"{large['peak_rss_mib'] / small['peak_rss_mib']:.2f}x the peak memory")
