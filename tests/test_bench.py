"""bench quality's results.json layout from a summary."""

from __future__ import annotations

import json

import polars as pl
import pytest

from larev.bench.quality import quality_markdown, quality_results


def test_results_layout():
    rows = []
    for metric, base in (("rev", 0.0), ("larev", 1.0)):
        for source, score, acc in (("gold", 2.0, 0.9), ("leaky", 0.5, 0.8), ("gold_leaky", 1.5, 0.9),
                                   ("vacuous", 0.0, 0.5), ("my-model", 9.0, 1.0)):
            rows.append({"metric": metric, "source": source, "score": score + base, "accuracy_with": acc,
                         "accuracy_base": 0.5, "n": 10})
    summary = pl.DataFrame(rows)
    results = quality_results(summary, n_test=10, seconds=12.34)
    assert set(results) == {"scores", "accuracy", "chance", "reads", "below_chance", "score_clipped",
                            "score_vs_empty", "separations", "unread", "n_test", "seconds"}
    assert results["scores"]["larev"] == {"gold": 3.0, "leaky": 1.5, "gold_leaky": 2.5, "vacuous": 1.0}
    assert results["accuracy"]["rev"]["vacuous"] == 0.5
    assert results["separations"]["rev"] == pytest.approx(
        {"gold-leaky": 1.5, "gold-gold_leaky": 0.5, "gold-vacuous": 2.0, "SUM": 4.0})
    assert results["n_test"] == 10 and results["seconds"] == 12.3
    md = quality_markdown(summary, results, title="t")
    assert "| larev | gold | 3.000 | n/a | 0.900 | n/a | n/a | n/a | n/a |" in md  # no n_labels: figures unknown
    assert md.index("## What each metric says") < md.index("## Separations")


def _control_scores(shift: float) -> pl.DataFrame:
    """Score rows of larev and two controls over 40 examples, K = 3: control_phi equals larev, control_r_only is
    larev shifted by `shift` on gold only."""
    rows = []
    for metric, gold_shift in (("larev", 0.0), ("control_phi", 0.0), ("control_r_only", shift)):
        for i in range(40):
            for k, (source, logp, correct) in enumerate((("gold", -0.2 + gold_shift, i < 36),
                                                         ("borrowed", -0.3, i < 35), ("empty", -0.9, i < 20),
                                                         ("leaky", -3.0, i < 13))):
                noise = (i * (k + 1) % 5) * 0.02
                rows.append({"id": f"e{i}", "metric": metric, "source": source, "label": "y",
                             "logp_with": logp + noise, "logp_base": -0.1, "score": logp + noise + 0.1,
                             "correct_with": correct, "correct_base": True, "aggregate": "mean", "n_labels": 3})
    return pl.DataFrame(rows)


def test_controls_go_apart_and_the_report_says_which_match():
    from larev.metrics.bootstrap import bootstrap_intervals
    from larev.metrics.scores import summarise

    scores = _control_scores(-1.0)
    summary = summarise(scores)
    results = quality_results(summary, n_test=40, seconds=1.0, intervals=bootstrap_intervals(scores, n_boot=200))
    assert set(results["scores"]) == {"larev"}
    assert set(results["controls"]) == {"phi", "r_only"}
    phi, r_only = results["controls"]["phi"], results["controls"]["r_only"]
    assert phi["scores"] == pytest.approx(results["scores"]["larev"])
    assert phi["separations"] == pytest.approx(results["separations"]["larev"])
    assert r_only["separations"]["gold-borrowed"] == pytest.approx(results["separations"]["larev"]["gold-borrowed"]
                                                                   - 1.0)
    assert results["unread"]["larev"] == ["leaky"]  # 13 of 40 right at K = 3: chance
    md = quality_markdown(summary, results, title="t")
    assert "## LAREV against its controls" in md
    assert "Control phi matches LAREV on gold-borrowed, gold-leaky, gold-empty, SUM" in md
    assert "Control r_only matches LAREV on gold-leaky" not in md  # its gold is 1 nat lower: every separation
    assert "Control r_only differs from LAREV on every one of" in md


