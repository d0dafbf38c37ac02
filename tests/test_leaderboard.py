"""larev.leaderboard: rows, ranking and what a scoring moved; tasks.leaderboard: rows that race both land."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from larev.leaderboard import LEADERBOARD_SCHEMA, entries, entry_name, moves, ranked


def row(entry: str, metric: str, score: float, scored_at: str, origin: str = "score") -> dict:
    return {"entry": entry, "origin": origin, "output": entry, "source": entry, "file": "", "metric": metric,
            "score": score, "ci_low": None, "ci_high": None, "n": 10, "scored_at": scored_at}


def board(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)


def test_entry_names_match_compare():
    assert entry_name(None, "gold", 7) == "gold"
    assert entry_name("model-b", "mine", 1) == "model-b"
    assert entry_name("model-b", "mine", 2) == "model-b:mine"


def test_entries_take_the_summary_score_and_an_interval_for_means_only():
    scores = pl.DataFrame({"metric": ["rev"] * 4 + ["las"] * 4, "source": ["s"] * 8,
                           "score": [1.0, 2.0, 3.0, 6.0, 1.0, 0.0, 1.0, 0.0],
                           "aggregate": ["mean"] * 4 + ["leak_macro"] * 4})
    summary = pl.DataFrame({"metric": ["rev", "las"], "source": ["s", "s"], "score": [3.0, 0.25], "n": [4, 4]})
    rows = entries(scores, summary, origin="score", output="mine", file="f.csv", scored_at="t")
    rev, las = rows.row(0, named=True), rows.row(1, named=True)
    assert rev["entry"] == "mine" and rev["score"] == 3.0 and rev["ci_low"] < 3.0 < rev["ci_high"]
    assert las["score"] == 0.25 and np.isnan(las["ci_low"])  # a macro-average: no per-instance interval


def test_ranking_reads_each_entrys_latest_row_and_ties_share_a_rank():
    b = board([row("gold", "larev", 0.5, "1", "reference"), row("leaky", "larev", 0.1, "1", "reference"),
               row("mine", "larev", 0.9, "2"), row("mine", "larev", 0.1, "3"), row("gold", "rev", 0.2, "1")])
    r = ranked(b)
    larev = {e["entry"]: (e["rank"], e["of"], e["score"]) for e in r.filter(pl.col("metric") == "larev").to_dicts()}
    assert larev == {"gold": (1, 3, 0.5), "leaky": (2, 3, 0.1), "mine": (2, 3, 0.1)}  # mine's latest: 0.1
    assert r.filter(pl.col("metric") == "rev")["of"].to_list() == [1]


def test_moves_say_where_a_new_entry_landed_and_who_moved_down():
    before = ranked(board([row("gold", "larev", 0.5, "1"), row("leaky", "larev", 0.1, "1")]))
    after = ranked(board([row("gold", "larev", 0.5, "1"), row("leaky", "larev", 0.1, "1"),
                          row("mine", "larev", 0.3, "2")]))
    assert moves(before, after, ["mine"]) == ["larev: mine enters rank 2 of 3 (score +0.300), above leaky",
                                             "larev: moved down: leaky"]
    again = ranked(board([row("gold", "larev", 0.5, "1"), row("leaky", "larev", 0.1, "1"),
                          row("mine", "larev", 0.3, "2"), row("mine", "larev", 0.9, "3")]))
    assert moves(after, again, ["mine"])[0] == "larev: mine moves from 2 to rank 1 of 3 (score +0.900), above gold"


def _record_many(root: str, run: dict, worker: int, n: int) -> None:
    from storage import ArtifactStore
    from tasks.leaderboard import record

    store = ArtifactStore(root)
    for i in range(n):
        record(store, run, board([row(f"w{worker}-{i}", "rev", float(i), f"2026-01-01T00:00:{i:02d}")]))


def fake_run(tmp_path: Path):
    """A run directory whose reference rows are two sources of one metric."""
    from storage import ArtifactStore

    store = ArtifactStore(str(tmp_path / "store"))
    scores = pl.DataFrame({"id": ["a", "b"] * 2, "metric": ["rev"] * 4, "source": ["gold"] * 2 + ["leaky"] * 2,
                           "score": [1.0, 2.0, 0.0, 0.5], "aggregate": ["mean"] * 4})
    summary = pl.DataFrame({"metric": ["rev", "rev"], "source": ["gold", "leaky"], "score": [1.5, 0.25],
                            "n": [2, 2]})
    store.write_parquet("report/x/scores.parquet", scores)
    store.write_parquet("report/x/summary.parquet", summary)
    run = {"params": {"run_name": "fake"}, "artifact_root": store.root,
           "artifacts": {"scores": {"key": "report/x/scores.parquet", "digest": "0" * 64},
                         "summary": {"key": "report/x/summary.parquet", "digest": "1" * 64}}}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    return store, run, run_dir


def test_two_processes_recording_at_once_lose_no_row(tmp_path):
    from tasks.leaderboard import read_board, write_snapshot

    store, run, run_dir = fake_run(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_record_many, args=(store.root, run, w, 25)) for w in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0, 0]
    rows, keys = read_board(store, run, run_dir)
    assert len(keys) == 50 and rows.filter(pl.col("origin") == "score").height == 50
    assert set(rows["entry"]) == {"gold", "leaky"} | {f"w{w}-{i}" for w in range(2) for i in range(25)}
    snapshot = write_snapshot(store, run, run_dir)
    assert snapshot.height == 52 and pl.read_parquet(run_dir / "leaderboard.parquet").height == 52
    assert "| 1 | w0-24 |" in (run_dir / "leaderboard.md").read_text() or \
        "| 1 | w1-24 |" in (run_dir / "leaderboard.md").read_text()


def test_reference_rows_are_the_runs_own_variants(tmp_path):
    from tasks.leaderboard import read_board

    store, run, run_dir = fake_run(tmp_path)
    rows, keys = read_board(store, run, run_dir)
    assert keys == [] and rows["entry"].to_list() == ["gold", "leaky"]
    assert set(rows["origin"]) == {"reference"} and rows["score"].to_list() == pytest.approx([1.5, 0.25])


def test_two_concurrent_larev_score_processes_both_land_on_the_leaderboard(tiny_trained_run, tmp_path):
    """Two real `larev score` processes on one run at once (the session's Prefect API): neither row set is lost,
    in the store's row files or in the snapshot the later one wrote."""
    import os
    import subprocess
    import sys

    from storage import ArtifactStore
    from tasks.export import read_run
    from tasks.leaderboard import read_board

    _, result = tiny_trained_run
    run_dir = Path(result["run_dir"])
    test = pl.read_ndjson(run_dir / "test_split.jsonl")
    children = []
    for name in ("race-a", "race-b"):
        path = tmp_path / f"{name}.csv"
        test.select("id", pl.lit(name).alias("source"), "rationale").write_csv(path)
        children.append(subprocess.Popen(
            [sys.executable, "-m", "flows.cli", "score", "--run", str(run_dir), "--rationales", str(path), "--name",
             name, "--no-progress", "--server", "auto"], cwd=Path(__file__).resolve().parents[1],
            env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [c.communicate(timeout=600)[0] for c in children]
    assert [c.returncode for c in children] == [0, 0], outputs
    assert all("leaderboard: rev: race-" in out for out in outputs)
    run = read_run(run_dir)
    rows, _ = read_board(ArtifactStore(run["artifact_root"]), run, run_dir)
    for name in ("race-a", "race-b"):
        assert rows.filter(pl.col("entry") == name).height == 5  # one row per metric
    snapshot = pl.read_parquet(run_dir / "leaderboard.parquet")
    assert {"race-a", "race-b", "gold", "leaky"} <= set(snapshot["entry"])
