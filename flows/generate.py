"""Generate rationales for a run's test split, one source per generator (`larev generate`; issue 54, thesis
section 5.4.5): offline generators trained here on the training split, known-defect generators, Gemini, or a
Hugging Face model. The file it writes (id, source, rationale, label) is what `larev score --rationales` reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from larev.config import BaselineConfig, Device, ModelConfig
from larev.data.sources import DataConfig
from larev.generate.config import (EmbeddedGeneratorConfig, GeminiGeneratorConfig, GeneratorConfig,
                                   HypothesisCopyConfig, LabelOnlyConfig, as_generator_fields, check_distinct_names,
                                   default_generators)
from larev.generate.table import check_output_path
from flows.pipeline import source_digests
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.baselines import make_baselines
from tasks.data import load_examples
from tasks.export import read_run
from tasks.generate import (check_gemini_key, export_generated, gather_sources, generate_by_rule, generate_with_api,
                            generate_with_model, train_generator)
from tasks.runtime.runner import StepRunner
from tasks.stress import local_model_digest
from tasks.training import train_tokenizer


class GenerateParams(BaseModel):
    """Parameters of `larev generate` (the Prefect UI renders this as a form)."""

    model_config = ConfigDict(extra="forbid")

    run: str | None = Field(None, description="a finished pipeline run's directory: its test split is generated "
                                              "for, its training rows and tokenizer train the offline generators; "
                                              "or `data`")
    data: DataConfig | None = Field(None, description="instead of a run: the examples (the pipeline's data "
                                                      "section); the pipeline's input steps run here, cached")
    baselines: BaselineConfig = Field(default_factory=BaselineConfig,
                                      description="with data: the baselines the embedded tokenizer's vocabulary "
                                                  "reads (the pipeline's section)")
    model: ModelConfig = Field(default_factory=ModelConfig,
                               description="the pipeline's model section the embedded tokenizer is trained under "
                                           "(backbone 'embedded'), with data or for a run whose backbone is not "
                                           "the embedded one (an embedded run's own tokenizer is reused)")
    artifact_root: str = Field(".larev/store", description="with data: the artifact store (a run uses its own)")
    generators: list[GeneratorConfig] = Field(
        default_factory=default_generators,
        description="one source each, in order: a spec [NAME=]KIND[:ARG] (embedded:1/8, shuffled-pairs, label-only, "
                    "hypothesis-copy, gemini:MODEL, hf-seq2seq:MODEL, hf-causal:MODEL) or a generator's config; "
                    "default: the offline generators in their expected order of quality")
    out: str = Field(..., description="the rationale file to write (.jsonl, .csv or .parquet); its provenance "
                                      "goes to OUT.provenance.yaml")
    device: Device = Field("auto", description="where generators train and generate: auto (CUDA when present), "
                                               "cpu or cuda")
    progress: bool = Field(True, description="progress bars on long steps")
    refresh: bool = Field(False, description="recompute every step even where a cached result exists")
    gpu_deployment: str | None = Field(None, description="a deployment of the larev-step flow on a GPU work pool: "
                                                         "training and local generation run there")

    @field_validator("generators", mode="before")
    @classmethod
    def _specs(cls, value):
        return as_generator_fields(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _complete(self):
        if (self.run is None) == (self.data is None):
            raise ValueError("give exactly one of run (a finished run's directory) and data (the examples)")
        if self.model.backbone != "embedded":
            raise ValueError(f"model is the embedded tokenizer's section: backbone must be 'embedded', got "
                             f"{self.model.backbone!r}")
        check_output_path(self.out)
        check_distinct_names(self.generators)
        return self


@dataclass
class Inputs:
    """What the generators read: the examples, and the tokenizer of the trained generators (made on first use by
    `make_tokenizer`, which records what it made in `made`)."""

    steps: StepRunner
    examples: ArtifactRef
    make_tokenizer: Callable[[dict[str, ArtifactRef]], ArtifactRef]
    made: dict[str, ArtifactRef] = field(default_factory=dict)

    def tokenizer(self) -> ArtifactRef:
        if "tokenizer" not in self.made:
            self.made["tokenizer"] = self.make_tokenizer(self.made)
        return self.made["tokenizer"]

    def refs(self) -> dict[str, ArtifactRef]:
        """The input artifacts the generators read (the baselines and tokenizer when they were needed)."""
        return {"examples": self.examples, **self.made}


def run_inputs(steps: StepRunner, run: dict, vocabulary: ModelConfig) -> Inputs:
    """A finished run's examples and its embedded tokenizer (when its backbone is another: one trained here under
    `vocabulary`)."""
    refs = {k: ArtifactRef(**v) for k, v in run["artifacts"].items()}
    embedded = run["params"].get("model", {}).get("backbone", "embedded") == "embedded" and "tokenizer" in refs

    def tokenizer(made: dict[str, ArtifactRef]) -> ArtifactRef:
        if embedded:
            return refs["tokenizer"]
        made["baselines"] = refs["baselines"]
        return steps.run(train_tokenizer, refs["examples"], refs["baselines"], vocabulary)

    return Inputs(steps, refs["examples"], tokenizer)


def data_inputs(steps: StepRunner, params: GenerateParams) -> Inputs:
    """The pipeline's input steps on `params.data` (cached: the same as a pipeline run's with these settings)."""
    examples = steps.run(load_examples, params.data, source_digests(params.data))

    def tokenizer(made: dict[str, ArtifactRef]) -> ArtifactRef:
        made["baselines"] = steps.run(make_baselines, examples, params.baselines)
        return steps.run(train_tokenizer, examples, made["baselines"], params.model)

    return Inputs(steps, examples, tokenizer)


def generate_source(inputs: Inputs, config, device: str) -> dict[str, ArtifactRef]:
    """One generator's steps: train it when it is trained here, then generate its source for the test split."""
    steps, label = inputs.steps, f"generate-{config.name}"
    if isinstance(config, EmbeddedGeneratorConfig):
        if device != "auto":  # --device cpu|cuda: training too (as `larev run --device` sets train.device)
            config = config.model_copy(update={"train": config.train.model_copy(update={"device": device})})
        model = steps.run(train_generator, inputs.examples, inputs.tokenizer(), config,
                          step_label=f"generator-{config.name}")
        return steps.run(generate_with_model, inputs.examples, config, model, device, step_label=label)
    if isinstance(config, GeminiGeneratorConfig):
        return steps.run(generate_with_api, inputs.examples, config, step_label=label)
    if isinstance(config, (LabelOnlyConfig, HypothesisCopyConfig)):
        return steps.run(generate_by_rule, inputs.examples, config, step_label=label)
    return steps.run(generate_with_model, inputs.examples, config, None, device, local_model_digest(config.model),
                     step_label=label)


@flow(name="generate-rationales", log_prints=True)
def generate_rationales(params: GenerateParams) -> dict:
    """Write a rationale file for the test split of a run (or of `data`), one source per generator, in order; its
    provenance (every generator's config, rows and prompt or model) beside it."""
    from flows.inputs import flow_input_check, generate_inputs

    for check, argument in ((generate_inputs, params), (check_gemini_key, params.generators)):
        if (failed := flow_input_check(check, argument)) is not None:
            return failed
    run = read_run(params.run) if params.run is not None else None
    store = ArtifactStore(run["artifact_root"] if run else params.artifact_root)
    with StepRunner(store, gpu_deployment=params.gpu_deployment, refresh=params.refresh,
                    progress=params.progress) as steps:
        inputs = run_inputs(steps, run, params.model) if run else data_inputs(steps, params)
        sources = [generate_source(inputs, config, params.device) for config in params.generators]
        generated = steps.run(gather_sources, inputs.examples, sources)
    origin = {"run": params.run} if run else {"data": params.data.model_dump(mode="json")}
    written = export_generated(store, generated, params.out, origin)
    return {**written, "sources": [c.name for c in params.generators], "refs": {**inputs.refs(), **generated},
            "steps": steps.records}