def test_controls_combine_over_seeds():
    from larev.bench.quality import combine_seeds, seeds_markdown
    from larev.metrics.scores import summarise

    per_seed = {s: quality_results(summarise(_control_scores(shift)), n_test=40, seconds=1.0)
                for s, shift in ((0, -1.0), (1, -0.5))}
    combined = combine_seeds(per_seed)
    r_only = combined["controls"]["r_only"]
    larev = combined["separations"]["larev"]["gold-borrowed"]
    assert r_only["separations"]["gold-borrowed"] == pytest.approx(larev - 0.75)  # minus the mean shift
    assert r_only["seed_sd"]["gold-borrowed"] == pytest.approx(0.5 / 2 ** 0.5)
    assert r_only["per_seed"]["1"]["separations"]["gold-borrowed"] == pytest.approx(larev - 0.5)
    assert combined["controls"]["phi"]["seed_sd"]["gold-borrowed"] == pytest.approx(0.0)
    assert combined["reads"]["larev"]["leaky"] == 0.0 and combined["unread"]["larev"] == ["leaky"]
    md = seeds_markdown(combined, title="t")
    assert f"| control r_only | {larev - 0.75:.3f} ± 0.354 |" in md


def test_undefined_las_is_null_in_results():
    import json

    summary = pl.DataFrame({"metric": ["las", "las"], "source": ["gold", "leaky"], "score": [0.1, float("nan")],
                            "accuracy_with": [0.9, 1.0], "accuracy_base": [0.5, 0.5], "n": [10, 10]})
    results = quality_results(summary, n_test=10, seconds=1.0)
    assert results["scores"]["las"] == {"gold": 0.1, "leaky": None}
    assert results["separations"]["las"]["gold-leaky"] is None
    assert "NaN" not in json.dumps(results)


def test_results_carry_intervals_and_markdown_shows_them():
    from larev.metrics.bootstrap import bootstrap_intervals

    rows = [{"id": f"e{i}", "metric": "rora", "source": s, "score": v + (i % 3) * 0.1, "correct_with": True,
             "correct_base": False, "leaks": None}
            for i in range(30) for s, v in (("gold", 1.0), ("leaky", 0.0), ("gold_leaky", 0.9), ("vacuous", 0.1))]
    scores = pl.DataFrame(rows, schema_overrides={"leaks": pl.Boolean})
    from larev.metrics.scores import summarise

    summary = summarise(scores)
    intervals = bootstrap_intervals(scores, n_boot=100)
    results = quality_results(summary, n_test=30, seconds=None, intervals=intervals)
    low, high = results["intervals"]["rora"]["SUM"]
    assert low == pytest.approx(results["separations"]["rora"]["SUM"]) == pytest.approx(high)  # paired, constant
    md = quality_markdown(summary, results, title="t")
    assert "1.000 [1.000, 1.000]" in md and "bootstrap 95 % intervals" in md


def test_speed_verdicts_and_the_naive_scorer_computes_the_same_quantity():
    import numpy as np

    from larev.bench import speed
    from larev.models.evaluator import score_labels
    from tests.helpers import tiny_evaluator

    v = speed.verdicts({"score_batched_vs_naive": 12.0, "irm_step_vs_erm_step_per_row": 1.3,
                        "demo_cold_seconds": 200.0})
    assert v["score_batched_vs_naive"] == {"value": 12.0, "target": ">= 10.0", "meets": True}
    assert v["irm_step_vs_erm_step_per_row"]["meets"] is False and v["ig_vs_fwdbwd_bound"]["meets"] is None
    assert v["demo_cold_seconds"] == {"value": 200.0, "target": "<= 240.0", "meets": True}
    texts = ["rationale: a b baseline: c implies d", "rationale: e baseline: f contradicts g"]
    ev = tiny_evaluator(texts + ["entailment", "contradiction", "neutral"])
    labels = ["entailment", "neutral"]
    batched = score_labels(ev, texts, labels, [["entailment", "contradiction", "neutral"]] * 2).logp
    np.testing.assert_allclose(speed.naive_scores(ev, texts, labels), batched, atol=1e-5)


def test_ig_floor_runs_the_same_passes_it_times(tmp_path):
    from larev.bench import speed
    from tests.helpers import tiny_evaluator

    texts = ["baseline: c implies d", "baseline: f contradicts g h", "baseline: i is not related to j"]
    ev = tiny_evaluator(texts + ["entailment", "contradiction", "neutral"])
    before = [p.requires_grad for p in ev.model.parameters()]
    seconds = speed.fwdbwd_bound_seconds(ev, texts, ["entailment", "contradiction", "neutral"], n_steps=4,
                                         batch_size=2)
    assert seconds > 0
    assert [p.requires_grad for p in ev.model.parameters()] == before  # parameter gradients switched back on


