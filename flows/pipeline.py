"""The larev pipeline end to end: examples -> baselines -> REV evaluators -> LAREV (IG, environments, probe,
phi_LA) -> RORA (rationale-only model, leaky spans, infiller, counterfactuals, Phi, theta) and the RQ / LAS
proxies -> scores for every metric -> report.

Every step is a cached task (tasks/runtime/cache.py): rerunning with the same parameters is served from cache, and
changing one option reruns only the steps that depend on it. The metrics are flows/metrics.py's list: each trains
its models (tasks/metric.py's seam) and scores the rationale variants.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field, create_model

from larev.config import BaselineConfig, ModelConfig, ScoreConfig, TrainConfig
from larev.data.sources import DataConfig
from larev.digests import file_digest
from larev.metrics.scores import VARIANTS
from larev.models.pretrained import cache_identity
from flows.metrics import METRICS
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.baselines import make_baselines, make_rationale_variants
from tasks.bench import stacked_rationales, stored_rationales
from tasks.metric import Metric, Run, resolved_params, run_signatures
from tasks.runtime.runner import StepRunner
from tasks.training import train_tokenizer
from tasks.data import load_examples, load_rationales
from tasks.export import export_run
from tasks.reports import publish, publish_score_table, summarise_scores
from tasks.runtime.sharding import ScaleOutConfig


class RunParams(BaseModel):
    """The first parameters of every pipeline run; `PipelineParams` adds each metric's section (flows/metrics.py)
    and the rest."""

    model_config = ConfigDict(extra="forbid")

    run_name: str = Field("demo", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                          description="names the run directory and the Prefect artifacts")
    artifact_root: str = Field(".larev/store", description="artifact store: a local path or s3://bucket/prefix")
    run_dir: str = Field("runs", description="the run's headline outputs go to RUN_DIR/RUN_NAME")
    data: DataConfig = Field(default_factory=DataConfig)
    baselines: BaselineConfig = Field(default_factory=BaselineConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    score: ScoreConfig = Field(default_factory=ScoreConfig)


def metric_sections(metrics: list[Metric]) -> dict:
    """The pipeline parameter sections the metrics own: {section: (its model, a Field with its defaults)}, each
    declared by exactly one metric (`section` with `options`, a model with an `enabled` field: `--metrics` switches
    it); a metric that reads another's section must name one that some metric declares."""
    sections: dict = {}
    for m in metrics:
        if m.options is None:
            continue
        if m.section is None or m.section in sections or m.section in RunParams.model_fields:
            raise TypeError(f"metric {m.name!r}: section {m.section!r} is missing, declared twice or a run field")
        if "enabled" not in m.options.model_fields:
            raise TypeError(f"metric {m.name!r}: the options of its section {m.section!r} ({m.options.__name__}) "
                            "have no `enabled` field")
        sections[m.section] = (m.options, Field(default_factory=m.options, description=m.description))
    for m in metrics:
        if m.section is not None and m.section not in sections:
            raise TypeError(f"metric {m.name!r} reads section {m.section!r}, which no registered metric declares")
    return sections


SECTIONS = metric_sections(METRICS)
_WithMetricSections = create_model("_WithMetricSections", __base__=RunParams, __module__=__name__, **SECTIONS)


class PipelineParams(_WithMetricSections):
    """Parameters of a pipeline run (the Prefect UI renders this as a form): the data, baselines, model, training
    and scoring sections, one section per metric that has options (flows/metrics.py), then what to score and
    where to run."""

    variants: list[str] = Field(list(VARIANTS), description="synthetic rationale variants scored on the test split")
    rationales: str | None = Field(None, description="a rationale file to score too (id, source, rationale[, label])")
    progress: bool = Field(True, description="progress bars on long steps")
    gpu_deployment: str | None = Field(
        None, description="a deployment of the larev-step flow on a GPU work pool (e.g. 'larev-step/larev-step-gpu'): "
                          "the GPU stages (training, IG, generation) run there; empty: every step runs in the "
                          "flow's own process. The worker must see the same artifact root (S3 or a shared disk)")
    scale_out: ScaleOutConfig = Field(default_factory=ScaleOutConfig,
                                      description="shard the score steps over a Dask cluster (shard_rows > 0)")
    concurrent_chains: int = Field(
        4, ge=1, description="with a gpu_deployment: independent chains of steps (RORA's per-source models, the RQ / "
                             "LAS proxies) in flight at once through Prefect's thread-pool task runner; without one "
                             "every step runs here, one at a time (torch already uses every core)")


def _check_sections() -> None:
    """No field PipelineParams adds after the sections may take a section's name (it would replace it)."""
    for name, (model, _) in SECTIONS.items():
        if PipelineParams.model_fields[name].annotation is not model:
            raise TypeError(f"PipelineParams.{name} is a run field: a metric's section needs another name")


