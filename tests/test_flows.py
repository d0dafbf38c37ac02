"""Flows under one session-scoped Prefect test harness: caching, invalidation, bad input, the score flow."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from flows.cli import main
from flows.pipeline import PipelineParams, larev_pipeline
from flows.score import ScoreParams, score_rationales
from larev.config import DemoDataConfig, ModelConfig, ScoreConfig, TrainConfig
from larev.leakage.attribution import AttributionConfig
from larev.data.sources import DataConfig
from larev.methods.rora.infill import InfillerConfig
from larev.methods.leakage_aware.config import LarevConfig, ThesisObjective
from larev.leakage.rationale_model import RationaleModelConfig
from larev.leakage.spans import LeakageDetectionConfig
from larev.methods.rora.config import RoraConfig

pytestmark = pytest.mark.usefixtures("prefect_harness")

TINY = ModelConfig(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8)
SOURCES = ["gold", "leaky", "gold_leaky", "vacuous"]  # the training sources (RQ / LAS train a proxy on each)
VARIANTS = [*SOURCES, "borrowed", "borrowed_other", "empty"]  # scored on the test split
RORA_CHAIN = ("rationale-model", "leaky-spans", "infiller", "counterfactuals", "train-rora")
RORA_STEPS = [f"{step}-gold" for step in RORA_CHAIN]  # rora.train_on='gold' (default): one set of models
# RQ / LAS: a proxy per source, and the rationale-only model RORA did not train
PROXY_STEPS = ["train-proxy-gold", *(f"{step}-{source}" for source in SOURCES[1:]
                                     for step in ("train-proxy", "rationale-model"))]
# flows/metrics.py's order: each metric trains, then scores
ALL_STEPS = ["examples", "baselines", "variants", "tokenizer", "train-phi_base", "train-phi", "score-rev",
             "leakage-terms", "environments", "probe", "train-larev", "report-larev", "score-larev",
             "training-rationales", "train-theta", *RORA_STEPS, "report-rora", "score-rora", *PROXY_STEPS,
             "score-rq-las", "report"]
METRICS = ["larev", "las", "rev", "rora", "rq"]
TINY_LAREV = LarevConfig(attribution=AttributionConfig(n_steps=4), probe_train=TrainConfig(epochs=1, batch_size=16),
                         la_train=TrainConfig(epochs=1, batch_size=8), la_min_steps=0)
TINY_RORA = RoraConfig(detection=LeakageDetectionConfig(n_steps=4, model=RationaleModelConfig(epochs=2)),
                       infiller=InfillerConfig(train=TrainConfig(epochs=1, batch_size=16, select_by="sum"),
                                               max_new_tokens=6),
                       phi_train=TrainConfig(epochs=1, batch_size=8))


def tiny_params(root: Path, **changes) -> PipelineParams:
    base = dict(run_name="tiny", artifact_root=str(root / "store"), run_dir=str(root / "runs"),
                data=DataConfig(demo=DemoDataConfig(n_train=48, n_validation=8, n_test=12)), model=TINY,
                train=TrainConfig(epochs=1, batch_size=16), larev=TINY_LAREV, rora=TINY_RORA, progress=False)
    return PipelineParams(**{**base, **changes})


def ran(result) -> list[str]:
    return [s.step for s in result["steps"] if not s.cached]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    return root, larev_pipeline(tiny_params(root))


def test_cold_run_writes_readable_scores(first_run):
    root, result = first_run
    assert ran(result) == ALL_STEPS
    run_dir = Path(result["run_dir"])
    scores = pl.read_parquet(run_dir / "scores.parquet")
    test = pl.read_ndjson(run_dir / "test_split.jsonl")
    assert scores.height == 5 * 7 * 12  # 5 metrics, 7 variants, 12 test rows (4 per label: each has a donor)
    assert sorted(scores["metric"].unique()) == METRICS
    assert sorted(scores["source"].unique()) == sorted(VARIANTS)
    # the test-only variants: another instance's gold rationale, of the same label or of another; no rationale
    owner = {r["rationale"]: (r["id"], r["label"]) for r in test.iter_rows(named=True)}
    rev = scores.filter(pl.col("metric") == "rev")
    for row in rev.filter(pl.col("source").is_in(["borrowed", "borrowed_other"])).iter_rows(named=True):
        donor, donor_label = owner[row["rationale"]]
        assert donor != row["id"] and (donor_label == row["label"]) == (row["source"] == "borrowed")
    assert rev.filter(pl.col("source") == "borrowed")["rationale"].n_unique() == 12  # each lent once
    assert set(rev.filter(pl.col("source") == "empty")["rationale"]) == {""}
    acc = scores.filter(pl.col("metric").is_in(["rq", "las"]))
    assert acc.filter(pl.col("metric") == "las")["leaks"].null_count() == 0
    assert set(scores["n_labels"]) == {3}
    # each score row carries the text it scored; the test split a user's file answers is beside it
    assert scores.columns[:3] == ["id", "source", "rationale"] and scores["rationale"].null_count() == 0
    assert test.height == 12 and {"id", "premise", "hypothesis", "label", "rationale"} <= set(test.columns)
    gold = scores.filter((pl.col("source") == "gold") & (pl.col("metric") == "rev")).sort("id")
    assert gold.select("id", "rationale").equals(test.sort("id").select("id", "rationale"))
    summary = pl.read_parquet(run_dir / "summary.parquet")
    from larev.metrics.scores import SUMMARY_COLUMNS, summarise

    assert summary.columns == [*SUMMARY_COLUMNS, "signature"]
    assert_frame_equal(summary.drop("signature"), summarise(scores), check_exact=False)  # its scores' summary
    report = (run_dir / "report.md").read_text()
    assert report.index("## What each metric says of each rationale variant") < report.index("## Separations")
    # the metrics' own sections, in registry order; RORA's with its residual-leakage columns
    assert report.index("## Separations") < report.index("## LAREV diagnostics") < report.index("## RORA diagnostics")
    rora_header = next(line for line in report[report.index("## RORA diagnostics"):].splitlines()
                       if line.startswith("| source"))
    assert {"accuracy_masked", "accuracy_x", "chance", "edited_by_label"} <= {c.strip() for c in rora_header.split("|")}
    assert (run_dir / "separations.png").read_bytes()[:4] == b"\x89PNG"
    record = json.loads((run_dir / "run.json").read_text())
    assert {"phi", "phi_base", "probe", "larev", "terms", "environments", "scores", "theta"} <= set(record["artifacts"])
    assert record["backbone_weights"] is None  # the embedded model is built from its config: no weights to name
    # one resolution step: run.json holds every setting a step used, concrete, and the preset it came from
    from larev.presets import unset_settings

    assert unset_settings(record["params"], ("model", "train", "score", "baselines", "larev", "rora")) == []
    assert "definition" not in record["params"]["larev"] and record["params"]["larev_vs_empty"]["enabled"] is False
    assert record["params"]["larev"]["objective"]["lambda_irm"] == 1.0  # the embedded backbone's NLI demo preset
    assert record["resolved_from"]["larev.objective.lambda_irm"] == "small-backbone-nli"
    assert record["resolved_from"]["larev.la_train.learning_rate"] == "=train.learning_rate"
    # a signature per metric: in run.json, on every score row and summary row, and in the report
    signatures = record["signatures"]
    assert sorted(signatures) == METRICS and signatures["larev"].startswith("metric:larev.v1|backbone:embedded|")
    for table in (scores, summary):
        assert dict(table.select("metric", "signature").unique().iter_rows()) == signatures
    assert "## Signatures" in report and signatures["larev"] in report
    # the UI's score table: rounded numbers, one row per metric and source
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        shown = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["tiny-scores"])))
        from prefect.client.schemas.filters import (ArtifactFilterFlowRunId, ArtifactFilterType, FlowRunFilter,
                                                    FlowRunFilterName)

        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=["larev-tiny"])))
        bars = client.read_artifacts(artifact_filter=ArtifactFilter(
            type=ArtifactFilterType(any_=["progress"]), flow_run_id=ArtifactFilterFlowRunId(any_=[r.id for r in runs])))
    # the flow run's own artifact (listed above the task runs' artifacts in the UI), the report a task's
    assert shown[0].task_run_id is None and shown[0].flow_run_id is not None
    rows = json.loads(shown[0].data) if isinstance(shown[0].data, str) else shown[0].data
    assert len(rows) == summary.height and all(v == round(v, 3) for r in rows for v in r.values()
                                               if isinstance(v, float))
    assert runs and bars == []  # finished training loops take their progress bars away
    for source in SOURCES:
        assert {f"proxy:{source}", f"rationale_model:{source}"} <= set(record["artifacts"])
    assert [k for k in record["artifacts"] if k.startswith("rora_phi:")] == ["rora_phi:gold"]
    cf = pl.read_parquet(record["artifacts"]["counterfactuals:gold"]["uri"])
    assert cf.height == 3 * 56 and set(cf["env_label"]) == {"entailment", "contradiction", "neutral"}


def test_rerun_is_fully_cached_and_identical(first_run):
    root, result = first_run
    again = larev_pipeline(tiny_params(root))
    assert ran(again) == []
    assert again["refs"]["scores"] == result["refs"]["scores"]
    assert run_json(again)["signatures"] == run_json(result)["signatures"]  # nothing changed: the same signatures


def run_json(result) -> dict:
    return json.loads((Path(result["run_dir"]) / "run.json").read_text())


def test_scoring_option_reruns_scoring_only(first_run):
    root, _ = first_run
    changed = larev_pipeline(tiny_params(root, score=ScoreConfig(normalisation="sum")))
    assert ran(changed) == ["score-rev", "score-larev", "score-rora", "score-rq-las", "report"]


def test_larev_objective_option_reruns_phi_la_only_and_changes_larevs_signature_only(first_run):
    from larev.signature import signature_difference

    root, _ = first_run
    result = larev_pipeline(tiny_params(root))  # from cache: run.json as the default writes it (others rewrote it)
    larev = TINY_LAREV.model_copy(update={"objective": ThesisObjective(lambda_irm=2.0)})
    changed = larev_pipeline(tiny_params(root, larev=larev, run_name="tiny-irm-2"))
    assert ran(changed) == ["train-larev", "report-larev", "score-larev", "report"]
    before, after = run_json(result)["signatures"], run_json(changed)["signatures"]
    assert signature_difference(before["larev"], after["larev"]) == ["settings"]
    assert all(before[m] == after[m] for m in before if m != "larev")  # REV, RORA, RQ, LAS: untouched


def test_controls_add_only_their_steps_and_larev_with_phi_is_rev_exactly(first_run):
    """`larev.controls`: erm_envs trains the erm_envs ablation's phi_LA, r_only an evaluator on r alone, phi
    trains nothing. LAREV's estimator (eq. 4.4) with REV's phi in phi_LA's place (control_phi) is REV's rows
    exactly, scores included."""
    root, _ = first_run
    key = ["id", "source"]
    larev = TINY_LAREV.model_copy(update={"controls": ["erm_envs", "phi", "r_only"]})
    result = larev_pipeline(tiny_params(root, larev=larev, run_name="tiny-controls"))
    assert ran(result) == ["train-larev_erm_envs", "train-r_only", "score-control_erm_envs", "score-control_phi",
                           "score-control_r_only", "report"]
    scores = pl.read_parquet(Path(result["run_dir"]) / "scores.parquet")
    rev = scores.filter(pl.col("metric") == "rev").drop("metric", "signature").sort(key)
    control_phi = scores.filter(pl.col("metric") == "control_phi").drop("metric", "signature").sort(key)
    assert rev.height == 7 * 12 and control_phi.equals(rev)
    larev_rows = scores.filter(pl.col("metric") == "larev").drop("metric").sort(key)
    assert not larev_rows["logp_with"].equals(rev["logp_with"])  # phi_LA is another model
    run = run_json(result)
    assert {"control_erm_envs", "control_phi", "control_r_only"} <= set(run["artifacts"])
    assert run["artifacts"]["control_phi"] == run["artifacts"]["phi"]
    assert {"control_erm_envs", "control_phi", "control_r_only"} <= set(run["signatures"])


def test_an_ablation_whose_objective_is_the_defaults_reuses_phi_la_instead_of_training_again(first_run):
    """With LAREV's IRM weight at 0, the no_irm ablation and the erm_envs control ask for phi_LA's own objective
    (and no_probe for erm_envs' when the probe weight is 0 too): one training and one scoring each distinct
    objective, the same model under each name, the same scores."""
    root, _ = first_run
    larev = TINY_LAREV.model_copy(update={"objective": ThesisObjective(lambda_irm=0.0), "controls": ["erm_envs"],
                                          "ablations": ["no_irm", "no_probe"]})
    relabelled = root / "store" / "relabel-scores"
    before = len(list(relabelled.iterdir())) if relabelled.exists() else 0
    result = larev_pipeline(tiny_params(root, larev=larev, run_name="tiny-irm-0"))
    # each model scored once: the second name of a shared phi_LA gets the first's rows under its own name
    assert len(list(relabelled.iterdir())) - before == 2
    trained = [step for step in ran(result) if step.startswith("train-larev")]
    assert trained == ["train-larev", "train-larev_no_probe"]  # larev = no_irm; no_probe (0, 0) = erm_envs
    artifacts = run_json(result)["artifacts"]
    assert artifacts["larev_no_irm"] == artifacts["larev"] != artifacts["larev_no_probe"]
    assert artifacts["control_erm_envs"] == artifacts["larev_no_probe"]
    scores = pl.read_parquet(Path(result["run_dir"]) / "scores.parquet")
    pick = lambda m: scores.filter(pl.col("metric") == m).sort("id", "source")["score"]  # noqa: E731
    assert pick("larev_no_irm").equals(pick("larev")) and pick("control_erm_envs").equals(pick("larev_no_probe"))
    assert not pick("larev").equals(pick("larev_no_probe"))


def test_r_only_is_larevs_r_only_control_under_its_own_name_and_the_hand_computed_difference(first_run):
    """r_only, off by default, switched on: one training step (g_r on r alone), the model LAREV's r_only control
    trains (the same artifact), its rows equal control_r_only's, and each score is log g_r[r](y) - log
    phi_base[b](y) computed by hand from the two saved evaluators."""
    from larev.formats import baseline_input, rationale_only_input
    from larev.methods.rev.r_only import ROnlyConfig
    from larev.models.evaluator import load_evaluator, score_labels
    from larev.schema import label_sets
    from storage import ArtifactStore
    from storage.ref import ArtifactRef

    root, first = first_run
    assert "r_only" not in run_json(first)["signatures"]
    larev = TINY_LAREV.model_copy(update={"controls": ["r_only"]})
    result = larev_pipeline(tiny_params(root, larev=larev, r_only=ROnlyConfig(enabled=True), run_name="tiny-r-only"))
    assert ran(result).count("train-r_only") <= 1 and "score-r_only" in ran(result)
    run = run_json(result)
    assert run["artifacts"]["r_only"] == run["artifacts"]["control_r_only"]
    assert run["signatures"]["r_only"].startswith("metric:r_only.v1|")
    scores = pl.read_parquet(Path(result["run_dir"]) / "scores.parquet")
    key = ["id", "source"]
    mine = scores.filter(pl.col("metric") == "r_only").sort(key)
    control = scores.filter(pl.col("metric") == "control_r_only").sort(key)
    assert mine.height == 7 * 12 and mine["score"].equals(control["score"])

    store = ArtifactStore(str(root / "store"))
    g_r = load_evaluator(store.get_dir(ArtifactRef(**run["artifacts"]["r_only"]).key))
    phi_base = load_evaluator(store.get_dir(ArtifactRef(**run["artifacts"]["phi_base"]).key))
    test = pl.read_ndjson(Path(result["run_dir"]) / "test_split.jsonl")
    rationales = store.read_parquet(ArtifactRef(**run["artifacts"]["rationales"]).key).filter(
        pl.col("source") == "gold")
    rows = rationales.join(test.select("id", "choices", "task"), on="id").sort("id")
    baselines = store.read_parquet(ArtifactRef(**run["artifacts"]["baselines"]).key)
    rows = rows.join(baselines.select("id", "label", "baseline"), on=["id", "label"])
    cands, labels = label_sets(rows), rows["label"].to_list()
    by_hand = (np.array(score_labels(g_r, [rationale_only_input(r) for r in rows["rationale"]], labels, cands).logp)
               - np.array(score_labels(phi_base, [baseline_input(b) for b in rows["baseline"]], labels, cands).logp))
    gold = mine.filter(pl.col("source") == "gold").sort("id")
    assert gold["id"].to_list() == rows["id"].to_list()
    assert gold["score"].to_numpy() == pytest.approx(by_hand, abs=1e-5)


def test_the_no_rationale_reference_metric_runs_only_when_asked_under_its_own_name(first_run):
    """larev_vs_empty: off by default (the first run has none of it); switched on, it adds its phi_LA and its
    score step only (LAREV's environments and probe come from cache), its zero point is phi_LA's own reading of
    no rationale (`empty` scores 0), and `larev` keeps its rows and signature."""
    from larev.methods.leakage_aware.config import LarevVsEmptyConfig

    root, _ = first_run
    first = larev_pipeline(tiny_params(root))  # from cache: run.json as the default writes it
    assert "larev_vs_empty" not in run_json(first)["signatures"]
    own = LarevVsEmptyConfig(enabled=True, la_min_steps=0)  # the tiny run's epochs (the demo preset: 1,200 steps)
    result = larev_pipeline(tiny_params(root, larev_vs_empty=own, run_name="tiny-vs-empty"))
    assert ran(result) == ["train-larev_vs_empty", "report-larev_vs_empty", "score-larev_vs_empty", "report"]
    report = (Path(result["run_dir"]) / "report.md").read_text()
    assert report.index("## LAREV diagnostics") < report.index("## larev_vs_empty diagnostics")
    assert "Zero terms: lambda_borrowed 2.0, label_statements 0.5, baseline_rationales 0.25" in report
    scores = pl.read_parquet(Path(result["run_dir"]) / "scores.parquet")
    empty = scores.filter(pl.col("source") == "empty", pl.col("metric") == "larev_vs_empty")
    assert empty.height == 12 and empty["score"].abs().max() < 1e-5  # the same input read twice
    run = run_json(result)
    assert run["signatures"]["larev"] == run_json(first)["signatures"]["larev"]
    assert run["signatures"]["larev_vs_empty"].startswith("metric:larev_vs_empty.v1|")
    assert run["params"]["larev_vs_empty"]["lambda_borrowed"] == 2.0  # resolved from its preset
    assert run["resolved_from"]["larev_vs_empty.lambda_borrowed"] == "no-rationale-reference-zero-terms"
    first_larev = pl.read_parquet(Path(first["run_dir"]) / "scores.parquet").filter(pl.col("metric") == "larev")
    assert scores.filter(pl.col("metric") == "larev").sort("id", "source")["score"].equals(
        first_larev.sort("id", "source")["score"])


def test_phi_la_can_start_from_phi(first_run):
    """larev.la_start=phi: phi_LA starts as REV's phi (with a learning rate of ~0 it stays phi); only phi_LA and
    what reads it rerun. The default phi_LA starts fresh, so it is not phi."""
    import torch

    from larev.models.evaluator import load_evaluator

    root, result = first_run

    def weights(ref):
        return load_evaluator(ref.uri, device="cpu").model.state_dict()

    still = TrainConfig(epochs=1, batch_size=8, learning_rate=1e-12)
    larev = TINY_LAREV.model_copy(update={"la_start": "phi", "la_train": still})
    changed = larev_pipeline(tiny_params(root, larev=larev, run_name="tiny-la-start"))
    assert ran(changed) == ["train-larev", "report-larev", "score-larev", "report"]
    phi = weights(result["refs"]["phi"])
    started, fresh = weights(changed["refs"]["larev"]), weights(result["refs"]["larev"])
    assert all(torch.allclose(started[k], v, atol=1e-6) for k, v in phi.items())
    assert not all(torch.allclose(fresh[k], v, atol=1e-3) for k, v in phi.items())


def test_the_demo_run_trains_a_fresh_phi_la_without_dropout_and_without_counterfactual_twins(first_run):
    """On demo data the embedded backbone's demo preset builds phi_LA with dropout 0 while phi keeps the
    backbone's 0.1; the demo generator's own rule (its exclusive categories) reaches no default: no twins."""
    _, result = first_run

    def saved(name):
        return json.loads((Path(result["refs"][name].uri) / "config.json").read_text())["dropout_rate"]

    assert saved("phi") == TINY.dropout == 0.1 and saved("larev") == 0.0
    meta = json.loads((Path(result["refs"]["larev"].uri) / "larev_config.json").read_text())["meta"]
    assert meta["zero_rows"]["exclusive_terms"] == "none" and meta["zero_rows"]["counterfactuals"] == 0
    assert run_json(result)["resolved_from"]["larev.la_dropout"] == "demo-embedded"


def test_phi_la_trains_the_minimum_steps_on_small_data(first_run):
    """larev.la_min_steps: the tiny run's 48 training rows at batch 8 are 6 steps an epoch, so 12 steps take 2
    epochs where la_train says 1; the saved phi_LA records both epochs and the grown config."""
    root, _ = first_run
    changed = larev_pipeline(tiny_params(root, larev=TINY_LAREV.model_copy(update={"la_min_steps": 12}),
                                         run_name="tiny-min-steps"))
    assert ran(changed) == ["train-larev", "report-larev", "score-larev", "report"]
    meta = json.loads((Path(changed["refs"]["larev"].uri) / "larev_config.json").read_text())["meta"]
    assert meta["train_config"]["epochs"] == 2 and len(meta["training"]["history"]) == 2


def test_training_option_reruns_training_and_downstream_only(first_run):
    root, _ = first_run
    changed = larev_pipeline(tiny_params(root, train=TrainConfig(epochs=1, batch_size=16, seed=7)))
    steps = ran(changed)
    assert steps[:4] == ["train-phi_base", "train-phi", "score-rev", "leakage-terms"]
    assert not {"examples", "baselines", "variants", "tokenizer"} & set(steps)
    # RORA's own training options did not change: its models stay cached, theta and the proxies retrain
    assert "train-theta" in steps and "train-proxy-gold" in steps
    assert not {"rationale-model-gold", "infiller-gold", "train-rora-gold"} & set(steps)


def test_rora_option_reruns_rora_only(first_run):
    root, _ = first_run
    rora = TINY_RORA.model_copy(update={"detection": TINY_RORA.detection.model_copy(
        update={"rule": "threshold", "threshold": 0.2})})
    steps = ran(larev_pipeline(tiny_params(root, rora=rora, run_name="tiny-threshold")))  # first_run's dir intact
    assert steps[0] == "leaky-spans-gold" and "rationale-model-gold" not in steps
    assert not {"train-phi", "train-larev", "score-rev", "train-theta", "train-proxy-gold"} & set(steps)
    # RQ / LAS read the proxies and the rationale-only models, which the threshold does not touch
    assert steps[-2:] == ["score-rora", "report"] and "score-rq-las" not in steps


def test_rora_per_source_protocol_adds_only_the_other_sources_chains(first_run):
    root, _ = first_run
    rora = TINY_RORA.model_copy(update={"train_on": "each_source"})
    result = larev_pipeline(tiny_params(root, rora=rora, run_name="tiny-each-source"))
    # the rationale-only models RQ / LAS trained come from the cache; gold's chain too
    assert ran(result) == [f"{step}-{source}" for source in SOURCES[1:] for step in RORA_CHAIN[1:]] + [
        "report-rora", "score-rora", "report"]
    record = json.loads((Path(result["run_dir"]) / "run.json").read_text())
    assert {f"rora_phi:{source}" for source in SOURCES} <= set(record["artifacts"])
    cf = pl.read_parquet(record["artifacts"]["counterfactuals:leaky"]["uri"])
    assert cf.height == 3 * 56 and set(cf["env_label"]) == {"entailment", "contradiction", "neutral"}


def test_score_flow_scores_a_user_file_with_other_labels(first_run, tmp_path):
    root, result = first_run
    test = pl.read_parquet(result["refs"]["examples"].uri).filter(pl.col("split") == "test")
    other = {"entailment": "neutral", "neutral": "contradiction", "contradiction": "entailment"}
    user = pl.DataFrame({"id": test["id"], "source": "my-model", "rationale": test["rationale"],
                         "label": [other[y] if i % 2 else y for i, y in enumerate(test["label"])]})
    path = tmp_path / "mine.jsonl"
    user.write_ndjson(path)
    out = score_rationales(ScoreParams(run=result["run_dir"], rationales=str(path), name="mine", progress=False))
    scores = pl.read_parquet(Path(out["run_dir"]) / "scores.parquet")
    assert scores.height == 5 * test.height and set(scores["source"]) == {"my-model"}
    assert sorted(scores["metric"].unique()) == METRICS
    rev_scores = scores.filter(pl.col("metric") == "rev")
    assert rev_scores["label"].to_list() == user["label"].to_list()
    # RQ judges the gold label, LAS the label the rationale comes with
    rq = scores.filter(pl.col("metric") == "rq")
    las = scores.filter(pl.col("metric") == "las")
    flipped = [g != y for g, y in zip(test["label"], user["label"])]
    assert rq["pred_with"].to_list() == las["pred_with"].to_list()
    gold_right = [p == g for p, g in zip(rq["pred_with"], test["label"])]
    assert rq["correct_with"].to_list() == gold_right
    assert [c for c, f in zip(las["correct_with"], flipped) if f] == [p == y for p, y, f in
                                                                      zip(las["pred_with"], user["label"], flipped) if f]


BAD_FILES = {
    "missing-column": (lambda p: pl.DataFrame({"id": ["a"], "premise": ["p"], "label": ["neutral"],
                                               "rationale": ["r"]}).write_parquet(p), "hypothesis"),
    "unknown-label": (lambda p: pl.DataFrame({"id": ["a", "b"], "premise": ["p", "q"], "hypothesis": ["h", "i"],
                                              "label": ["neutral", "maybe"], "rationale": ["r", "s"]}
                                             ).write_parquet(p), "maybe"),
    "empty": (lambda p: pl.DataFrame(schema={"id": pl.String, "premise": pl.String, "hypothesis": pl.String,
                                             "label": pl.String, "rationale": pl.String}).write_parquet(p),
              "no rows"),
    "not-parquet": (lambda p: p.write_text("id,premise\n1,text\n"), "Parquet"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_input_exits_nonzero_and_writes_nothing(case, tmp_path, capsys):
    make, expected = BAD_FILES[case]
    bad = tmp_path / "bad.parquet"
    make(bad)
    good = tmp_path / "good.jsonl"
    pl.DataFrame({"id": ["g"], "premise": ["p"], "hypothesis": ["h"], "label": ["neutral"],
                  "rationale": ["r"]}).write_ndjson(good)
    code = main(["run", "--task", "nli", "--train", str(bad), "--test", str(good), "--store",
                 str(tmp_path / "store"), "--run-dir", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert "bad.parquet" in err and expected in err
    assert not (tmp_path / "runs").exists()
    store = tmp_path / "store"
    assert not store.exists() or not [p for p in store.rglob("*") if p.is_file() and "_prefect" not in p.parts]


def test_a_flow_started_with_a_missing_file_fails_before_any_step_with_one_message(tmp_path, caplog):
    """As from the UI or a schedule (no CLI preflight): the run's state carries the message, no step runs, and its
    logs hold the one error line, not a traceback."""
    missing = tmp_path / "no-such-rationales.jsonl"
    state = larev_pipeline(tiny_params(tmp_path, rationales=str(missing)), return_state=True)
    assert state.is_failed()
    assert state.message == f"{missing}: file not found"
    assert not (tmp_path / "store").exists() and not (tmp_path / "runs").exists()
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in errors if "no-such-rationales" in r.getMessage()] == [state.message]
    assert not any(r.exc_info for r in errors)


def test_cli_run_ends_with_a_verdict_a_newcomer_reads_at_a_glance(first_run, tmp_path, capsys):
    """`larev run` on the tiny run's parameters (served from cache): after the flow, the verdict per metric, one
    line on the steps and where the full tables are, in 25 non-empty lines or fewer; --steps lists the steps."""
    root, _ = first_run
    params = tmp_path / "tiny.yaml"
    params.write_text(tiny_params(root).model_dump_json(exclude_none=True))
    assert main(["run", "--params", str(params), "--no-progress"]) == 0
    out = capsys.readouterr().out
    shown = [line for line in out[out.index("gold minus each variant"):].splitlines() if line.strip()]
    assert len(shown) <= 25
    assert [line.split()[0] for line in shown[2:7]] == ["rev", "larev", "rora", "rq", "las"]
    assert any(line.startswith("larev separates gold from ") for line in shown)
    assert "Steps: 0 ran, " in out and "larev show" in shown[-1]
    assert main(["run", "--params", str(params), "--no-progress", "--steps"]) == 0
    assert "train-larev" in capsys.readouterr().out


def test_cli_show(first_run, tmp_path, capsys):
    _, result = first_run
    assert main(["show", result["run_dir"], "--report"]) == 0
    out = capsys.readouterr().out
    assert "gold_leaky" in out and "Separations" in out and "# larev run 'tiny'" in out
    assert main(["show", str(tmp_path)]) == 2
    assert "not a finished larev run" in capsys.readouterr().err


def test_qa_pipeline_runs_end_to_end(tmp_path):
    data = DataConfig(demo=DemoDataConfig(task="qa", n_train=40, n_validation=8, n_test=10))
    result = larev_pipeline(tiny_params(tmp_path, run_name="tiny-qa", data=data))
    scores = pl.read_parquet(Path(result["run_dir"]) / "scores.parquet")
    test = pl.read_ndjson(Path(result["run_dir"]) / "test_split.jsonl")
    assert test["label"].n_unique() == 10  # every answer its own: no `borrowed` donor (a warning, rows left out)
    assert scores.height == 5 * 6 * 10 and sorted(scores["metric"].unique()) == METRICS
    assert "borrowed" not in set(scores["source"]) and "borrowed_other" in set(scores["source"])
    assert (scores["logp_with"] <= 0).all()  # label_set over each row's five choices
    envs = pl.read_parquet(result["refs"]["environments"].uri)
    assert envs["env"].to_list()[:3] == ["E1", "E2", "E3"] and envs.height == 3 * 48
    # QA (the larev.*=auto settings): phi_LA starts from phi, the answer's text is edited in r and b, E4 added
    meta = json.loads((Path(result["refs"]["larev"].uri) / "larev_config.json").read_text())["meta"]
    assert meta["label_edits"] == "rationale_and_baseline" and meta["la_start"] == "phi"
    run = json.loads((Path(result["run_dir"]) / "run.json").read_text())
    assert run["resolved_from"]["larev.la_start"] == "small-backbone-qa"  # the presets, not a definition switch
    assert run["signatures"]["larev"].startswith("metric:larev.v1|") and "definition" not in run["params"]["larev"]
    assert "val_accuracy_E4" in meta["training"]["history"][0]


def test_bench_quality_outputs_rebuilt_from_a_run(first_run, tmp_path):
    _, result = first_run
    out = tmp_path / "bench"
    assert main(["bench", "quality", "--from-run", result["run_dir"], "--out", str(out), "--bootstrap", "50"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert sorted(results["scores"]) == METRICS and results["n_test"] == 12
    assert set(results["intervals"]["rora"]) >= {"gold", "gold-leaky", "SUM"}
    csv = pl.read_csv(out / "results.csv")
    defined = csv.filter(pl.col("ci_low").is_not_nan())  # LAS is NaN where a group is empty
    assert set(csv["metric"]) == set(METRICS) and (defined["ci_low"] <= defined["ci_high"]).all()
    assert "[" in (out / "results.md").read_text()
    # the stress tests on the gold rationales: FTC with the run's theta, AddText with every metric
    assert results["ftc"]["task_model"] == "theta" and results["ftc"]["n_examples"] == 12
    assert sorted(results["addtext"]) == METRICS
    assert set(results["addtext"]["rev"]) == {"rand", "wiki", "adv", "all"}
    assert results["addtext"]["rev"]["all"]["n"] == 12 * 9
    shift = pl.read_parquet(Path(result["run_dir"]) / "stress" / "addtext_shift.parquet").filter(
        (pl.col("metric") == "rq") & (pl.col("orig_source") == "gold"))
    # "all" is the pair-weighted mean over every position and kind of the shift table
    assert results["addtext"]["rq"]["all"]["rise_share"] == pytest.approx(
        (shift["rise_share"] * shift["n"]).sum() / shift["n"].sum())
    assert "AddText" in (out / "results.md").read_text() and (out / "addtext.png").exists()
    # what the leakage spans removed, for both methods
    larev = results["leakage"]["larev"]
    assert larev["chance"] == pytest.approx(1 / 3)
    from tasks.export import read_run

    run = read_run(result["run_dir"])  # the run the rebuilt outputs describe (later tests may re-export runs/tiny)
    envs = pl.read_parquet(run["artifacts"]["environments"]["uri"])
    spans = pl.read_parquet(run["artifacts"]["leakage_spans"]["uri"]).row(0, named=True)
    assert larev["residual_accuracy"] == pytest.approx(spans["residual_after"])
    # E3 coverage by hand: of the training rows with a leakage span, the share whose E3 rewrite exists
    e3 = envs.filter(pl.col("term").is_not_null() & (pl.col("env") == "E3"))
    assert larev["e3_coverage"] == pytest.approx(e3["baseline"].is_not_null().mean() if e3.height else 1.0)
    examples = pl.read_parquet(run["artifacts"]["examples"]["uri"])
    with_spans = set(envs.filter(pl.col("term").is_not_null())["id"]) & set(
        examples.filter(pl.col("split") == "validation")["id"])
    for key in ("reliance_phi", "reliance_phi_la"):  # measured where validation rows have spans, else null
        assert isinstance(larev[key], float) if with_spans else larev[key] is None
    assert set(results["leakage"]["rora"]) >= {"gold"}
    assert results["leakage"]["rora"]["gold"]["residual_gain"] is not None
    assert "What LAREV's leakage spans removed" in (out / "results.md").read_text()


def test_same_seed_gives_identical_scores_on_cpu(first_run, tmp_path):
    """Two cold runs in fresh stores (nothing shared, nothing cached) with the same seeds and device='cpu' give
    bit-identical scores for every metric."""
    root, result = first_run
    params = tiny_params(root)
    again = larev_pipeline(params.model_copy(update={"artifact_root": str(tmp_path / "store"),
                                                     "run_dir": str(tmp_path / "runs")}))
    assert ran(again) == ALL_STEPS  # computed anew
    # the first run's scores from its content-addressed artifact: later tests rerun into the same run_dir
    first = pl.read_parquet(result["refs"]["scores"].uri).sort("metric", "id", "source")
    second = pl.read_parquet(again["refs"]["scores"].uri).sort("metric", "id", "source")
    assert params.train.device in ("auto", "cpu") and not __import__("torch").cuda.is_available()
    assert sorted(first["metric"].unique()) == METRICS and first["score"].n_unique() > 10
    assert second.equals(first)