def test_seed_minutes_names_the_protocol_and_dataset_a_results_file_ran(tmp_path):
    import json

    import pytest

    from flows.cli.commands import seed_minutes

    def results(metrics, seconds=1200.0, seeds=(0, 1)):
        path = tmp_path / f"{'-'.join(metrics)}.json"
        path.write_text(json.dumps({"scores": {m: {} for m in metrics}, "seconds": seconds, "seeds": list(seeds)}))
        return path

    full = seed_minutes(results(["rev", "larev", "rora", "rq", "las"]))
    assert full["esnli_seed_minutes"] == pytest.approx(10.0)  # 1,200 s over 2 seeds
    assert seed_minutes(results(["rev", "larev"], seeds=(0,)))["esnli_rev_larev_seed_minutes"] == 20.0
    cose = seed_minutes(results(["rev", "larev"], seconds=1800.0, seeds=(0,)), dataset="cose")
    assert cose == {"cose_rev_larev_seed_minutes": 30.0, "cose_rev_larev_seed_minutes_source": cose[
        "cose_rev_larev_seed_minutes_source"]}
    with pytest.raises(SystemExit, match="expected every metric"):
        seed_minutes(results(["rev", "rora"]))
    with pytest.raises(SystemExit, match="no such file"):
        seed_minutes(tmp_path / "missing.json")


def _seed_results(gold: float, leaky: float, sd_shift: float = 0.0) -> dict:
    scores = {"larev": {"gold": gold, "leaky": leaky, "gold_leaky": gold, "vacuous": 0.0}}
    seps = {"larev": {"gold-leaky": gold - leaky, "gold-gold_leaky": 0.0, "gold-vacuous": gold,
                      "SUM": 2 * gold - leaky}}
    return {"scores": scores, "accuracy": {"larev": {"gold": 0.9 + sd_shift}}, "separations": seps, "n_test": 5,
            "seconds": 10.0, "leakage": {"larev": {"residual_accuracy": 0.4 + sd_shift, "converged": True,
                                                   "chosen": "so, since"}}}


def test_combined_seeds_are_means_with_sample_sd_and_positive_only_when_every_seed_agrees():
    from larev.bench.quality import combine_seeds, seeds_markdown

    combined = combine_seeds({0: _seed_results(1.0, 0.5), 1: _seed_results(2.0, 2.5, 0.1)})
    assert combined["seeds"] == [0, 1]
    assert combined["scores"]["larev"]["gold"] == pytest.approx(1.5)
    # sample sd of (1, 2) = sqrt(0.5); separations gold-leaky are 0.5 and -0.5: mean 0, sd sqrt(0.5)
    assert combined["seed_sd"]["larev"]["gold"] == pytest.approx(0.5 ** 0.5)
    assert combined["separations"]["larev"]["gold-leaky"] == pytest.approx(0.0)
    assert combined["seed_sd"]["larev"]["gold-leaky"] == pytest.approx(0.5 ** 0.5)
    assert combined["positive_in_every_seed"]["larev"] == {"gold-leaky": False, "gold-gold_leaky": False,
                                                           "gold-vacuous": True, "SUM": True}
    assert combined["per_seed"]["1"]["separations"]["larev"]["gold-leaky"] == pytest.approx(-0.5)
    assert combined["leakage"]["larev"]["residual_accuracy"] == pytest.approx(0.45)
    assert combined["seconds"] == 20.0
    md = seeds_markdown(combined, title="t")
    assert "1.500 ± 0.707" in md and "training variance" in md and "gold-vacuous" in md


def test_reseeded_moves_every_training_seed_but_not_the_data():
    from flows.pipeline import PipelineParams
    from larev.bench.quality import reseeded

    params = PipelineParams()
    moved = reseeded(params, 3)
    assert moved.train.seed == params.train.seed + 3
    assert moved.larev.la_train.seed == params.larev.la_train.seed + 3
    assert moved.baselines.seed == params.baselines.seed + 3
    assert moved.larev.attribution.spans.probe.seed == params.larev.attribution.spans.probe.seed + 3
    assert moved.data.demo.seed == params.data.demo.seed
    assert reseeded(params, 0) is params


