"""Thesis table 5.8 for any set of sources (section 5.4.5): each source's own degradations (exact texts, the gold
rationale's equal to the built-in variants), the table of each source minus them against values worked by hand, and
`larev score --degradations` wired in the score flow's parameters, form and command line, and one tiny REV-only
run scoring a two-source file with it (about 20 s)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from flows.score import ScoreParams
from larev.baselines.build import build_baselines
from larev.config import BaselineConfig, DemoDataConfig
from larev.data.demo import generate_demo
from larev.data.variants import make_variants
from larev.errors import InputError
from larev.generate.config import NAME_PATTERN
from larev.generate.degradations import (DEGRADATIONS, SEPARATOR, check_source_names, degraded_name,
                                         degraded_rationales, split_degraded, with_degradations)
from larev.generate.separations import (QUANTITIES, degradation_markdown, degradation_plot, degradation_results,
                                        degradation_table, sum_lines, wide_table)
from larev.schema import RATIONALE_SCHEMA
from tests.test_cli import printed_params


# ------------------------------------------------------------------------------------------------- degradations

@pytest.fixture
def two_sources() -> pl.DataFrame:
    """Two sources over two examples; llama explains another label than the gold one for example b."""
    return pl.DataFrame({
        "id": ["a", "b", "a", "b"],
        "source": ["gpt-4", "gpt-4", "llama", "llama"],
        "rationale": ["The surf is at a beach. ", "Sleeping is not running.", "Dogs like water.", "He may run."],
        "label": ["entailment", "contradiction", "entailment", "neutral"],
    }, schema=RATIONALE_SCHEMA)


@pytest.fixture
def baselines() -> pl.DataFrame:
    """b for every (id, label) of the file: the gold labels' and the one llama asserts for b."""
    return pl.DataFrame({"id": ["a", "b", "b"], "label": ["entailment", "contradiction", "neutral"],
                         "baseline": ["A dog runs in the surf, so it is at a beach.", "A man sleeps, not runs.",
                                      "A man sleeps; maybe he runs."]})


def test_each_sources_degradations_are_the_thesis_texts(two_sources, baselines):
    out = degraded_rationales(two_sources, baselines)
    assert out.schema == pl.Schema(RATIONALE_SCHEMA)
    assert out.rows() == [
        ("a", "gpt-4~leaky", "The answer is entailment.", "entailment"),
        ("b", "gpt-4~leaky", "The answer is contradiction.", "contradiction"),
        ("a", "gpt-4~gold_leaky", "The surf is at a beach. The answer is entailment.", "entailment"),
        ("b", "gpt-4~gold_leaky", "Sleeping is not running. The answer is contradiction.", "contradiction"),
        ("a", "gpt-4~vacuous", "A dog runs in the surf, so it is at a beach.", "entailment"),
        ("b", "gpt-4~vacuous", "A man sleeps, not runs.", "contradiction"),
        ("a", "llama~leaky", "The answer is entailment.", "entailment"),
        ("b", "llama~leaky", "The answer is neutral.", "neutral"),  # the label the row explains
        ("a", "llama~gold_leaky", "Dogs like water. The answer is entailment.", "entailment"),
        ("b", "llama~gold_leaky", "He may run. The answer is neutral.", "neutral"),
        ("a", "llama~vacuous", "A dog runs in the surf, so it is at a beach.", "entailment"),
        ("b", "llama~vacuous", "A man sleeps; maybe he runs.", "neutral"),  # b for the row's label
    ]
    both = with_degradations(two_sources, baselines)
    assert both.head(4).equals(two_sources) and both.slice(4).equals(out)


def test_the_gold_rationales_degradations_are_the_built_in_variants():
    demo = generate_demo(DemoDataConfig(n_train=10, n_validation=5, n_test=12))
    test = demo.filter(pl.col("split") == "test")
    b = build_baselines(test, BaselineConfig(), progress=False).with_columns(label=test["label"])
    gold = test.select("id", pl.lit("gold").alias("source"), "rationale", "label")
    ours = degraded_rationales(gold, b).with_columns(
        pl.col("source").map_elements(lambda s: split_degraded(s)[1], return_dtype=pl.String))
    assert ours.equals(make_variants(test, b.select("id", "baseline"), DEGRADATIONS))


def test_degradation_names_cannot_clash_with_source_names():
    assert degraded_name("embedded-1of8", "gold_leaky") == "embedded-1of8~gold_leaky"
    assert split_degraded("embedded-1of8~gold_leaky") == ("embedded-1of8", "gold_leaky")
    assert split_degraded("gpt-4") is None and split_degraded("a~b") is None and split_degraded("~leaky") is None
    assert DEGRADATIONS == ("leaky", "gold_leaky", "vacuous")
    assert re.fullmatch(NAME_PATTERN, f"a{SEPARATOR}leaky") is None  # no generator names a source so
    with pytest.raises(InputError, match=r"\['my~model'\] hold '~'"):
        check_source_names(["gpt-4", "my~model"], file="gen.jsonl")
    rows = pl.DataFrame({"id": ["a"], "source": ["x~leaky"], "rationale": ["r"], "label": ["neutral"]})
    with pytest.raises(InputError, match="hold '~'"):
        degraded_rationales(rows, pl.DataFrame({"id": ["a"], "label": ["neutral"], "baseline": ["b"]}))


