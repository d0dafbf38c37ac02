"""Agreement with human judgements: a finished run's metrics score the explanations of annotation files (their
instances are new test examples: baselines built as for any test row), then each metric's scores are compared with
what people judged (larev/human/). Outputs: human.json, human.md, human.png and skipped.csv in `out`."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import polars as pl
from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from larev.config import Device
from larev.digests import file_digest
from larev.human.annotations import check_annotations
from flows.score import finished_run, score_all
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.baselines import make_baselines, make_rationale_variants
from tasks.bench import stored_annotation_inputs
from tasks.export import read_run
from tasks.human import annotation_inputs
from tasks.metric import Run
from tasks.runtime.runner import StepRunner


class HumanParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str = Field(..., description="a finished pipeline run's directory (holding run.json)")
    annotations: list[str] = Field(..., min_length=1, description="annotation files (fine-grained judgements or "
                                                                  "acceptability votes), at most one of each kind")
    out: str = Field(..., description="directory for human.json, human.md, human.png, skipped.csv")
    bootstrap: int = Field(1000, ge=0, description="bootstrap resamples over instances for the intervals (0: none)")
    device: Device = Field("auto", description="auto (CUDA when present), cpu or cuda")
    progress: bool = Field(True, description="progress bars on long steps")
    refresh: bool = Field(False, description="recompute every step even where a cached result exists")


def score_annotations(steps: StepRunner, base: Run, refs: dict[str, ArtifactRef], source: str | ArtifactRef,
                      name: str) -> list[ArtifactRef]:
    """Score tables of the explanations of an annotation file (a path) or of a stored annotation table (and each
    instance's vacuous baseline) by every metric a finished run (`base`, `refs`) trained; its instances are new
    test examples, baselines built as for any."""
    if isinstance(source, ArtifactRef):
        inputs = steps.run(stored_annotation_inputs, source, step_label=f"{name}-inputs")
    else:
        inputs = steps.run(annotation_inputs, source, file_digest(source), step_label=f"{name}-inputs")
    baselines = steps.run(make_baselines, inputs["examples"], base.baseline_config,
                          step_label=f"{name}-baselines")
    # the vacuous baseline scored too: the reference row of each source table
    rationales = steps.run(make_rationale_variants, inputs["examples"], baselines, ["vacuous"],
                           inputs["rationales"], step_label=f"{name}-rationales")
    scoring = replace(base, examples=inputs["examples"], baselines=baselines)
    return score_all(scoring, refs, rationales, label=f"{name}-")


@flow(name="human-agreement", flow_run_name="human-{params.run}", log_prints=True)
def human_agreement(params: HumanParams) -> dict:
    """Score each annotation file's explanations with every metric of a finished run and compare with people."""
    from larev.human.report import (acceptability_agreement, fine_grained_agreement, human_markdown, human_plot,
                                    judged_scores)

    run = read_run(params.run)
    refs = {k: ArtifactRef(**v) for k, v in run["artifacts"].items()}
    store = ArtifactStore(run["artifact_root"])
    run_task = store.read_parquet(refs["examples"].key)["task"][0]
    read = check_annotations(params.run, params.annotations, run_task)
    results: dict = {"run": str(params.run), "files": {}}
    fine_frames: dict[str, pl.DataFrame] = {}
    skipped = []
    with StepRunner(store, refresh=params.refresh, progress=params.progress) as steps:
        base = finished_run(steps, run, refs, device=params.device)
        for path, ann in zip(params.annotations, read, strict=True):
            started = time.perf_counter()
            scores = pl.concat([store.read_parquet(t.key) for t in score_annotations(steps, base, refs, path,
                                                                                      ann.name)],
                               how="diagonal_relaxed")
            if ann.kind == "fine_grained":
                results["fine_grained"] = fine_grained_agreement(ann, scores, n_boot=params.bootstrap)
                fine_frames = judged_scores(ann.judgements.select("id", "source", "human"), scores)
            else:
                results["acceptability"] = acceptability_agreement(ann, scores, n_boot=params.bootstrap)
            skipped.append(ann.skipped.with_columns(file=pl.lit(ann.name)))
            results["files"][ann.name] = {"kind": ann.kind, "task": ann.task, "instances": ann.examples.height,
                                          "explanations": ann.rationales.height, "skipped": ann.skipped.height,
                                          "notes": ann.notes, "seconds": round(time.perf_counter() - started, 1)}
    out = Path(params.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "human.json").write_text(json.dumps(results, indent=2))
    (out / "human.md").write_text(human_markdown(results, title=f"Agreement with human judgements: {params.run}"))
    (out / "human.png").write_bytes(human_plot(results, fine_frames))
    pl.concat(skipped).write_csv(out / "skipped.csv")
    return {"out": str(out), "steps": steps.records, "results": results}