def test_the_demo_peak_rss_is_the_demos_not_the_benchmarks():
    """A forked child's ru_maxrss starts at its parent's resident size: with 800 MiB resident here, a child that
    only prints the help must still measure well under that."""
    from flows.cli.commands import _timed_run

    held = bytearray(800 * 2**20)
    held[::4096] = bytes(len(range(0, len(held), 4096)))  # touch every page: resident, not just reserved
    seconds, peak_gib = _timed_run(["--help"])
    assert held[0] == 0 and seconds > 0
    assert peak_gib < 0.5, f"{peak_gib:.2f} GiB: the benchmark's own memory leaked into the child's figure"


def test_report_rows_write_a_subset_of_the_test_rows_with_its_own_summary(tmp_path):
    """`--report-rows NAME=START:STOP`: results of the test rows at those positions of the run's test split
    alone, the summary recomputed from their scores (a tuning split and a test split from one training)."""
    import json

    from larev.bench.quality import write_quality_outputs
    from larev.errors import ConfigError
    from larev.metrics.scores import summarise

    scores = _control_scores(0.0).filter(pl.col("metric") == "larev")
    scores = scores.with_columns(  # rows e0..e19 score 1 nat more than e20..e39 on gold
        score=pl.col("score") + pl.when((pl.col("source") == "gold") & (pl.col("id").str.slice(1).cast(int) < 20))
        .then(1.0).otherwise(0.0))
    run = tmp_path / "run"
    run.mkdir()
    scores.write_parquet(run / "scores.parquet")
    summarise(scores).write_parquet(run / "summary.parquet")
    pl.DataFrame({"id": [f"e{i}" for i in range(40)]}).write_ndjson(run / "test_split.jsonl")
    write_quality_outputs(run, tmp_path / "all", title="t", seconds=1.0, n_boot=0)
    write_quality_outputs(run, tmp_path / "tune", title="t", seconds=1.0, n_boot=0, rows=slice(None, 20))
    write_quality_outputs(run, tmp_path / "test", title="t", seconds=1.0, n_boot=0, rows=slice(20, None))
    gold = {name: json.loads((tmp_path / name / "results.json").read_text())["scores"]["larev"]["gold"]
            for name in ("all", "tune", "test")}
    expected = {name: scores.filter(pl.col("source") == "gold", pl.col("id").is_in(ids))["score"].mean()
                for name, ids in (("tune", [f"e{i}" for i in range(20)]), ("test", [f"e{i}" for i in range(20, 40)]))}
    assert gold["tune"] == pytest.approx(expected["tune"]) and gold["test"] == pytest.approx(expected["test"])
    assert gold["tune"] - gold["test"] == pytest.approx(1.0, abs=0.05)
    assert gold["all"] == pytest.approx((gold["tune"] + gold["test"]) / 2)
    assert json.loads((tmp_path / "tune" / "results.json").read_text())["n_test"] == 20
    with pytest.raises(ConfigError, match="selects none"):
        write_quality_outputs(run, tmp_path / "none", title="t", seconds=1.0, n_boot=0, rows=slice(40, None))


def test_bench_quality_runs_each_seed_through_the_per_seed_flow_and_a_rerun_is_fully_cached(tmp_path,
                                                                                             prefect_harness):
    """Two seeds of `bench quality` are two flow runs of the benchmark-seed flow (the one `bench validity` runs),
    each seed's results in OUT/seed-<k>; the same benchmark again reads every step of every seed from cache and
    writes the same results."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    from flows.quality import QualityParams, quality_benchmark
    from tests.test_flows import tiny_params

    params = QualityParams(pipeline=tiny_params(tmp_path, run_name="seeds-bench"), out=str(tmp_path / "out"),
                           seeds=2, bootstrap=10, stress=False)
    first = quality_benchmark(params)
    assert [run["seed"] for run in first["runs"]] == [0, 1] and first["n_seeds"] == 2
    assert all(not all(record["cached"] for record in run["steps"]) for run in first["runs"])
    with get_client(sync_client=True) as client:
        names = {run.name for run in client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["benchmark-seed"])), limit=200)}
    assert {"bench-quality-seeds-bench-seed0", "bench-quality-seeds-bench-seed1"} <= names
    results = (tmp_path / "out" / "results.json").read_text()
    second = quality_benchmark(params)
    assert [r["step"] for run in second["runs"] for r in run["steps"] if not r["cached"]] == []
    assert json.loads((tmp_path / "out" / "seed-1" / "results.json").read_text())["scores"]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["scores"] == json.loads(results)["scores"]
