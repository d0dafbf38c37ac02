"""The GPU check (larev/bench/gpu.py, `larev bench gpu`: flows/gpu_check.py): its agreement figures against values
worked out by hand, the comparison table, its settings (a run's, resolved by the pipeline's own step), and (slow)
the command end to end on this machine's CPU."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from flows.cli import main
from larev.bench.gpu import compare, fixed_agreement, variant_means

ESNLI = Path(__file__).resolve().parents[2] / "shared" / "data" / "esnli" / "dev.parquet"


def scores(values: list[float], metric: str = "rev") -> pl.DataFrame:
    return pl.DataFrame({"id": [f"i{k}" for k in range(len(values))], "source": ["gold"] * len(values),
                         "metric": [metric] * len(values), "score": values})


def test_fixed_agreement_by_hand():
    a, b = scores([0.0, -1.0, -2.0, 0.5]), scores([0.0, -1.25, -2.0, 0.5])
    terms = pl.DataFrame({"id": ["t1", "t2", "t3", "t4"], "term": ["not", "is", None, "a"]})
    other = pl.DataFrame({"id": ["t1", "t2", "t3", "t4"], "term": ["not", "was", None, "a"]})
    got = fixed_agreement(a, b, terms, other, tolerance=0.1)
    assert got["rows"] == 4 and got["max_abs"] == 0.25 and got["mean_abs"] == pytest.approx(0.0625)
    assert got["rows_over_tolerance"] == 1 and got["agree"] is False
    assert got["max_mean_gap"] == pytest.approx(0.0625)  # one (metric, variant) mean: 0.25 / 4
    assert got["same_term"] == 0.75  # a missing term on both sides counts as the same
    assert fixed_agreement(a, a, terms, terms, tolerance=0.0)["agree"] is True


def test_variant_means():
    frame = pl.concat([scores([1.0, 3.0]), scores([-1.0, 0.0], metric="larev")])
    assert variant_means(frame) == {"larev": {"gold": -0.5}, "rev": {"gold": 2.0}}


def _run_dir(path: Path, device: str, precision: str, seconds: dict, means: dict, values: list[float]) -> Path:
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"device": device, "precision": precision, "cpu_threads": 2,
                                               "seconds": seconds, "total_seconds": sum(seconds.values()),
                                               "accuracy": {}, "means": means}))
    scores(values).write_parquet(path / "scores.parquet")
    pl.DataFrame({"id": ["t1"], "term": ["not"]}).write_parquet(path / "terms.parquet")
    return path


def test_compare_table_and_tolerances(tmp_path):
    cpu = _run_dir(tmp_path / "cpu", "cpu", "fp32", {"phi": 10.0, "score": 2.0}, {"rev": {"gold": 0.5}}, [0.5])
    gpu = _run_dir(tmp_path / "gpu", "cuda", "fp32", {"phi": 2.5, "score": 1.0}, {"rev": {"gold": 0.9}}, [0.5])
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    scores([0.5004]).write_parquet(fixed / "fixed_scores.parquet")
    pl.DataFrame({"id": ["t1"], "term": ["not"]}).write_parquet(fixed / "fixed_terms.parquet")
    table, agreement = compare(cpu, [gpu], [fixed])
    assert "| phi | 10.0 | 2.5 | 4.0x |" in table and "| total | 12.0 | 3.5 | 3.4x |" in table
    run = agreement["runs"][0]
    assert run["trained_mean_gaps"] == {"rev/gold": 0.4} and run["trained_agree"] is False  # 0.4 > 0.25
    assert run["fixed"]["max_abs"] == pytest.approx(0.0004) and run["fixed"]["agree"] is True  # within 1e-3


@pytest.mark.slow
@pytest.mark.skipif(not ESNLI.exists(), reason="needs ../shared/data/esnli/dev.parquet")
def test_the_command_end_to_end_on_the_cpu(tmp_path):
    """run, then fixed with the run's own models on the same device (scores identical), then compare."""
    rows = ["--data", str(ESNLI), "--train-rows", ":300", "--test-rows", "8000:8040", "--device", "cpu",
            "--ig-steps", "4"]
    assert main(["bench", "gpu", "run", *rows, "--epochs", "1", "--out", str(tmp_path / "run")]) == 0
    assert main(["bench", "gpu", "fixed", *rows, "--models", str(tmp_path / "run" / "models"),
                 "--out", str(tmp_path / "fixed")]) == 0
    _, agreement = compare(tmp_path / "run", [tmp_path / "run"], [tmp_path / "fixed"])
    fixed = agreement["runs"][0]["fixed"]
    assert fixed["rows"] == 40 * 4 * 2 and fixed["max_abs"] == 0.0 and fixed["same_term"] == 1.0