def test_a_row_without_its_baseline_is_refused(two_sources, baselines):
    with pytest.raises(InputError, match="no baseline for example 'b'"):
        degraded_rationales(two_sources, baselines.filter(pl.col("label") != "neutral"))


# ---------------------------------------------------------------------------------------------------- the table

def score_frame() -> pl.DataFrame:
    """Hand-made pointwise scores over ids x, y, z: source m and its degradations (REV; LAREV twice REV), source n
    whose separations are the same on every id, and source o without degradations (not in the table)."""
    rev = {"m": [1.0, 2.0, 3.0], "m~leaky": [0.5, 0.5, 0.5], "m~gold_leaky": [1.0, 1.0, 2.5],
           "m~vacuous": [0.0, -1.0, 1.0], "n": [0.0, 1.0, 2.0], "n~leaky": [1.0, 2.0, 3.0],
           "n~gold_leaky": [0.0, 1.0, 2.0], "n~vacuous": [-1.0, 0.0, 1.0], "o": [9.0, 9.0, 9.0]}
    rows = [{"id": i, "metric": metric, "source": s, "score": factor * v, "aggregate": "mean"}
            for metric, factor in (("rev", 1.0), ("larev", 2.0)) for s, values in rev.items()
            for i, v in zip("xyz", values)]
    return pl.DataFrame(rows)


def test_the_table_is_each_source_minus_its_degradations_and_their_sum_worked_by_hand():
    table = degradation_table(score_frame(), n_boot=200)
    assert table.columns == ["metric", "source", "quantity", "estimate", "ci_low", "ci_high", "n"]
    assert table.select("metric", "source").unique(maintain_order=True).rows() == [
        ("rev", "m"), ("rev", "n"), ("larev", "m"), ("larev", "n")]
    got = {(m, s, q): e for m, s, q, e in table.select("metric", "source", "quantity", "estimate").iter_rows()}
    # m: r = mean(1, 2, 3) = 2; leaky 0.5, gold_leaky 1.5, vacuous 0 -> 1.5, 0.5, 2.0; SUM 4.0
    by_hand = {"m": {"r": 2.0, "r-leaky": 1.5, "r-gold_leaky": 0.5, "r-vacuous": 2.0},
               "n": {"r": 1.0, "r-leaky": -1.0, "r-gold_leaky": 0.0, "r-vacuous": 1.0}}
    for metric, factor in (("rev", 1.0), ("larev", 2.0)):
        for source, figures in by_hand.items():
            for quantity, value in figures.items():
                assert got[(metric, source, quantity)] == pytest.approx(factor * value)
            separations = [got[(metric, source, f"r-{d}")] for d in DEGRADATIONS]
            assert got[(metric, source, "SUM")] == pytest.approx(sum(separations))
    assert got[("rev", "m", "SUM")] == pytest.approx(4.0) and got[("rev", "n", "SUM")] == pytest.approx(0.0)
    assert (table["n"] == 3).all()
    # n's separations are the same on every id: paired over the ids, each interval is that value, width 0
    n_rows = table.filter((pl.col("source") == "n") & (pl.col("quantity") != "r"))
    assert (n_rows["ci_low"] - n_rows["estimate"]).abs().max() < 1e-12
    assert (n_rows["ci_high"] - n_rows["estimate"]).abs().max() < 1e-12
    m_sum = table.filter((pl.col("source") == "m") & (pl.col("quantity") == "SUM") & (pl.col("metric") == "rev"))
    assert m_sum["ci_low"].item() <= 4.0 <= m_sum["ci_high"].item()


def test_the_table_in_report_results_json_the_terminal_and_a_figure():
    table = degradation_table(score_frame(), n_boot=200)
    wide = wide_table(table)
    assert wide.columns == ["metric", "source", *QUANTITIES, "n"] and wide.height == 4
    assert wide.filter((pl.col("metric") == "rev") & (pl.col("source") == "n"))["r-leaky"].item() == \
        "-1.000 [-1.000, -1.000]"
    markdown = degradation_markdown(table)
    assert markdown.startswith("## Each source against its own degradations (thesis table 5.8)")
    assert "| metric | source | r | r-leaky | r-gold_leaky | r-vacuous | SUM | n |" in markdown
    results = json.loads(json.dumps(degradation_results(table, n_boot=200)))
    assert results["table_5_8"]["rev"]["m"]["SUM"]["estimate"] == pytest.approx(4.0)
    assert results["table_5_8"]["larev"]["n"]["n"] == 3 and results["interval"]["n_boot"] == 200
    assert list(results["table_5_8"]["rev"]["m"]) == ["n", *QUANTITIES]
    lines = sum_lines(results)
    assert lines[1].split() == ["source", "rev", "larev"] and lines[2].split() == ["m", "+4.000", "+8.000"]
    assert degradation_plot(table)[:4] == b"\x89PNG"
    assert degradation_markdown(degradation_table(score_frame().filter(pl.col("source") == "o"))) == ""


