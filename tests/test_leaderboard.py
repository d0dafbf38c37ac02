"""larev.leaderboard: rows, ranking and what a scoring moved; tasks.leaderboard: rows that race both land."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from larev.leaderboard import (LEADERBOARD_SCHEMA, entries, entry_name, leaderboard_markdown, moves, rank_ranges,
                               ranked, with_schema)
from larev.signature import make_signature

SIGNATURE = make_signature("larev", "v1", "embedded", None, {"lr": 1e-3}, 0, "0.1.0")


def ids(n: int, start: int = 0) -> list[str]:
    return [f"i{k:03d}" for k in range(start, start + n)]


def row(entry: str, metric: str, values: list[float], scored_at: str = "1", origin: str = "score", *,
        id_list: list[str] | None = None, signature: str | None = SIGNATURE, aggregate: str = "mean",
        score: float | None = None) -> dict:
    """One leaderboard row scored on `values` (ids i000, i001, ... unless given); its score their mean unless
    given; no recorded interval (the ranking computes the ones it shows)."""
    return {"entry": entry, "origin": origin, "output": entry, "source": entry, "file": "", "metric": metric,
            "aggregate": aggregate, "signature": signature,
            "score": float(np.mean(values)) if score is None else score, "ci_low": None, "ci_high": None,
            "n": len(values), "scored_at": scored_at, "ids": id_list or ids(len(values)), "id_scores": values}


def board(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)


def by_entry(table: pl.DataFrame, metric: str = "larev") -> dict[str, dict]:
    return {r["entry"]: r for r in table.filter(pl.col("metric") == metric).iter_rows(named=True)}


def test_entry_names_match_compare():
    assert entry_name(None, "gold", 7) == "gold"
    assert entry_name("model-b", "mine", 1) == "model-b"
    assert entry_name("model-b", "mine", 2) == "model-b:mine"


def test_entries_take_the_summary_score_its_signature_and_per_id_scores():
    scores = pl.DataFrame({"id": ["d", "a", "c", "b"] * 2, "metric": ["rev"] * 4 + ["las"] * 4, "source": ["s"] * 8,
                           "score": [6.0, 1.0, 3.0, 2.0, 1.0, 0.0, 1.0, 0.0],
                           "aggregate": ["mean"] * 4 + ["leak_macro"] * 4})
    summary = pl.DataFrame({"metric": ["rev", "las"], "source": ["s", "s"], "score": [3.0, 0.25], "n": [4, 4],
                            "signature": [SIGNATURE, None]})
    rows = entries(scores, summary, origin="score", output="mine", file="f.csv", scored_at="t")
    rev, las = rows.row(0, named=True), rows.row(1, named=True)
    assert rev["entry"] == "mine" and rev["score"] == 3.0 and rev["ci_low"] < 3.0 < rev["ci_high"]
    assert rev["ids"] == ["a", "b", "c", "d"] and rev["id_scores"] == [1.0, 2.0, 3.0, 6.0]  # sorted by id
    assert rev["signature"] == SIGNATURE and rev["aggregate"] == "mean"
    assert las["score"] == 0.25 and np.isnan(las["ci_low"])  # a macro-average: no per-instance interval
    assert las["signature"] is None and las["aggregate"] == "leak_macro"
    # a summary written before signatures were kept: unsigned, not an error
    unsigned = entries(scores, summary.drop("signature"), origin="score", output="mine", file="f.csv", scored_at="t")
    assert unsigned["signature"].to_list() == [None, None]


def test_rank_ranges_count_the_intervals_wholly_above_and_the_ones_reaching_it():
    # a [0.4, 0.6], b [0.1, 0.5], c [0.0, 0.2]
    # a: best 1 + #(low > 0.6) = 1; worst #(high >= 0.4) = a, b = 2
    # b: best 1 + #(low > 0.5) = 1; worst #(high >= 0.1) = a, b, c = 3
    # c: best 1 + #(low > 0.2) = 1 + a = 2; worst #(high >= 0.0) = 3
    best, worst = rank_ranges(np.array([0.4, 0.1, 0.0]), np.array([0.6, 0.5, 0.2]))
    assert best.tolist() == [1, 1, 2] and worst.tolist() == [2, 3, 3]
    # points (no interval): strictly ordered ranks; equal points share a range
    best, worst = rank_ranges(np.array([3.0, 1.0, 1.0]), np.array([3.0, 1.0, 1.0]))
    assert best.tolist() == [1, 2, 2] and worst.tolist() == [1, 3, 3]


def test_ranking_reads_each_entrys_latest_row_and_equal_scores_share_a_range():
    b = board([row("gold", "larev", [0.5] * 10, "1", "reference"), row("leaky", "larev", [0.1] * 10, "1", "reference"),
               row("mine", "larev", [0.9] * 10, "2"), row("mine", "larev", [0.1] * 10, "3"),
               row("gold", "rev", [0.2] * 10, "1", "reference")])
    larev = {e: (r["rank"], r["of"], r["score"]) for e, r in by_entry(ranked(b)).items()}
    # constant scores: zero-width intervals; mine's latest (0.1) ties leaky's
    assert larev == {"gold": ("1", 3, 0.5), "leaky": ("2-3", 3, 0.1), "mine": ("2-3", 3, 0.1)}
    assert ranked(b).filter(pl.col("metric") == "rev")["of"].to_list() == [1]


def test_an_entry_scored_on_3_of_500_ids_is_listed_apart_and_does_not_shrink_the_shared_ids():
    """The pack-scored file of 3 rationales: its mean (9.0) beats every other, on rows nobody else was ranked on;
    it is listed apart, and gold and leaky stay ranked on all 500 ids."""
    rng = np.random.default_rng(0)
    b = board([row("gold", "larev", list(rng.normal(1, 1, 500)), origin="reference"),
               row("leaky", "larev", list(rng.normal(-5, 1, 500)), origin="reference"),
               row("three", "larev", [9.0, 9.0, 9.0], "2")])
    r = by_entry(ranked(b))
    assert r["three"]["rank"] is None and r["three"]["apart"] == "too few ids: 3 of 500"
    assert r["three"]["n"] == 3 and not r["three"]["on_shared"]
    assert (r["gold"]["rank"], r["gold"]["of"], r["gold"]["n"]) == ("1", 2, 500)
    assert (r["leaky"]["rank"], r["leaky"]["n"]) == ("2", 500)
    assert list(by_entry(ranked(b)))[-1] == "three"  # listed below the ranked ones
    text = leaderboard_markdown(ranked(b), "t")
    assert "Listed apart (not ranked)" in text and "| three | score | +9.000 | 3 | too few ids: 3 of 500 |" in text
    assert text.index("| three |") > text.index("| 2 | leaky |")
    # the option: at min_share 0.005 (2.5 of 500) three is ranked, and the shared ids shrink to its 3
    r = by_entry(ranked(b, min_share=0.005))
    assert r["three"]["rank"] == "1" and r["gold"]["n"] == 3


def test_ranking_uses_only_the_ids_every_ranked_entry_shares():
    """gold scores 1 on ids 0-9; A scores 2 on ids 0-5 and -4 on ids 6-9 (mean over its 10 ids: (12 - 16) / 10 =
    -0.4); B was scored on ids 0-5 only (6 of 10: enough), 1.5 each. By their own means: B 1.5 > gold 1 > A -0.4.
    On the 6 shared ids: A 2 > B 1.5 > gold 1 (constant values: zero-width intervals, exact ranks)."""
    a = [2.0] * 6 + [-4.0] * 4
    b = board([row("gold", "larev", [1.0] * 10, origin="reference"), row("A", "larev", a, "2"),
               row("B", "larev", [1.5] * 6, "3")])
    assert board([row("A", "larev", a)])["score"][0] == pytest.approx(-0.4)  # A's own aggregate
    r = by_entry(ranked(b))
    assert {e: (x["rank"], x["score"], x["n"]) for e, x in r.items()} == {
        "A": ("1", 2.0, 6), "B": ("2", 1.5, 6), "gold": ("3", 1.0, 6)}
    assert all(x["on_shared"] for x in r.values())
    assert "Ranked on the 6 ids all 3 ranked entries share." in leaderboard_markdown(ranked(b), "t")


def test_overlapping_intervals_give_a_rank_range():
    """gold alternates 0 and 2 (mean 1), X alternates 0.1 and 1.9 (mean 1): their BCa intervals (about 1 +- 0.6)
    overlap; leaky is -5 everywhere (a zero-width interval far below). gold and X: 1-2, leaky: 3."""
    b = board([row("gold", "larev", [0.0, 2.0] * 10, origin="reference"), row("X", "larev", [0.1, 1.9] * 10, "2"),
               row("leaky", "larev", [-5.0] * 20, origin="reference")])
    r = by_entry(ranked(b))
    assert r["gold"]["ci_low"] < 1 < r["gold"]["ci_high"] and r["X"]["ci_low"] < r["gold"]["ci_high"]
    assert {e: (x["rank"], x["best"], x["worst"]) for e, x in r.items()} == {
        "gold": ("1-2", 1, 2), "X": ("1-2", 1, 2), "leaky": ("3", 3, 3)}


def test_a_different_signature_is_listed_apart_with_the_fields_named():
    other = make_signature("larev", "v1", "minilm", "ab" * 32, {"lr": 1e-4}, 0, "0.1.0")
    b = board([row("gold", "larev", [1.0] * 10, origin="reference"),
               row("mine", "larev", [3.0] * 6, "2", signature=other)])
    r = by_entry(ranked(b))
    assert r["mine"]["rank"] is None and r["mine"]["apart"] == "signature differs in backbone, settings"
    assert (r["gold"]["rank"], r["gold"]["of"], r["gold"]["n"]) == ("1", 1, 10)  # mine's 6 ids shrink nothing
    text = leaderboard_markdown(ranked(b), "t")
    assert f"Signature: `{SIGNATURE}`" in text and "signature differs in backbone, settings" in text


def test_unsigned_scores_are_ranked_unchecked_and_said_so():
    signed_ref = board([row("gold", "larev", [1.0] * 10, origin="reference"),
                        row("old", "larev", [0.5] * 10, "2", signature=None)])
    r = by_entry(ranked(signed_ref))
    assert r["old"]["rank"] == "2" and not r["old"]["checked"] and r["gold"]["checked"]
    assert "Not checked (scored before signatures were kept): old." in leaderboard_markdown(ranked(signed_ref), "t")
    unsigned_ref = board([row("gold", "larev", [1.0] * 10, origin="reference", signature=None),
                          row("new", "larev", [2.0] * 10, "2")])
    assert by_entry(ranked(unsigned_ref))["new"]["rank"] == "1"
    assert "Signature: unknown" in leaderboard_markdown(ranked(unsigned_ref), "t")


def test_rows_recorded_before_signatures_and_per_id_scores_are_read_and_listed_apart():
    old = pl.DataFrame({"entry": ["mine"], "origin": ["score"], "output": ["mine"], "source": ["mine"], "file": [""],
                        "metric": ["larev"], "score": [9.0], "ci_low": [8.0], "ci_high": [10.0], "n": [10],
                        "scored_at": ["2"]})
    b = pl.concat([board([row("gold", "larev", [1.0] * 10, origin="reference")]), with_schema(old)])
    r = by_entry(ranked(b))
    assert r["mine"]["rank"] is None and r["mine"]["apart"].startswith("no per-id scores")
    assert r["gold"]["rank"] == "1"


def test_las_keeps_its_own_aggregate_not_on_the_shared_ids():
    b = board([row("gold", "las", [1.0, 0.0] * 5, origin="reference", aggregate="leak_macro", score=0.3),
               row("mine", "las", [1.0] * 6, "2", aggregate="leak_macro", score=0.6),
               row("gold", "larev", [1.0] * 10, origin="reference"), row("mine", "larev", [1.0] * 6, "2")])
    las = by_entry(ranked(b), "las")
    assert {e: (x["rank"], x["score"], x["n"], x["on_shared"]) for e, x in las.items()} == {
        "mine": ("1", 0.6, 6, False), "gold": ("2", 0.3, 10, False)}
    assert by_entry(ranked(b))["gold"]["n"] == 6  # the mean is on the shared ids
    assert "not recomputed on shared ids" in leaderboard_markdown(ranked(b), "t")


def test_moves_say_where_a_new_entry_landed_with_ranges_and_who_moved_down():
    gold, leaky = row("gold", "larev", [1.0] * 10, origin="reference"), row("leaky", "larev", [-5.0] * 10,
                                                                              origin="reference")
    before = ranked(board([gold, leaky]))
    after = ranked(board([gold, leaky, row("mine", "larev", [1.0] * 10, "2")]))
    assert moves(before, after, ["mine"]) == [
        "larev: mine enters rank 1-2 of 3 (score +1.000, n 10), tied with gold, above leaky",
        "larev: moved down: leaky"]  # gold's best rank is still 1; leaky's went from 2 to 3
    again = ranked(board([gold, leaky, row("mine", "larev", [1.0] * 10, "2"), row("mine", "larev", [3.0] * 10, "3")]))
    assert moves(after, again, ["mine"]) == [
        "larev: mine moves from rank 1-2 to rank 1 of 3 (score +3.000, n 10), above gold",
        "larev: moved down: gold"]
    three = ranked(board([gold, leaky, row("three", "larev", [9.0] * 3, "2")]))
    assert moves(before, three, ["three"]) == [
        "larev: three is listed apart, not ranked: too few ids: 3 of 10 (score +9.000)"]


def _record_many(root: str, run: dict, worker: int, n: int) -> None:
    from storage import ArtifactStore
    from tasks.leaderboard import record

    store = ArtifactStore(root)
    for i in range(n):
        record(store, run, board([row(f"w{worker}-{i}", "rev", [float(i)] * 2, f"2026-01-01T00:00:{i:02d}",
                                      id_list=["a", "b"], signature=None)]))


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
    text = (run_dir / "leaderboard.md").read_text()
    assert "| 1-2 | w0-24 |" in text and "| 1-2 | w1-24 |" in text  # equal constant scores: a shared range


def test_reference_rows_are_the_runs_own_variants(tmp_path):
    from tasks.leaderboard import read_board

    store, run, run_dir = fake_run(tmp_path)
    rows, keys = read_board(store, run, run_dir)
    assert keys == [] and rows["entry"].to_list() == ["gold", "leaky"]
    assert set(rows["origin"]) == {"reference"} and rows["score"].to_list() == pytest.approx([1.5, 0.25])
    assert rows["ids"].to_list() == [["a", "b"], ["a", "b"]] and rows["id_scores"].to_list() == [[1.0, 2.0],
                                                                                                [0.0, 0.5]]
    assert rows["signature"].to_list() == [None, None]  # a summary without signatures: unsigned


def test_an_old_row_file_on_the_board_is_read_and_listed_apart(tmp_path):
    """A row file recorded before signatures and per-id scores were kept: no crash; listed apart."""
    from tasks.leaderboard import board_prefix, write_snapshot

    store, run, run_dir = fake_run(tmp_path)
    store.write_parquet(f"{board_prefix(run)}/rows/old.parquet", pl.DataFrame(
        {"entry": ["mine"], "origin": ["score"], "output": ["mine"], "source": ["mine"], "file": ["f.csv"],
         "metric": ["rev"], "score": [9.0], "ci_low": [8.0], "ci_high": [10.0], "n": [2], "scored_at": ["2"]}))
    snapshot = by_entry(write_snapshot(store, run, run_dir), "rev")
    assert snapshot["mine"]["rank"] is None and snapshot["mine"]["apart"].startswith("no per-id scores")
    assert snapshot["gold"]["rank"] == "1"


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


def test_a_file_of_3_rationales_is_listed_apart_not_ranked(tiny_trained_run, tmp_path, capsys):
    """`larev score` of 3 of the tiny run's 12 test rows: the leaderboard lists it apart ("too few ids: 3 of 12")
    and ranks the others on all 12 ids, with each metric's signature."""
    from flows.cli import main

    _, result = tiny_trained_run
    run_dir = Path(result["run_dir"])
    path = tmp_path / "three.csv"
    pl.read_ndjson(run_dir / "test_split.jsonl").head(3).select(
        "id", pl.lit("three").alias("source"), "rationale").write_csv(path)
    assert main(["score", "--run", str(run_dir), "--rationales", str(path), "--name", "three-rows",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "leaderboard: rev: three-rows is listed apart, not ranked: too few ids: 3 of 12" in out
    assert main(["leaderboard", str(run_dir), "--metric", "rev"]) == 0
    text = capsys.readouterr().out
    assert "| three-rows | score |" in text and "| too few ids: 3 of 12 |" in text
    assert "Ranked on the 12 ids all" in text
    ranked_part = text[:text.index("Listed apart")]
    assert "| gold | reference |" in ranked_part and "three-rows" not in ranked_part
    signed = "signature" in pl.read_parquet(run_dir / "summary.parquet").columns
    assert ("Signature: `metric:rev." if signed else "Signature: unknown") in text
    snapshot = pl.read_parquet(run_dir / "leaderboard.parquet").filter(pl.col("entry") == "three-rows")
    assert snapshot["rank"].to_list() == [None] * 5 and set(snapshot["apart"]) == {"too few ids: 3 of 12"}
