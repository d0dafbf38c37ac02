"""`larev bench validity` end to end on a tiny protocol (demo sentences in files, a tiny model, two seeds): the
results.json shape of issue 53, every criterion for every scorer, and the report split's ledger line; and the CLI's
refusals before any step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from flows.cli import main
from larev.config import DemoDataConfig
from larev.data.demo import generate_demo
from larev.validity.protocol import protocol_digest
from larev.validity.report import cell_text
from larev.validity.ledger import read_ledger

REPO = Path(__file__).resolve().parents[1]
TINY_SETTINGS = {"model.d_model": 16, "model.d_ff": 32, "model.num_layers": 1, "model.num_heads": 2, "model.d_kv": 8,
                 "train.epochs": 1, "train.batch_size": 16, "larev.attribution.n_steps": 4,
                 "larev.probe_train.epochs": 1, "larev.la_train.epochs": 1, "larev.la_train.batch_size": 8,
                 "larev.la_min_steps": 0,
                 # LAREV's weights before the tune split's decision, so its ablations differ from it here
                 "larev.objective.lambda_irm": 1.0, "larev.objective.lambda_probe": 0.005}


# a scorer read on both splits in a run of its own, deciding nothing
ARMS = {"larev@irm-arm": {"larev.objective.lambda_irm": 2}}


# generators of known quality: a tiny trained one (two epochs) above two known defects (no order between them)
GENERATORS = [{"kind": "embedded", "name": "tiny-t5", "train": {"epochs": 2}}, ["hypothesis-copy", "label-only"]]


# LAREV's default decided between an ablation the run scores and a candidate run of its own (tune split only)
DECISIONS = {"larev": {"larev_no_irm": {"larev.objective.lambda_irm": 0},
                       "larev@irm-3": {"larev.objective.lambda_irm": 3},
                       # the signal: trains on other instances' rationales, so never judged on borrowed ones
                       "larev@mm": {"larev.lambda_mismatched": 1.0}},
             "rora": {"rora@erm": {"rora.objective.lambda_irm": 0}}}  # not run: the runs below leave RORA out


def _files(root: Path) -> tuple[Path, Path]:
    """An NLI examples file (train rows, then the test rows; a second explanation on every row) and an
    acceptability file on 24 new instances, two candidates each, three annotators."""
    demo = generate_demo(DemoDataConfig(n_train=70, n_validation=5, n_test=40, seed=5))
    rows = demo.select("id", "premise", "hypothesis", "label", "rationale").with_columns(
        rationale_2=pl.col("rationale").str.replace(r"^(\S+)", "indeed $1"))
    data = root / "nli.parquet"
    rows.write_parquet(data)
    rng = np.random.default_rng(0)
    human = []
    for k, ex in enumerate(rows.tail(24).iter_rows(named=True)):
        for candidate, text in ((1, ex["rationale"]), (2, f"It is {ex['label']}.")):
            for annotator in range(3):
                human.append({"id": f"h{k}", "premise": ex["premise"], "hypothesis": ex["hypothesis"],
                              "label": ex["label"], "candidate": candidate, "rationale": text,
                              "annotator": annotator, "acceptable": int(rng.random() < (0.8 if candidate == 1 else 0.3)),
                              "gpt3_nll": float(candidate) + float(rng.random())})
    acceptability = root / "tiny_acceptability.parquet"
    pl.DataFrame(human).write_parquet(acceptability)
    return data, acceptability


def _protocol(root: Path, data: Path, human: Path, controls: bool = True) -> Path:
    """The tiny protocol; `controls=False` leaves LAREV's controls and ablations out, as a protocol that decides
    larev in runs of its own does."""
    raw = yaml.safe_load((REPO / "protocols" / "validity.yaml").read_text())
    raw["seeds"], raw["bootstrap"] = [0, 1], 50
    raw["tasks"] = {"nli": {"data": str(data), "train_rows": ":75", "splits": {"tune": "75:95", "report": "95:115"},
                            "human": [str(human)], "generators": GENERATORS, "decisions": DECISIONS,
                            "arms": ARMS}}
    raw["scorers"]["controls"], raw["scorers"]["ablations"] = (["erm_envs", "phi"], ["no_irm", "no_probe"]) \
        if controls else ([], [])
    if not controls:  # no ablation left to be a candidate
        raw["tasks"]["nli"]["decisions"] = {"larev": {k: v for k, v in DECISIONS["larev"].items() if "@" in k},
                                            "rora": DECISIONS["rora"]}
    raw["trained_on"]["larev@mm"] = ["borrowed", "borrowed_other"]
    path = root / "validity.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _tiny_run(root: Path, split: str, beside: Path | None = None, controls: bool = True) -> tuple[Path, dict]:
    """`validity_benchmark` on the tiny protocol's `split` (REV and LAREV, tiny models) under `root`."""
    from flows.validity import ValidityParams, validity_benchmark

    data, human = _files(root)
    protocol = _protocol(root, data, human, controls)
    params = ValidityParams(protocol=str(protocol), split=split, out=str(root / "out"), metrics=["rev", "larev"],
                            overrides=TINY_SETTINGS, artifact_root=str(root / "store"), run_dir=str(root / "runs"),
                            ledger=str(root / "ledger.jsonl"), beside=str(beside) if beside else None,
                            progress=False)
    return protocol, validity_benchmark(params)


