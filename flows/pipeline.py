"""The larev pipeline end to end: examples -> baselines -> REV evaluators -> LAREV (IG, environments, probe,
phi_LA) -> RORA (rationale-only model, leaky spans, infiller, counterfactuals, Phi, theta) and the RQ / LAS
proxies -> scores for every metric -> report.

Every step is a cached task (tasks/common.py): rerunning with the same parameters is served from cache, and
changing one option reruns only the steps that depend on it.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from larev.config import BaselineConfig, ModelConfig, ScoreConfig, TrainConfig
from larev.data.sources import DataConfig, file_digest
from larev.leakage_aware import LarevConfig
from larev.metrics.rev import VARIANTS
from larev.rora import RoraConfig
from storage import ArtifactStore
from tasks.baselines import make_baselines, make_rationale_variants
from tasks.common import StepRunner
from tasks.data import load_examples, load_rationales
from tasks.export import export_run
from tasks.reports import publish, summarise_scores
from tasks.larev import find_leakage_terms, make_environments, train_phi_la, train_probe
from tasks.rora import (find_leaky_spans, make_counterfactuals, make_training_rationales, score_rora, score_rq_las,
                        train_infiller, train_input_model, train_rationale_only, train_rora_phi)
from tasks.scoring import score_metric
from tasks.sharding import ScaleOutConfig
from tasks.training import train_model, train_tokenizer


class PipelineParams(BaseModel):
    """Parameters of a pipeline run (the Prefect UI renders this as a form)."""

    model_config = ConfigDict(extra="forbid")

    run_name: str = Field("demo", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                          description="names the run directory and the Prefect artifacts")
    artifact_root: str = Field(".larev/store", description="artifact store: a local path or s3://bucket/prefix")
    run_dir: str = Field("runs", description="the run's headline outputs go to <run_dir>/<run_name>")
    data: DataConfig = Field(default_factory=DataConfig)
    baselines: BaselineConfig = Field(default_factory=BaselineConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    score: ScoreConfig = Field(default_factory=ScoreConfig)
    larev: LarevConfig = Field(default_factory=LarevConfig, description="LAREV's leakage-aware evaluator")
    rora: RoraConfig = Field(default_factory=RoraConfig, description="RORA's evaluator and the RQ / LAS baselines")
    variants: list[str] = Field(list(VARIANTS), description="synthetic rationale variants scored on the test split")
    rationales: str | None = Field(None, description="a rationale file to score too (id, source, rationale[, label])")
    progress: bool = Field(True, description="progress bars on long steps")
    gpu_deployment: str | None = Field(
        None, description="a deployment of the larev-step flow on a GPU work pool (e.g. 'larev-step/larev-step-gpu'): "
                          "the GPU stages (training, IG, generation) run there; empty: every step runs in the "
                          "flow's own process. The worker must see the same artifact root (S3 or a shared disk)")
    scale_out: ScaleOutConfig = Field(default_factory=ScaleOutConfig,
                                      description="shard the score steps over a Dask cluster (shard_rows > 0)")


def source_digests(data: DataConfig) -> list[str]:
    """Content hashes of the run's input files (part of the examples step's cache key)."""
    if data.source != "files":
        return []
    return [file_digest(p) for p in (data.train, data.test, data.validation) if p]


@flow(name="larev-pipeline", flow_run_name="larev-{params.run_name}", log_prints=True)
def larev_pipeline(params: PipelineParams = PipelineParams()) -> dict:
    """Train REV's two evaluators and LAREV's phi_LA; score the rationale variants (and a user file) on the test
    split with every metric."""
    store = ArtifactStore(params.artifact_root)
    with StepRunner(store, gpu_deployment=params.gpu_deployment, scale_out=params.scale_out) as steps:
        scores, models, diagnostics, refs = pipeline_steps(steps, store, params)
    report = steps.run(summarise_scores, store, scores, f"larev run '{params.run_name}'", diagnostics,
                       {k: v for k, v in models.items() if k.startswith("larev")})
    publish(store, report["summary"], report["report"], name=params.run_name)
    refs = {**refs, **models, **diagnostics, **report}
    run_dir = export_run(store, str(Path(params.run_dir) / params.run_name), refs, params.model_dump(mode="json"))
    return {"run_dir": run_dir, "refs": refs, "steps": steps.records}


def pipeline_steps(steps: StepRunner, store: ArtifactStore, params: PipelineParams) -> tuple[list, dict, dict, dict]:
    """Every step before the report: (score refs, model refs, diagnostic tables, input refs)."""
    examples = steps.run(load_examples, store, params.data, source_digests(params.data))
    baselines = steps.run(make_baselines, store, examples, params.baselines, progress=params.progress)
    user = None
    if params.rationales:
        user = steps.run(load_rationales, store, params.rationales, file_digest(params.rationales), examples,
                         params.data.column_map or None)
    rationales = steps.run(make_rationale_variants, store, examples, baselines, params.variants, user)
    tokenizer = steps.run(train_tokenizer, store, examples, baselines, params.model)
    models = {role: steps.run(train_model, store, role, examples, baselines, tokenizer, params.model,
                              params.train, progress=params.progress, step_label=f"train-{role}")
              for role in ("phi_base", "phi")}
    device, progress = params.train.device, params.progress
    scores = [steps.score(score_metric, store, "rev", models["phi"], models["phi_base"], rationales=rationales,
                          examples=examples, baselines=baselines, baseline_config=params.baselines,
                          score=params.score, device=device, progress=progress, step_label="score-rev")]
    diagnostics = {}
    if params.larev.enabled:
        cfg = params.larev
        terms = steps.run(find_leakage_terms, store, models["phi_base"], examples, baselines, cfg.attribution,
                          device, progress=progress)
        envs = steps.run(make_environments, store, examples, baselines, terms["terms"], models["phi_base"],
                         cfg.antonyms, progress=progress)
        probe = steps.run(train_probe, store, models["phi"], examples, envs, cfg.probe_train, progress=progress)
        diagnostics = {**terms, "environments": envs}
        for ablation in [None, *cfg.ablations]:
            name = "larev" if ablation is None else f"larev_{ablation}"
            models[name] = steps.run(train_phi_la, store, name, examples, envs, probe, tokenizer, params.model,
                                     cfg.la_train, cfg.objective_for(ablation), progress=progress,
                                     step_label=f"train-{name}")
            scores.append(steps.score(score_metric, store, name, models[name], models["phi_base"],
                                      rationales=rationales, examples=examples, baselines=baselines,
                                      baseline_config=params.baselines, score=params.score, device=device,
                                      progress=progress, step_label=f"score-{name}"))
        models["probe"] = probe
    if params.rora.enabled:
        rora_scores, rora_models, rora_tables = rora_steps(steps, store, params, examples, baselines, tokenizer,
                                                           rationales)
        scores += rora_scores
        models.update(rora_models)
        diagnostics.update(rora_tables)
    refs = {"examples": examples, "baselines": baselines, "rationales": rationales,
            **({"tokenizer": tokenizer} if tokenizer else {})}
    return scores, models, diagnostics, refs


def rora_steps(steps: StepRunner, store: ArtifactStore, params: PipelineParams, examples, baselines, tokenizer,
               rationales) -> tuple[list, dict, dict]:
    """RORA's models per training source, theta, and the RORA / RQ / LAS scores. Model refs are named
    theta, rora_phi:<source>, proxy:<source>, rationale_model:<source> (run.json keeps them for `larev score`)."""
    cfg, progress, device = params.rora, params.progress, params.train.device
    sources = cfg.sources(params.variants)
    training = steps.run(make_training_rationales, store, examples, baselines, sources)
    theta = steps.run(train_input_model, store, "theta", examples, None, None, tokenizer, params.model, params.train,
                      progress=progress, step_label="train-theta")
    models, tables = {"theta": theta, "training_rationales": training}, {}
    phis, proxies, small = {}, {}, {}
    for source in sources:
        small[source] = steps.run(train_rationale_only, store, source, examples, training, cfg.detection.model,
                                  progress=progress, step_label=f"rationale-model-{source}")
        spans = steps.run(find_leaky_spans, store, source, small[source], examples, training, cfg.detection,
                          progress=progress, step_label=f"leaky-spans-{source}")
        infiller = steps.run(train_infiller, store, source, examples, training, spans["spans"], tokenizer,
                             params.model, cfg.infiller, progress=progress, step_label=f"infiller-{source}")
        counterfactuals = steps.run(make_counterfactuals, store, source, infiller, examples, training,
                                    spans["spans"], cfg.infiller, device, progress=progress,
                                    step_label=f"counterfactuals-{source}")
        phis[source] = steps.run(train_rora_phi, store, source, examples, training, counterfactuals, tokenizer,
                                 params.model, cfg.phi_train, cfg.objective, progress=progress,
                                 step_label=f"train-rora-{source}")
        proxies[source] = steps.run(train_input_model, store, f"proxy-{source}", examples, training, source,
                                    tokenizer, params.model, params.train, progress=progress,
                                    step_label=f"train-proxy-{source}")
        tables.update({f"rora_words:{source}": spans["words"], f"rora_spans:{source}": spans["spans"],
                       f"rora_leakage:{source}": spans["summary"],
                       f"counterfactuals:{source}": counterfactuals})
        if infiller is not None:
            models[f"infiller:{source}"] = infiller
    models.update({f"rora_phi:{s}": r for s, r in phis.items()})
    models.update({f"proxy:{s}": r for s, r in proxies.items()})
    models.update({f"rationale_model:{s}": r for s, r in small.items()})
    scores = [steps.score(score_rora, store, phis, theta, rationales=rationales, examples=examples,
                          score=params.score, device=device, progress=progress),
              steps.score(score_rq_las, store, proxies, small, theta, rationales=rationales, examples=examples,
                          score=params.score, device=device, progress=progress)]
    return scores, models, tables
