"""Scale-out scoring: shards mapped over a Dask cluster (a LocalCluster the run starts, or an existing one by
address) give the sequential run's scores, and a rerun is served from the shard cache."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from flows.scale_bench import compare_scores
from flows.score import ScoreParams, score_rationales
from larev.errors import InputError
from larev.data.variants import bulk_rationales
from storage import ArtifactStore
from tasks.runtime.sharding import ScaleOutConfig, shard_bounds
from tests.test_flows import METRICS

KEY = ["metric", "id", "source"]


def test_shard_bounds_cover_every_row_once_in_order():
    assert shard_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert shard_bounds(8, 4) == [(0, 4), (4, 8)]
    assert shard_bounds(3, 100) == [(0, 3)]
    assert shard_bounds(0, 5) == [(0, 0)]  # an empty file still gives one (empty) score table
    with pytest.raises(ValueError, match="at least 1"):
        shard_bounds(10, 0)


def test_scale_out_config_is_validated_up_front():
    assert not ScaleOutConfig().enabled
    assert ScaleOutConfig(shard_rows=10).where() == "local, sharded" and not ScaleOutConfig(shard_rows=10).uses_dask
    assert ScaleOutConfig(shard_rows=10, dask_workers=2).where() == "dask:local x2"
    assert ScaleOutConfig(shard_rows=10, dask_address="tcp://10.0.0.5:8786").where() == "dask:tcp://10.0.0.5:8786"
    for cluster in ({"dask_address": "tcp://10.0.0.5:8786"}, {"dask_workers": 2}):
        with pytest.raises(ValueError, match="shard_rows is 0"):
            ScaleOutConfig(**cluster)
    with pytest.raises(ValueError):
        ScaleOutConfig(shard_rows=-1)


@pytest.fixture
def trained_run(tiny_trained_run):
    return tiny_trained_run


def rationale_file(run: dict, path: Path, n_rows: int, seed: int = 0) -> Path:
    """n_rows rationales over the run's test ids (larev.data.variants.bulk_rationales), written as Parquet."""
    examples = pl.read_parquet(run["refs"]["examples"].uri).filter(pl.col("split") == "test")
    bulk_rationales(examples, n_rows, seed=seed).write_parquet(path)
    return path


def sorted_scores(result) -> pl.DataFrame:
    return pl.read_parquet(Path(result["run_dir"]) / "scores.parquet").sort(KEY)


def assert_same_scores(sharded: pl.DataFrame, sequential: pl.DataFrame) -> float:
    """Same rows, same predictions and leak flags, same log-probabilities up to float round-off; returns the
    largest absolute difference of any log-probability or score."""
    diff = compare_scores(sharded, sequential)
    assert diff["same_rows"] and diff["same_predictions"], diff
    assert diff["max_abs_diff"] <= 1e-5, f"sharded scores differ from the sequential ones by {diff['max_abs_diff']}"
    return diff["max_abs_diff"]


@pytest.mark.parametrize("n_rows", [pytest.param(1_000, id="1000-rows"),
                                    pytest.param(20_000, id="20000-rows", marks=pytest.mark.slow)])
