"""`larev compare` on a finished tiny demo run: sources of the run, files scored first, several runs as seeds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl

from flows.cli import main


def gold_copy(run_dir: Path, path: Path, *, source: str = "copy", seed: int = 0) -> Path:
    """The run's gold rationales as a rationale file, rows in a shuffled order."""
    test = pl.read_ndjson(run_dir / "test_split.jsonl")
    order = np.random.default_rng(seed).permutation(test.height)
    test[order].select("id", pl.lit(source).alias("source"), "rationale").write_csv(path)
    return path


def test_a_reordered_copy_of_gold_is_no_difference_and_vacuous_is_compared(tiny_trained_run, tmp_path, capsys):
    _, result = tiny_trained_run
    run_dir = Path(result["run_dir"])
    copy = gold_copy(run_dir, tmp_path / "gold-copy.csv")
    assert main(["compare", "--run", str(run_dir), "gold", str(copy), "vacuous", "--name", "t1",
                 "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    record = json.loads((run_dir / "compare-t1" / "compare.json").read_text())
    assert record["sources"] == ["gold", "gold-copy", "vacuous"]
    rows = pl.DataFrame(record["rows"])
    assert set(rows["metric"]) == {"rev", "larev", "rora", "rq"}  # las: a macro-average, listed as not compared
    assert record["skipped_metrics"] == ["las"] and "Not compared: las" in out
    copy_rows = rows.filter((pl.col("a") == "gold") & (pl.col("b") == "gold-copy"))
    # scored again through `larev score`, paired by id whatever the file's row order: identical
    assert copy_rows.height > 0 and (copy_rows["difference"].abs() < 1e-6).all()
    assert set(copy_rows["verdict"]) == {"no difference"}
    assert (rows["n"].filter(rows["label"] == "(all)") == 12).all()
    assert "Benjamini-Hochberg" in out  # three sources: the multiple-comparison note
    assert (run_dir / "compare-t1" / "compare.png").read_bytes()[:4] == b"\x89PNG"
    assert (run_dir / "gold-copy" / "scores.parquet").exists()  # the file's scores, reusable by name
    # the scored output is now a source by name
    assert main(["compare", "--run", str(run_dir), "gold-copy", "gold", "--name", "t2", "--no-by-label"]) == 0
    rows = pl.DataFrame(json.loads((run_dir / "compare-t2" / "compare.json").read_text())["rows"])
    assert set(rows["label"]) == {"(all)"} and (rows["difference"].abs() < 1e-6).all()


def test_two_runs_are_read_as_seeds(tiny_trained_run, tmp_path):
    _, result = tiny_trained_run
    run_dir = Path(result["run_dir"])
    twin = tmp_path / "twin"
    shutil.copytree(run_dir, twin)
    # the twin's run.json names the store relative to the run: point it back at the original store
    run = json.loads((run_dir / "run.json").read_text())
    store = (run_dir / run["artifact_root"]).resolve() if "://" not in run["artifact_root"] else run["artifact_root"]
    (twin / "run.json").write_text(json.dumps({**run, "artifact_root": str(store)}))
    assert main(["compare", "--run", str(run_dir), "--run", str(twin), "gold", "empty", "--out",
                 str(tmp_path / "out"), "--no-by-label", "--metrics", "rev"]) == 0
    row = json.loads((tmp_path / "out" / "compare.json").read_text())["rows"][0]
    assert row["metric"] == "rev" and row["seeds"] == 2
    assert row["seed_sd"] == 0  # identical seeds: no training variance, the seeds interval collapses
    assert row["seeds_low"] == row["seeds_high"] == row["difference"]


def test_unknown_source_fails_before_any_flow_with_what_the_run_has(tiny_trained_run, capsys):
    _, result = tiny_trained_run
    assert main(["compare", "--run", result["run_dir"], "gold", "nonesuch"]) == 2
    err = capsys.readouterr().err
    assert "'nonesuch' names nothing" in err and "leaky" in err
