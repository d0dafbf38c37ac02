"""`larev compare` on a finished tiny demo run: sources of the run, files scored first, several runs as seeds, and
the signature check (on copies of the run whose scores.parquet carries signatures written by the test)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from flows.cli import main
from larev.signature import make_signature


def gold_copy(run_dir: Path, path: Path, *, source: str = "copy", seed: int = 0) -> Path:
    """The run's gold rationales as a rationale file, rows in a shuffled order."""
    test = pl.read_ndjson(run_dir / "test_split.jsonl")
    order = np.random.default_rng(seed).permutation(test.height)
    test[order].select("id", pl.lit(source).alias("source"), "rationale").write_csv(path)
    return path


def twin(run_dir: Path, path: Path) -> Path:
    """A copy of the run directory whose run.json names the original store (the run's own files stay untouched:
    the tiny run is shared by the session)."""
    shutil.copytree(run_dir, path)
    run = json.loads((run_dir / "run.json").read_text())
    store = (run_dir / run["artifact_root"]).resolve() if "://" not in run["artifact_root"] else run["artifact_root"]
    (path / "run.json").write_text(json.dumps({**run, "artifact_root": str(store)}))
    return path


def sign(run_dir: Path, signatures: dict[str, dict | None], *, seed: int = 0, backbone: str = "embedded") -> None:
    """Rewrite the run's scores.parquet with a signature per source and metric: `signatures[source]` is the
    settings it is signed with, None for no signature."""
    scores = pl.read_parquet(run_dir / "scores.parquet").drop("signature", strict=False)
    signature = pl.Series("signature", [
        None if signatures.get(source) is None else
        make_signature(metric, "v1", backbone, None, signatures[source], seed, "0.1.0")
        for source, metric in zip(scores["source"], scores["metric"])], dtype=pl.String)
    scores.with_columns(signature).write_parquet(run_dir / "scores.parquet")


def is_signed(run_dir: Path) -> bool:
    """Whether the pipeline wrote the run's scores with signatures (a run written before they were kept has
    none)."""
    return "signature" in pl.read_parquet(run_dir / "scores.parquet").columns


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
    # each compared metric's signature (the run's own sources and the scored file carry the same one)
    assert set(record["signatures"]) == set(rows["metric"]) and record["warnings"] == []
    for metric, signature in record["signatures"].items():
        if is_signed(run_dir):
            assert signature.startswith(f"metric:{metric}.") and f"Signature: `{signature}`" in out
        else:
            assert signature is None and "Signature: none" in out
    # the scored output is now a source by name
    assert main(["compare", "--run", str(run_dir), "gold-copy", "gold", "--name", "t2", "--no-by-label"]) == 0
    rows = pl.DataFrame(json.loads((run_dir / "compare-t2" / "compare.json").read_text())["rows"])
    assert set(rows["label"]) == {"(all)"} and (rows["difference"].abs() < 1e-6).all()


def test_two_runs_are_read_as_seeds(tiny_trained_run, tmp_path):
    _, result = tiny_trained_run
    run_dir = Path(result["run_dir"])
    copy = twin(run_dir, tmp_path / "twin")
    assert main(["compare", "--run", str(run_dir), "--run", str(copy), "gold", "empty", "--out",
                 str(tmp_path / "out"), "--no-by-label", "--metrics", "rev"]) == 0
    record = json.loads((tmp_path / "out" / "compare.json").read_text())
    row = record["rows"][0]
    assert row["metric"] == "rev" and row["seeds"] == 2
    # one run copied: the same signature twice, shown once
    if is_signed(run_dir):
        assert record["signatures"]["rev"] == pl.read_parquet(run_dir / "scores.parquet").filter(
            (pl.col("metric") == "rev") & (pl.col("source") == "gold"))["signature"][0]
    else:
        assert record["signatures"]["rev"] is None
    assert row["seed_sd"] == 0  # identical seeds: no training variance, the seeds interval collapses
    assert row["seeds_low"] == row["seeds_high"] == row["difference"]