def test_dask_sharded_scoring_equals_the_sequential_scores(trained_run, tmp_path, n_rows):
    """Five shards on two local Dask workers give the sequential scores, and a rerun reads every shard from cache.
    The default suite checks 1,000 rows (shards of 200); `-m slow` the 20,000 of the scale benchmark (shards of
    4,000)."""
    root, run = trained_run
    path = rationale_file(run, tmp_path / "many.parquet", n_rows)
    base = dict(run=run["run_dir"], rationales=str(path), progress=False)
    sequential = score_rationales(ScoreParams(name="sequential", **base))
    scale = ScaleOutConfig(shard_rows=n_rows // 5, dask_workers=2)
    sharded = score_rationales(ScoreParams(name="sharded", scale_out=scale, **base))

    seq, shd = sorted_scores(sequential), sorted_scores(sharded)
    assert sorted(seq["metric"].unique()) == METRICS
    assert seq.filter(pl.col("metric") == "rev").height == n_rows
    gap = assert_same_scores(shd, seq)
    print(f"largest |sharded - sequential| over 5 x {n_rows:,} scores: {gap:.3g}")
    records = {r.step: r for r in sharded["steps"]}
    assert records["rationale-shards"].cached is False  # the file was read and validated shard by shard
    for step in ("score-rev", "score-larev", "score-rora", "score-rq-las"):
        assert records[step].where == "dask:local x2" and not records[step].cached

    again = score_rationales(ScoreParams(name="sharded", scale_out=scale, **base))  # every shard from cache
    assert all(r.cached for r in again["steps"]), [r.step for r in again["steps"] if not r.cached]
    assert sorted_scores(again).equals(shd)


def test_sharded_scoring_on_an_existing_cluster_by_address(trained_run, tmp_path):
    from distributed import LocalCluster

    root, run = trained_run
    path = rationale_file(run, tmp_path / "few.parquet", 300, seed=1)
    base = dict(run=run["run_dir"], rationales=str(path), progress=False)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=None) as cluster:  # an in-process cluster, reached over TCP like a remote one
        scale = ScaleOutConfig(shard_rows=128, dask_address=cluster.scheduler_address)
        sharded = score_rationales(ScoreParams(name="by-address", scale_out=scale, **base))
        # the flow only connected to the cluster: its worker is still there afterwards
        assert len(cluster.scheduler_info["workers"]) == 1
    sequential = score_rationales(ScoreParams(name="in-process", **base))
    assert_same_scores(sorted_scores(sharded), sorted_scores(sequential))
    assert {r.where for r in sharded["steps"] if r.step.startswith("score-")} == {
        f"dask:{scale.dask_address}"}


def test_in_process_shards_stream_the_file_and_equal_the_unsharded_scores(trained_run, tmp_path):
    root, run = trained_run
    path = rationale_file(run, tmp_path / "mid.parquet", 1_000, seed=2)
    base = dict(run=run["run_dir"], rationales=str(path), progress=False)
    store = ArtifactStore(root / "store")  # tiny_params' artifact root (other tests of the session write shards too)
    before = {k for fp in store.ls("rationale-shards") for k in store.ls(fp)}
    whole = score_rationales(ScoreParams(name="whole", **base))
    streamed = score_rationales(ScoreParams(name="streamed", scale_out=ScaleOutConfig(shard_rows=300), **base))
    assert_same_scores(sorted_scores(streamed), sorted_scores(whole))
    records = {r.step: r for r in streamed["steps"]}
    assert {records[s].where for s in ("score-rev", "score-larev", "score-rora", "score-rq-las")} == {
        "local, sharded"}
    written = {k for fp in store.ls("rationale-shards") for k in store.ls(fp)} - before
    assert len([k for k in written if k.endswith(".parquet")]) == 4  # 1,000 rows in shards of 300, read and validated one shard at a time


def test_a_bad_file_scored_in_shards_fails_whole_and_leaves_no_shard(trained_run, tmp_path):
    root, run = trained_run
    path = rationale_file(run, tmp_path / "bad.parquet", 1_000, seed=3)
    frame = pl.read_parquet(path)
    frame.with_columns(id=pl.when(pl.int_range(pl.len()) == 950).then(pl.lit("no-such-id")).otherwise("id")) \
        .write_parquet(path)
    store = ArtifactStore(root / "store")  # tiny_params' artifact root
    before = {k for fp in store.ls("rationale-shards") for k in store.ls(fp)}
    with pytest.raises(InputError, match=r"bad\.parquet: row 950, column 'id': id 'no-such-id'"):
        score_rationales(ScoreParams(name="bad", run=run["run_dir"], rationales=str(path), progress=False,
                                     scale_out=ScaleOutConfig(shard_rows=300)))
    assert {k for fp in store.ls("rationale-shards") for k in store.ls(fp)} == before