# ------------------------------------------------------------------------------------------ the score flow's option

def test_the_option_is_off_by_default_in_the_form_and_on_the_command_line(capsys):
    assert ScoreParams(run="r", rationales="f.jsonl").degradations is False
    assert "thesis table 5.8" in ScoreParams.model_json_schema()["properties"]["degradations"]["description"]
    params = printed_params(capsys, "score", "--run", "r", "--rationales", "f.jsonl", "--degradations")
    assert params["degradations"] is True
    assert printed_params(capsys, "score", "--run", "r", "--rationales", "f.jsonl")["degradations"] is False
    with pytest.raises(ValidationError, match="degradations pair each source's rows"):
        ScoreParams(run="r", rationales="f.jsonl", degradations=True, scale_out={"shard_rows": 100})


def test_the_score_flows_ui_form_shows_the_option():
    from flows.score import score_rationales

    form = score_rationales.parameters.model_dump()["definitions"]["ScoreParams"]["properties"]
    assert form["degradations"]["default"] is False


# ------------------------------------------------------------------------------------------- the score flow, tiny

@pytest.mark.usefixtures("prefect_harness")
def test_the_score_flow_scores_each_source_against_its_degradations(tmp_path, capsys):
    """A tiny REV-only run, then a two-source file scored with `larev score --degradations`: four times the rows,
    the table in report.md, results.json, degradations.png and the terminal, the leaderboard entries of the file's
    own sources only; scored again without the option, the table's files are gone."""
    from flows.cli import main
    from flows.pipeline import larev_pipeline
    from flows.score import score_rationales
    from larev.leaderboard import entry_name
    from tests.test_flows import tiny_params

    run = larev_pipeline(tiny_params(tmp_path, larev={"enabled": False}, rora={"enabled": False},
                                     run_name="tiny-degradations"))
    test = pl.read_parquet(run["refs"]["examples"].uri).filter(pl.col("split") == "test")
    sources = pl.concat([test.select("id", pl.lit(s).alias("source"), "rationale", "label") for s in ("m1", "m2")])
    path = tmp_path / "two.jsonl"
    sources.write_ndjson(path)
    capsys.readouterr()
    assert main(["score", "--run", run["run_dir"], "--rationales", str(path), "--name", "two", "--degradations",
                 "--no-progress", "--server", "auto"]) == 0
    printed = capsys.readouterr().out
    assert "SUM (thesis table 5.8)" in printed and "m1~" not in printed
    out = tmp_path / "runs" / "tiny-degradations" / "two"
    scores = pl.read_parquet(out / "scores.parquet")
    named = {degraded_name(s, d) for s in ("m1", "m2") for d in DEGRADATIONS}
    assert set(scores["source"]) == {"m1", "m2", *named} and scores.height == 8 * test.height
    gold_leaky = scores.filter(pl.col("source") == "m1~gold_leaky").sort("id")
    assert gold_leaky["rationale"].to_list() == [f"{r.rstrip()} The answer is {y}." for r, y in
                                                 test.sort("id").select("rationale", "label").iter_rows()]
    results = json.loads((out / "results.json").read_text())
    assert list(results["table_5_8"]) == ["rev"] and list(results["table_5_8"]["rev"]) == ["m1", "m2"]
    m1 = results["table_5_8"]["rev"]["m1"]
    assert m1["SUM"]["estimate"] == pytest.approx(sum(m1[f"r-{d}"]["estimate"] for d in DEGRADATIONS))
    assert m1 == results["table_5_8"]["rev"]["m2"]  # the same rationales, the same figures
    assert "(thesis table 5.8)" in (out / "report.md").read_text()
    assert (out / "degradations.png").read_bytes()[:4] == b"\x89PNG"
    board = pl.read_parquet(tmp_path / "runs" / "tiny-degradations" / "leaderboard.parquet").filter(
        pl.col("origin") == "score")
    assert set(board["entry"]) == {entry_name("two", s, 2) for s in ("m1", "m2")} == {"two:m1", "two:m2"}

    bad = tmp_path / "bad.jsonl"
    sources.with_columns(pl.col("source").replace({"m2": "my~model"})).write_ndjson(bad)
    assert main(["score", "--run", run["run_dir"], "--rationales", str(bad), "--name", "bad", "--degradations",
                 "--server", "auto"]) == 2
    assert "['my~model'] hold '~'" in capsys.readouterr().err and not (out.parent / "bad").exists()

    again = score_rationales(ScoreParams(run=run["run_dir"], rationales=str(path), name="two", progress=False))
    assert Path(again["run_dir"]) == out and not (out / "results.json").exists()
    assert not (out / "degradations.png").exists() and "table 5.8" not in (out / "report.md").read_text()
    assert set(pl.read_parquet(out / "scores.parquet")["source"]) == {"m1", "m2"}