def test_the_gpu_checks_settings_are_a_runs_resolved_by_the_pipelines_step(tmp_path):
    """The check's settings are what `larev run` of the same slice, backbone and seed resolves (the presets of its
    backbone, task and data), not settings of its own: on e-SNLI-shaped files the embedded backbone's real-NLI
    preset, on minilm-frozen the frozen backbone's."""
    from flows.gpu_check import GpuCheckParams, check_settings
    from flows.pipeline import SECTIONS, PipelineParams
    from larev.bench.quality import reseeded
    from tasks.metric import resolved_params

    data = tmp_path / "nli.parquet"
    data.write_text("")  # never read: resolution needs the path only
    for backbone, seed in (("embedded", 0), ("minilm-frozen", 2)):
        check = check_settings(GpuCheckParams(data=str(data), backbone=backbone, seed=seed, epochs=2, ig_steps=8))
        run = PipelineParams.model_validate(
            {"data": {"source": "files", "task": "nli", "train": str(data), "test": str(data),
                      "train_rows": ":2000", "test_rows": "8000:8500"},
             "model": {"backbone": backbone}, "train": {"epochs": 2, "device": "cpu", "bf16": False},
             "larev": {"attribution": {"n_steps": 8}}})
        resolved = resolved_params(reseeded(run, seed), "nli", tuple(SECTIONS))[0]
        assert check.model_dump() == resolved.model_dump()
        assert check.train.seed == 42 + seed and check.larev.attribution.n_steps == 8
        assert None not in (check.larev.objective.lambda_irm, check.train.learning_rate_for(backbone))


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.skipif(not ESNLI.exists(), reason="needs ../shared/data/esnli/dev.parquet")
def test_the_gpu_check_and_a_larev_run_of_the_same_slice_and_seed_give_the_same_scores(tmp_path):
    """The GPU check runs the pipeline's own steps (larev.bench.gpu.run_core: the same core functions, the settings
    resolved by the pipeline's own step): on the CPU its REV and LAREV scores equal a `larev run` of the same
    e-SNLI slice and seed to 1e-6 nats."""
    from flows.gpu_check import GpuCheckParams, check_examples, check_settings
    from flows.pipeline import PipelineParams, larev_pipeline
    from larev.bench.gpu import run_core
    from larev.config import TrainConfig
    from larev.data.sources import DataConfig
    from larev.data.variants import THESIS_VARIANTS
    from larev.leakage.attribution import AttributionConfig
    from larev.methods.leakage_aware.config import LarevConfig
    from larev.methods.rora.config import RoraConfig

    train_rows, test_rows = ":120", "8000:8020"
    check = GpuCheckParams(data=str(ESNLI), train_rows=train_rows, test_rows=test_rows, epochs=1, ig_steps=4)
    settings = check_settings(check)
    _, core, _, _ = run_core(check_examples(check), baseline=settings.baselines, model=settings.model,
                             train=settings.train, larev=settings.larev)
    params = PipelineParams(
        run_name="gpu-check", artifact_root=str(tmp_path / "store"), run_dir=str(tmp_path / "runs"),
        data=DataConfig(source="files", task="nli", train=str(ESNLI), test=str(ESNLI), train_rows=train_rows,
                        test_rows=test_rows),
        train=TrainConfig(epochs=1), larev=LarevConfig(attribution=AttributionConfig(n_steps=4)),
        rora=RoraConfig(enabled=False), variants=list(THESIS_VARIANTS), progress=False)
    run = pl.read_parquet(Path(larev_pipeline(params)["run_dir"]) / "scores.parquet")
    joined = core.join(run.select("id", "source", "metric", run_score=pl.col("score")),
                       on=["id", "source", "metric"], how="left")
    assert core.height == 20 * len(THESIS_VARIANTS) * 2 and joined["run_score"].null_count() == 0
    assert (joined["score"] - joined["run_score"]).abs().max() < 1e-6
