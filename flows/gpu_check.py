"""`larev bench gpu`: the GPU check of larev's CUDA path, on any task's data file and backbone.

    larev bench gpu run --data dev.parquet --device cuda --precision bf16 --out GPU_DIR
    larev bench gpu run --data dev.parquet --device cpu --out CPU_DIR
    larev bench gpu fixed --data dev.parquet --device cpu --models GPU_DIR/models --out FIXED_DIR
    larev bench gpu compare CPU_DIR --gpu GPU_DIR --fixed FIXED_DIR [--gpu ... --fixed ...] --out F.md

`run` resolves its settings as a pipeline run of the same data, rows, backbone and seed resolves them (a
`PipelineParams` through `tasks.metric.resolved_params`, the pipeline's one resolution step: larev/presets.toml),
then runs the core of REV and LAREV with them, each step timed (larev/bench/gpu.py `run_core`): run.json (steps,
seconds, accuracies, variant means, versions, the card, the resolved settings), scores.parquet, terms.parquet (IG's
leakage terms), and phi_base, phi and phi_LA under DIR/models. `fixed` scores the same test variants with another
run's saved models on this device; `compare` sets the runs side by side.

No Prefect server and no artifact store: the steps run in this process, so the check needs only the installed
package on the GPU machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class GpuCheckParams(BaseModel):
    """The slice, backbone, device and precision of one GPU-check run."""

    model_config = ConfigDict(extra="forbid")

    data: str = Field(..., description="the examples file (train rows and test rows come from it)")
    task: Literal["nli", "qa"] = Field("nli", description="the file's task")
    train_rows: str = Field(":2000", description="row slice of the training rows (validation carved from them)")
    test_rows: str = Field("8000:8500", description="row slice of the test rows")
    backbone: str = Field("embedded", description="the evaluators' backbone, as `larev run --backbone`")
    device: Literal["cpu", "cuda"] = Field("cpu", description="where every step runs")
    precision: Literal["fp32", "bf16"] = Field("fp32", description="bf16: autocast on CUDA for training and scoring")
    epochs: int = Field(3, ge=1, description="passes over the training rows (REV's evaluators; LAREV's as its own)")
    ig_steps: int | None = Field(None, ge=1, description="IG steps (default: the resolved attribution setting)")
    seed: int = Field(0, ge=0, description="seed offset, as `larev bench quality --first-seed` moves it")


def check_settings(params: GpuCheckParams):
    """The pipeline parameters a `larev run` of the same slice, backbone, device and seed resolves (every unset
    setting filled from the presets for the backbone, task and data, by the pipeline's own step)."""
    from flows.pipeline import SECTIONS, PipelineParams
    from larev.bench.quality import reseeded
    from tasks.metric import resolved_params

    tree = {"data": {"source": "files", "task": params.task, "train": params.data, "test": params.data,
                     "train_rows": params.train_rows, "test_rows": params.test_rows},
            "model": {"backbone": params.backbone},
            "train": {"epochs": params.epochs, "device": params.device, "bf16": params.precision == "bf16"}}
    if params.ig_steps is not None:
        tree["larev"] = {"attribution": {"n_steps": params.ig_steps}}
    pipeline = reseeded(PipelineParams.model_validate(tree), params.seed)
    return resolved_params(pipeline, params.task, tuple(SECTIONS))[0]


def check_examples(params: GpuCheckParams):
    """The examples of the check: train (validation carved from it) and test rows of the data file."""
    from larev.data.sources import load_data

    return load_data(check_settings(params).data)


def run_check(params: GpuCheckParams, out: Path) -> dict:
    """`larev bench gpu run`: the core on this device with the resolved settings; what it wrote in run.json."""
    from larev.bench.gpu import SAVED, device_facts, run_core, variant_means
    from larev.models.evaluator import save_evaluator

    out.mkdir(parents=True, exist_ok=True)
    settings = check_settings(params)
    examples = check_examples(params)
    started = time.perf_counter()
    report, scores, terms, models = run_core(examples, baseline=settings.baselines, model=settings.model,
                                             train=settings.train, larev=settings.larev)
    scores.write_parquet(out / "scores.parquet")
    terms.write_parquet(out / "terms.parquet")
    for name in SAVED:
        save_evaluator(models[name], out / "models" / name, role=name)
    record = {**device_facts(params.device), "precision": params.precision, "seed": params.seed,
              "epochs": params.epochs, "data": params.data, "task": params.task, "backbone": params.backbone,
              "train_rows": params.train_rows, "test_rows": params.test_rows,
              "settings": {k: settings.model_dump(mode="json")[k] for k in ("baselines", "model", "train", "larev")},
              "n_examples": {s: int(n) for s, n in examples["split"].value_counts().iter_rows()},
              **report, "means": variant_means(scores), "total_seconds": round(time.perf_counter() - started, 1)}
    (out / "run.json").write_text(json.dumps(record, indent=2))
    return record


def fixed_check(params: GpuCheckParams, models: Path, out: Path) -> dict:
    """`larev bench gpu fixed`: another run's saved models scored on this device (`params.seed`: that run's)."""
    from larev.bench.gpu import device_facts, fixed_weight_check

    out.mkdir(parents=True, exist_ok=True)
    settings = check_settings(params)
    report, scores, terms = fixed_weight_check(models, check_examples(params), baseline=settings.baselines,
                                               attribution=settings.larev.attribution, device=params.device,
                                               bf16=params.precision == "bf16")
    scores.write_parquet(out / "fixed_scores.parquet")
    terms.write_parquet(out / "fixed_terms.parquet")
    record = {**device_facts(params.device), "precision": params.precision, "models": str(models), **report}
    (out / "fixed.json").write_text(json.dumps(record, indent=2))
    return record


def compare_check(cpu: Path, gpus: list[Path], fixed: list[str] | None, out: Path | None) -> tuple[str, dict]:
    """`larev bench gpu compare`: the table and agreement figures (larev/bench/gpu.py `compare`); `fixed` gives
    each GPU run's `fixed` folder at the same place ('-': none)."""
    from larev.bench.gpu import compare

    folders = [Path(f) if f != "-" else None for f in (fixed or [])]
    folders += [None] * (len(gpus) - len(folders))
    table, agreement = compare(cpu, gpus, folders)
    if out is not None:
        out.write_text(table + "\n\n```json\n" + json.dumps(agreement, indent=1) + "\n```\n")
    return table, agreement
