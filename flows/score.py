"""Score a rationale file with the evaluators a finished pipeline run trained."""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field, model_validator

from larev.addtext.config import AddTextConfig
from larev.config import BaselineConfig, Device, ScoreConfig
from larev.data.sources import file_digest
from larev.errors import ConfigError
from larev.ftc.config import FtcConfig
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.common import StepRunner
from tasks.data import load_rationale_shards, load_rationales
from tasks.export import export_run, read_run
from tasks.reports import publish, publish_stress, summarise_scores
from tasks.rora import score_rora, score_rq_las
from tasks.scoring import score_metric
from tasks.sharding import ScaleOutConfig
from tasks.stress import addtext_shifts, ftc_problem, local_model_digest, perturb_for_addtext, score_ftc


class ScoreParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str = Field(..., description="a finished pipeline run's directory (holding run.json)")
    rationales: str = Field(..., description="rationale file: id, source, rationale[, label] (.parquet/.jsonl/.csv)")
    name: str = Field("scored", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      description="outputs go to <run>/<name>/")
    column_map: dict[str, str] = Field(default_factory=dict, description="file column -> canonical column")
    score: ScoreConfig | None = Field(None, description="scoring options; default: the run's own")
    device: Device = Field("auto", description="auto (CUDA when present), cpu or cuda")
    progress: bool = Field(True, description="progress bars on long steps")
    scale_out: ScaleOutConfig = Field(default_factory=ScaleOutConfig,
                                      description="shard large files over a Dask cluster (shard_rows > 0)")
    refresh: bool = Field(False, description="recompute every step even where a cached result exists")
    ftc: FtcConfig | None = Field(None, description="also compute FTC (NLI explanations); empty: no FTC")
    addtext: AddTextConfig | None = Field(None, description="also run the AddText stress test of every metric; "
                                                            "empty: none")
    stress_sources: list[str] = Field(["*"], min_length=1, description="rationale sources FTC and AddText look "
                                                                       "at; '*' for every source")

    @model_validator(mode="after")
    def _stress_needs_one_table(self):
        if (self.ftc or self.addtext) and self.scale_out.enabled:
            raise ValueError("ftc / addtext read the rationale table whole: drop scale_out.shard_rows, or run them "
                             "apart with `larev ftc` / `larev addtext` on a sample of the file")
        return self


@flow(name="score-rationales", flow_run_name="score-{params.name}", log_prints=True)
def score_rationales(params: ScoreParams) -> dict:
    """Validate a rationale file against the run's test examples and score it with every metric the run trained.

    Sources the run has RORA / RQ / LAS models for (the built-in variants' names) use them; any other source is
    scored with the models trained on the gold rationales."""
    run = read_run(params.run)
    refs = {k: ArtifactRef(**v) for k, v in run["artifacts"].items()}
    store = ArtifactStore(run["artifact_root"])
    problem = ftc_problem(store, refs, params.ftc) if params.ftc is not None else None
    if problem:  # before any step: a late failure would lose the scores
        raise ConfigError(problem)
    with StepRunner(store, scale_out=params.scale_out, refresh=params.refresh) as steps:
        score_config = params.score or ScoreConfig(**run["params"]["score"])
        baseline_config = BaselineConfig(**run["params"]["baselines"])
        digest, column_map = file_digest(params.rationales), params.column_map or None
        if params.scale_out.enabled:  # read, validated and scored a shard at a time
            rationales = steps.run(load_rationale_shards, store, params.rationales, digest, refs["examples"],
                                   column_map, params.scale_out.shard_rows)
        else:
            rationales = steps.run(load_rationales, store, params.rationales, digest, refs["examples"], column_map)
        scores = score_all(steps, refs, rationales, baseline_config, score_config, params.device, params.progress)
        stress = stress_steps(steps, refs, rationales, baseline_config, score_config, ftc=params.ftc,
                              addtext=params.addtext, sources=tuple(params.stress_sources), device=params.device,
                              progress=params.progress, title=Path(params.rationales).name)
    report = steps.run(summarise_scores, store, scores, f"larev scores of {Path(params.rationales).name}")
    publish(store, report["summary"], report["report"], name=params.name)
    if stress:
        publish_stress(store, stress, name=params.name)
    inputs = {"rationales": rationales} if isinstance(rationales, ArtifactRef) else {}  # shards: in the store
    out = export_run(store, str(Path(params.run) / params.name), {**inputs, **report, **stress},
                     params.model_dump(mode="json"))
    return {"run_dir": out, "steps": steps.records}


def score_all(steps: StepRunner, refs: dict[str, ArtifactRef], rationales: ArtifactRef | list[ArtifactRef],
              baseline_config: BaselineConfig, score_config: ScoreConfig, device: str, progress: bool,
              label: str = "") -> list:
    """Score refs for every metric the run trained: REV, each LAREV model, and RORA / RQ / LAS when the run
    trained RORA (sources without their own models are scored with the gold-trained ones)."""
    examples, store = refs["examples"], steps.store
    metrics = {"rev": refs["phi"], **{k: v for k, v in refs.items() if k.startswith("larev")}}
    scores = [steps.score(score_metric, store, metric, phi, refs["phi_base"], rationales=rationales,
                          examples=examples, baselines=refs["baselines"], baseline_config=baseline_config,
                          score=score_config, device=device, progress=progress,
                          step_label=f"{label}score-{metric}")
              for metric, phi in metrics.items()]
    if "theta" in refs:
        by_source = {kind: {k.split(":", 1)[1]: v for k, v in refs.items() if k.startswith(f"{kind}:")}
                     for kind in ("rora_phi", "proxy", "rationale_model")}
        scores.append(steps.score(score_rora, store, by_source["rora_phi"], refs["theta"], rationales=rationales,
                                  examples=examples, score=score_config, device=device, progress=progress,
                                  step_label=f"{label}score-rora"))
        scores.append(steps.score(score_rq_las, store, by_source["proxy"], by_source["rationale_model"],
                                  refs["theta"], rationales=rationales, examples=examples, score=score_config,
                                  device=device, progress=progress, step_label=f"{label}score-rq-las"))
    return scores


def stress_steps(steps: StepRunner, refs: dict[str, ArtifactRef], rationales: ArtifactRef,
                 baseline_config: BaselineConfig, score_config: ScoreConfig, *, ftc: FtcConfig | None,
                 addtext: AddTextConfig | None, sources: tuple[str, ...], device: str, progress: bool,
                 title: str) -> dict[str, ArtifactRef]:
    """FTC of the rationales with the run's theta (or `ftc.task_model`), and the AddText stress test: perturbed
    copies scored with every metric beside their originals, and the shift table."""
    out: dict[str, ArtifactRef] = {}
    if ftc is not None:
        out.update(steps.run(score_ftc, steps.store, rationales, refs["examples"], ftc, sources, refs.get("theta"),
                             device, local_model_digest(ftc.task_model), progress=progress))
    if addtext is not None:
        corpus_digest = file_digest(addtext.wiki_corpus) if addtext.wiki_corpus else None
        perturbed = steps.run(perturb_for_addtext, steps.store, rationales, refs["examples"], addtext, sources,
                              corpus_digest)
        scores = score_all(steps, refs, perturbed["rationales"], baseline_config, score_config, device, progress,
                           label="addtext-")
        out.update(steps.run(addtext_shifts, steps.store, scores, f"AddText stress test of {title}"))
        out["addtext_rationales"] = perturbed["addtext"]
    return out