_check_sections()


def source_digests(data: DataConfig) -> list[str]:
    """Content hashes of the run's input files (part of the examples step's cache key)."""
    return list(data_digests(data).values())


def data_digests(data: DataConfig) -> dict[str, str]:
    """{field: sha256} of the run's input files (train, test, validation); empty for generated or hub data."""
    if data.source != "files":
        return {}
    return {f: file_digest(p) for f in ("train", "test", "validation") if (p := getattr(data, f))}


@flow(name="larev-pipeline", flow_run_name="larev-{params.run_name}", log_prints=True)
def larev_pipeline(params: PipelineParams = PipelineParams()) -> dict:
    """Train every enabled metric's evaluators (REV, LAREV, RORA, RQ / LAS) and score the rationale variants (and
    a user file) on the test split."""
    from flows.inputs import flow_input_check, pipeline_inputs

    if (failed := flow_input_check(pipeline_inputs, params)) is not None:
        return failed
    return run_pipeline(params)


def run_pipeline(params: PipelineParams, extra_rationales: ArtifactRef | None = None) -> dict:
    """The pipeline's steps inside the calling flow (`larev_pipeline`'s, or a benchmark seed's): every metric
    trained and scored, the run directory written. `extra_rationales`: a rationale table already in the store (a
    benchmark's perturbations, generated rationales), scored beside the variants and the user's file."""
    store = ArtifactStore(params.artifact_root)
    with StepRunner(store, gpu_deployment=params.gpu_deployment, scale_out=params.scale_out,
                    progress=params.progress,
                    concurrent_chains=params.concurrent_chains if params.gpu_deployment else 1) as steps:
        run, rationales, inputs = input_steps(steps, params, extra_rationales)
        # the one resolution step: every setting left unset, filled from the presets before any metric step
        params, resolved_from = resolved_params(params, run.task, tuple(SECTIONS))
        run.params, run.score = params, params.score
        models: dict[str, ArtifactRef] = {}
        tables: dict[str, ArtifactRef] = {}
        sections: list[ArtifactRef] = []
        scores: list[ArtifactRef] = []
        for metric in METRICS:
            if not metric.enabled(params):
                continue
            trained = metric.train(run, models)
            models.update(trained.models)
            tables.update(trained.tables)
            if (section := metric.report_section(run, trained)) is not None:
                sections.append(section)
            scores += metric.score(run, models, rationales)
        recorded = params.model_dump(mode="json")
        # the weights a pretrained backbone starts from (name, sha256; minilm-frozen's encoder digest)
        weights = cache_identity(params.model).get("base_weights")
        digests = data_digests(params.data)
        signatures = run_signatures(METRICS, models, recorded, backbone_weights=weights, data_digests=digests)
        report = steps.run(summarise_scores, scores, f"larev run '{params.run_name}'", sections, signatures)
    publish(store, report["report"], name=params.run_name)
    publish_score_table(store, report["summary"], params.run_name)
    refs = {**inputs, **models, **tables, **report}
    run_dir = export_run(store, str(Path(params.run_dir) / params.run_name), refs, recorded,
                         backbone_weights=weights, extra={"resolved_from": resolved_from, "signatures": signatures,
                                                          "data_digests": digests})
    return {"run_dir": run_dir, "refs": refs, "steps": steps.records, "signatures": signatures}


def input_steps(steps: StepRunner, params: PipelineParams, extra_rationales: ArtifactRef | None = None
                ) -> tuple[Run, ArtifactRef, dict[str, ArtifactRef]]:
    """The steps every metric builds on: examples, baselines, the rationale variants (and a user file, and a stored
    table of further rationales), the embedded tokenizer. Returns what the metrics read, the rationale table to
    score, and the input refs."""
    examples = steps.run(load_examples, params.data, source_digests(params.data))
    baselines = steps.run(make_baselines, examples, params.baselines)
    user = None
    if params.rationales:
        user = steps.run(load_rationales, params.rationales, file_digest(params.rationales), examples,
                         params.data.column_map or None)
    if extra_rationales is not None:
        extra = steps.run(stored_rationales, extra_rationales, examples)
        user = extra if user is None else steps.run(stacked_rationales, [user, extra])
    rationales = steps.run(make_rationale_variants, examples, baselines, params.variants, user)
    tokenizer = steps.run(train_tokenizer, examples, baselines, params.model)
    run = Run(steps=steps, examples=examples, baselines=baselines, baseline_config=params.baselines,
              score=params.score, device=params.train.device, tokenizer=tokenizer, params=params)
    inputs = {"examples": examples, "baselines": baselines, "rationales": rationales,
              **({"tokenizer": tokenizer} if tokenizer else {})}
    return run, rationales, inputs