def test_sources_whose_signatures_differ_in_settings_are_refused_in_one_line(tiny_trained_run, tmp_path, capsys):
    _, result = tiny_trained_run
    run = twin(Path(result["run_dir"]), tmp_path / "twin")
    sign(run, {"gold": {"lr": 1e-3}, "leaky": {"lr": 1e-4}})
    assert main(["compare", "--run", str(run), "gold", "leaky", "--metrics", "rev", "--no-by-label"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: rev: gold and leaky in {run} were not scored the same way, "
                                               "signatures differ in settings (gold ")
    assert not (run / "compare-compare").exists()  # refused before anything was compared


def test_the_flow_refuses_too_when_started_without_the_command_line(tiny_trained_run, tmp_path):
    """A file is scored inside the flow, so its signature is checked there: the flow refuses the same way."""
    from flows.compare import compare_rationale_sources
    from larev.compare import NotComparable
    from tasks.compare import CompareParams

    _, result = tiny_trained_run
    run = twin(Path(result["run_dir"]), tmp_path / "twin")
    sign(run, {"gold": {"lr": 1e-3}, "leaky": {"lr": 1e-4}})
    with pytest.raises(NotComparable, match="rev: gold and leaky .* signatures differ in settings"):
        compare_rationale_sources(CompareParams(runs=[str(run)], sources=["gold", "leaky"], metrics=["rev"],
                                                out=str(tmp_path / "out"), progress=False))


def test_runs_that_differ_only_in_their_seed_are_compared_and_anything_else_is_refused(tiny_trained_run, tmp_path,
                                                                                         capsys):
    _, result = tiny_trained_run
    runs = [twin(Path(result["run_dir"]), tmp_path / f"seed{seed}") for seed in (0, 1)]
    for seed, run in enumerate(runs):
        sign(run, {"gold": {"lr": 1e-3}, "empty": {"lr": 1e-3}}, seed=seed)
    argv = ["compare", "--run", str(runs[0]), "--run", str(runs[1]), "gold", "empty", "--metrics", "rev",
            "--no-by-label", "--n-boot", "200"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    expected = make_signature("rev", "v1", "embedded", None, {"lr": 1e-3}, 0, "0.1.0").replace("|seed:0|",
                                                                                              "|seed:0,1|")
    assert json.loads((tmp_path / "out" / "compare.json").read_text())["signatures"] == {"rev": expected}
    assert f"Signature: `{expected}`" in out
    sign(runs[1], {"gold": {"lr": 1e-3}, "empty": {"lr": 1e-3}}, seed=1, backbone="minilm")
    assert main([*argv, "--out", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == (
        f"error: rev: runs {runs[0]} and {runs[1]} are not seeds of one protocol (only the seed may differ): "
        f"signatures differ in backbone ({runs[0]} embedded, {runs[1]} minilm), seed ({runs[0]} 0, {runs[1]} 1)")


def test_an_unsigned_source_beside_a_signed_one_is_compared_with_one_warning(tiny_trained_run, tmp_path, capsys):
    _, result = tiny_trained_run
    run = twin(Path(result["run_dir"]), tmp_path / "twin")
    sign(run, {"gold": {"lr": 1e-3}, "leaky": None})
    assert main(["compare", "--run", str(run), "gold", "leaky", "--metrics", "rev", "--no-by-label",
                 "--n-boot", "200", "--out", str(tmp_path / "out")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert warnings == [f"warning: compared without a signature check: leaky in {run} (rev) carry no signature "
                        "(scored before signatures were kept) beside signed scores; their evaluators and settings "
                        "may differ"]
    record = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert record["warnings"] == [warnings[0].removeprefix("warning: ")]
    assert "**Warning:** compared without a signature check" in (tmp_path / "out" / "compare.md").read_text()


def test_unknown_source_fails_before_any_flow_with_what_the_run_has(tiny_trained_run, capsys):
    _, result = tiny_trained_run
    assert main(["compare", "--run", result["run_dir"], "gold", "nonesuch"]) == 2
    err = capsys.readouterr().err
    assert "'nonesuch' names nothing" in err and "leaky" in err