# a tune run's results of the tiny protocol, for the report run to be set beside: REV at an AUROC of 0.9
TUNE_AUROC = {"value": 0.9, "low": 0.8, "high": 0.95, "met": True}


@pytest.fixture(scope="module")
def report_run(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("validity")
    tune = root / "tune-results.json"
    from larev.validity.ledger import begin_reading

    digest = protocol_digest(_protocol(root, *_files(root), controls=False))
    begin_reading(root / "ledger.jsonl", protocol=digest, protocol_name="validity-v1", task="nli", split="report",
                  seeds=[0, 1], backbone="embedded", partial=True, commit="0000000", out="elsewhere")  # then killed
    tune.write_text(json.dumps({"protocol": digest, "task": "nli",
                                "split": "tune", "commit": "abc1234", "seeds": [0, 1],
                                "scorers": {"rev": {"acceptability_auroc/tiny_acceptability": TUNE_AUROC}},
                                "best": {}, "decisions": {"larev": {"chosen": "larev@mm"}}}))
    return root, *_tiny_run(root, "report", beside=tune, controls=False)


@pytest.fixture(scope="module")
def tune_run(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("validity-tune")
    return root, _tiny_run(root, "tune")[1]["results"]


def test_the_tune_split_scores_each_decision_candidate_and_decides(tune_run):
    root, results = tune_run
    decision = results["decisions"]["larev"]
    assert list(decision["candidates"]) == ["larev_no_irm", "larev@irm-3", "larev@mm"]
    for candidate in decision["candidates"].values():
        assert candidate["scored"] and candidate["criteria"] > 0
        assert candidate["margin"] == len(candidate["better"]) - len(candidate["worse"])
    winners = [n for n, c in decision["candidates"].items() if len(c["better"]) > len(c["worse"])]
    assert decision["chosen"] == (max(winners, key=lambda n: decision["candidates"][n]["margin"]) if winners
                                  else None)  # the rule, read back from the counts it wrote
    assert "rora" not in results["decisions"] and "rora@erm" not in results["scorers"]
    assert not list((root / "runs").glob("*rora-at-erm*"))  # a candidate of a metric the run leaves out
    # the candidate run: its own run directory, its metric's scores under its name, judged like any scorer
    assert (root / "runs" / "validity-nli-tune-seed1-larev-at-irm-3" / "run.json").is_file()
    assert set(results["scorers"]["larev@irm-3"]) == set(results["scorers"]["larev"])
    for seed in (0, 1):
        scores = pl.read_parquet(root / "out" / f"seed-{seed}" / "scores.parquet")
        mine, default = (scores.filter(pl.col("metric") == m).sort("id", "source") for m in ("larev@irm-3", "larev"))
        assert mine.select("id", "source").equals(default.select("id", "source"))
        assert not np.allclose(mine["score"], default["score"])  # another phi_LA
        human = pl.read_parquet(root / "out" / f"seed-{seed}" / "human-tiny_acceptability.parquet")
        assert "larev@irm-3" in human["metric"].to_list()
        signature = results["signatures"][str(seed)]["larev@irm-3"]
        assert signature.startswith("metric:larev.v1|") and signature != results["signatures"][str(seed)]["larev"]
    assert results["seconds"]["seed-0-larev@irm-3-pipeline"] > 0
    page = (root / "out" / "results.md").read_text()
    assert "## Defaults decided on this split" in page and "larev@irm-3 (`larev.objective.lambda_irm=3`)" in page
    assert not (root / "ledger.jsonl").exists()  # the tune split is not recorded


def test_a_scorer_trained_with_the_signal_is_not_judged_on_the_kinds_it_resembles(tune_run):
    """larev@mm trains on other instances' rationales: its cells on the borrowed variants are marked and judged
    nothing, and they count neither for nor against it in its decision; its other cells are judged as larev's."""
    _, results = tune_run
    mine, default = results["scorers"]["larev@mm"], results["scorers"]["larev"]
    for cell in ("variant/borrowed", "variant_order/borrowed"):
        assert mine[cell]["trained_on"] is True and mine[cell]["met"] is None
        assert "trained_on" not in default[cell]
    assert "trained_on" not in mine["perturb/shuffled"] and mine["perturb/shuffled"]["met"] in (True, False)
    verdict = results["decisions"]["larev"]["candidates"]["larev@mm"]
    assert not [c for c in verdict["better"] + verdict["worse"] if "borrowed" in c]


def test_an_arm_is_scored_on_both_splits_and_decides_nothing(tune_run, report_run):
    """The arm runs in a run of its own on the tune split and on the report split; it is no decision's
    candidate."""
    root, tune = tune_run
    report = json.loads((report_run[0] / "out" / "results.json").read_text())
    for results in (tune, report):
        assert set(results["scorers"]["larev@irm-arm"]) == set(results["scorers"]["larev"])
    assert "larev@irm-arm" not in tune["decisions"]["larev"]["candidates"]
    assert (report_run[0] / "runs" / "validity-nli-report-seed0-larev-at-irm-arm" / "run.json").is_file()


def test_results_have_the_issues_shape_with_every_criterion_for_every_scorer(report_run):
    root, protocol, result = report_run
    results = json.loads((root / "out" / "results.json").read_text())
    assert results["protocol"] == protocol_digest(protocol) and results["split"] == "report"
    assert results["seeds"] == [0, 1] and results["partial"] is True  # two metrics of seven, settings overridden
    trained = {"rev", "larev", "larev@irm-arm"}  # the protocol scores no controls beside a decided larev
    # the tune run chose larev@mm: larev is read with its settings, in a run of its own, and judged as it trains
    assert results["decided"] == {"larev": "larev@mm"}
    assert results["scorers"]["larev"]["variant_order/borrowed"]["trained_on"] is True
    run = json.loads((root / "runs" / "validity-nli-report-seed0-larev-at-mm" / "run.json").read_text())
    assert '"lambda_mismatched": 1.0' in json.dumps(run)
    assert results["signatures"]["0"]["larev"] != results["signatures"]["0"]["larev@irm-arm"]
    assert trained | {"length", "gpt3_nll"} == set(results["scorers"])
    built = [k for k, n in results["perturbations_skipped"].items() if n < 20]
    assert "explanation_2" in built and "explanation_3" not in built  # the file has no third explanation
    expected = {f"{head}/tiny_acceptability" for head in ("acceptability_auroc", "acceptability_ap", "pairwise")}
    expected |= {f"{head}/{kind}" for kind in built for head in ("perturb", "perturb_order")}
    expected |= {f"{head}/{name}" for name in ("leaky", "vacuous", "borrowed", "empty")
                 for head in ("variant", "variant_order")}
    expected |= {"perturb_corr/explanation_2", "variant_corr/gold_leaky", "generator_order"}
    for scorer in trained:
        cells = results["scorers"][scorer]
        assert expected <= set(cells), (scorer, expected - set(cells))
        for cell in cells.values():
            assert {"value", "low", "high", "met"} <= set(cell)
            assert cell["met"] in (True, False, None)
            assert len(cell["per_seed"]) == 2  # one figure per seed, the value their mean
    rev = results["scorers"]["rev"]["pairwise/tiny_acceptability"]
    assert rev["value"] == pytest.approx(np.mean(rev["per_seed"])) and rev["low"] <= rev["value"] <= rev["high"]
    assert len(results["scorers"]["gpt3_nll"]) == 3  # GPT-3's NLL exists for the human file only
    assert "generator_order" in results["scorers"]["length"]
    assert results["generators"]["order"] == ["tiny-t5", "hypothesis-copy", "label-only"]
    assert set(results["generators"]["mean_score"]) == trained | {"length"} and results["generators"]["tiers"] == [0, 1, 1]
    generated = pl.read_parquet(root / "out" / "generated.parquet")
    assert generated.group_by("source").len().sort("source")["len"].to_list() == [20, 20, 20]  # the split's rows
    scored = pl.read_parquet(root / "out" / "rationales.parquet")["source"].unique().to_list()
    assert {"tiny-t5", "label-only"} <= set(scored) and "perturb_shuffled" in scored
    assert results["seconds"]["generators"] > 0
    for name in ("results.md", "results.png", "perturbations.parquet", "seed-0/scores.parquet",
                 "seed-1/human-tiny_acceptability.parquet"):
        assert (root / "out" / name).is_file()
    page = (root / "out" / "results.md").read_text()
    assert "## Best scorer per criterion" in page and "## d. Generators of known quality" in page
    # decisions are made on the tune split: the report split runs no candidate and decides nothing
    assert "decisions" not in results and "## Defaults decided" not in page
    # set beside the tune run it was given: REV's row with its figure on each split
    beside = page.split("## Beside the tune split")[1]
    assert "commit `abc1234`" in beside
    rev = next(line for line in beside.splitlines() if line.startswith("| rev |"))
    assert "0.900 [0.800, 0.950] ✓" in rev
    assert cell_text(results["scorers"]["rev"]["acceptability_auroc/tiny_acceptability"]) in rev
    assert {p.name for p in (root / "runs").glob("*-at-*")} == {f"validity-nli-report-seed{k}-larev-at-{name}"
                                                                 for k in (0, 1) for name in ("irm-arm", "mm")}


def test_a_reading_of_the_report_split_is_recorded_as_it_begins_and_ends_and_shows_an_interrupted_one(report_run):
    """The fixture's ledger held a reading that began and never ended (a killed process); the run shows it in
    its results and records its own reading twice: as it began, and as it ended."""
    root, protocol, result = report_run
    killed, began, ended = read_ledger(root / "ledger.jsonl")
    assert killed["event"] == "began" and (began["event"], ended["event"]) == ("began", "ended")
    assert began["reading"] == ended["reading"] != killed["reading"]
    assert began["protocol"] == protocol_digest(protocol) and began["split"] == "report" and "commit" in began
    assert began["out"] == str(root / "out")  # outside the working directory: as given
    earlier = result["results"]["earlier_readings"]
    assert (earlier["ended"], earlier["failed"], earlier["unfinished"]) == (0, 0, 1)
    page = (root / "out" / "results.md").read_text()
    assert "0 ended, 0 failed, 1 began and never ended" in page and "began, never ended" in page


def test_a_reading_that_fails_leaves_its_failed_line(tmp_path, monkeypatch, prefect_harness):
    """A report reading that stops on an error (here before its first step) records `began` then `failed` with
    the error; the error still reaches the caller."""
    import flows.validity as validity

    data, human = _files(tmp_path)
    protocol = _protocol(tmp_path, data, human)

    def broken(*args, **kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(validity, "run_validity", broken)
    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps({"protocol": protocol_digest(protocol), "task": "nli", "split": "tune"}))
    params = validity.ValidityParams(protocol=str(protocol), split="report", out=str(tmp_path / "out"),
                                     metrics=["rev", "larev"], overrides=TINY_SETTINGS, beside=str(tune),
                                     artifact_root=str(tmp_path / "store"), ledger=str(tmp_path / "ledger.jsonl"),
                                     progress=False)
    with pytest.raises(RuntimeError, match="the disk is full"):
        validity.validity_benchmark(params)
    began, failed = read_ledger(tmp_path / "ledger.jsonl")
    assert (began["event"], failed["event"], failed["reading"]) == ("began", "failed", began["reading"])
    assert failed["error"] == "RuntimeError: the disk is full"


def test_a_decided_larev_beside_its_undecided_controls_is_refused_before_a_reading_begins(tmp_path, prefect_harness):
    """The tune run chose larev@mm, but the protocol also scores LAREV's controls and ablations (which would train
    with the undecided settings): refused with the reason, before the ledger records a reading."""
    from flows.validity import ValidityParams, validity_benchmark
    from larev.errors import ConfigError

    protocol = _protocol(tmp_path, *_files(tmp_path))
    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps({"protocol": protocol_digest(protocol), "task": "nli", "split": "tune",
                                "decisions": {"larev": {"chosen": "larev@mm"}}}))
    params = ValidityParams(protocol=str(protocol), split="report", out=str(tmp_path / "out"),
                            metrics=["rev", "larev"], overrides=TINY_SETTINGS, beside=str(tune),
                            artifact_root=str(tmp_path / "store"), ledger=str(tmp_path / "ledger.jsonl"),
                            progress=False)
    with pytest.raises(ConfigError, match="chose larev@mm for larev, but the protocol also scores LAREV's controls"):
        validity_benchmark(params)
    assert not (tmp_path / "ledger.jsonl").exists() and not (tmp_path / "store").exists()


def test_the_cli_refuses_bad_arguments_before_it_looks_for_data(tmp_path, capsys, monkeypatch):
    """Each argument error is answered before any data file is looked for: here the data directory is empty, as in a
    clone with no data yet, and every answer is still the argument's."""
    monkeypatch.setenv("LAREV_DATA", str(tmp_path / "no-data"))
    assert main(["bench", "validity", "--out", str(tmp_path), "--seeds", "0,9"]) == 2
    assert "seeds [9] are not the protocol's" in capsys.readouterr().err
    assert main(["bench", "validity", "--out", str(tmp_path), "--metrics", "rev,bleu"]) == 2
    assert "metrics ['bleu'] are not the protocol's" in capsys.readouterr().err
    assert main(["bench", "validity", "--out", str(tmp_path), "--beside", str(tmp_path / "tune.json")]) == 2
    assert "only a report-split run is set beside a tune run" in capsys.readouterr().err
    # protocol v2 decides in runs of their own: its report split reads them only beside the tune run that decided
    assert main(["bench", "validity", "--protocol", "protocols/validity-v2.yaml", "--split", "report",
                 "--out", str(tmp_path)]) == 2
    assert "give the tune run's results.json with --beside" in capsys.readouterr().err


def test_each_seed_is_a_benchmark_seed_flow_run_and_a_rerun_is_fully_cached(tune_run):
    """The tune run's seeds ran as flow runs of the per-seed flow (one per seed, named after the benchmark); the
    same run again reads every step from cache: the benchmark's own (perturbations, generators, human halves) and
    every seed's, candidates included."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    root, results = tune_run
    with get_client(sync_client=True) as client:
        names = {run.name for run in client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["benchmark-seed"])), limit=200)}
    assert {"validity-nli-tune-seed0", "validity-nli-tune-seed1"} <= names
    from flows.validity import ValidityParams, validity_benchmark

    protocol = root / "validity.yaml"
    again = validity_benchmark(ValidityParams(
        protocol=str(protocol), split="tune", out=str(root / "again"), metrics=["rev", "larev"],
        overrides=TINY_SETTINGS, artifact_root=str(root / "store"), run_dir=str(root / "runs"),
        ledger=str(root / "ledger.jsonl"), progress=False))
    steps = again["steps"]
    assert {"benchmark-perturbations", "benchmark-rationales", "human-half-tiny_acceptability", "generator-tiny-t5",
            "stored-rationales", "train-larev", "tiny_acceptability-tune-inputs"} <= {s["step"] for s in steps}
    assert [s["step"] for s in steps if not s["cached"]] == []
    assert again["results"]["scorers"] == results["scorers"]
