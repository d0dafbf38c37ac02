"""The seam every metric plugs into: what the pipeline, the score flow, the CLI and `bench quality` ask of a metric.

A metric (REV, LAREV, RORA, RQ / LAS) is a `Metric`: a small object in its task module that says

  name              what it is called in logs and run.json; its score rows carry this name or `score_names`
  score_names       the names its score rows carry (RQ / LAS: "rq", "las"); `--metrics` accepts each of them
  section, options  the pipeline parameter section it owns (`PipelineParams.<section>`, built from the registry)
                    and that section's pydantic model; a metric that reads another's section names it with
                    `options` None (RQ / LAS read RORA's)
  cli_options       its command-line switches (`MetricOption`: flag -> a field of its section), shown in
                    `larev run --help` beside the section's fields, which the UI form shows too
  controls          the control evaluators `bench quality --controls` switches on (its section's `controls`)
  enabled(p)        whether a pipeline with parameters `p` trains it (default: its section's `enabled`)
  train(run)        run its training steps; returns the model refs it needs to score (their keys are the metric's
                    own names in run.json, e.g. `larev`, `rora_phi:gold`) and diagnostic tables
  report_section(run, trained)  a step writing its part of the run's report.md (Markdown), or None
  definition_version  the version of the formula its score rows compute: part of every score's signature
  trained(models)   whether a finished run's models (run.json's artifacts) include everything it scores with
  score(run, models, rationales)  run its score steps; returns score tables (larev/metrics/scores.py's schema)
  bench_summary(artifacts, store)  its entry of `bench quality`'s results.json "leakage" section, or None
  bench_markdown(summary)          that entry as results.md lines (default: a table of its figures)

Before the first metric step, `resolved_params` fills every setting left unset (None, 'auto') from the presets
(larev/presets.toml) for the run's backbone, task and data: the steps receive their sections whole and concrete,
and run.json records them so.

`flows/metrics.py` lists the metrics in order (a metric may use models an earlier one trained: LAREV reads REV's
phi_base, RQ / LAS read RORA's theta); both flows, the CLI and the benches loop over that list. CONTRIBUTING.md has
the recipe for adding one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel

from larev.config import BaselineConfig, ScoreConfig
from larev.reports import summary_lines
from storage.ref import ArtifactRef
from tasks.runtime.runner import StepRunner


@dataclass
class Run:
    """What a metric's steps read: the runner (store, cache, progress), the run's inputs and options."""

    steps: StepRunner
    examples: ArtifactRef
    baselines: ArtifactRef
    baseline_config: BaselineConfig
    score: ScoreConfig
    device: str = "auto"
    tokenizer: ArtifactRef | None = None
    params: Any = None  # the pipeline's PipelineParams when training; None when scoring with a finished run
    saved_params: dict | None = None  # a finished run's params as its run.json holds them (scoring with its models)
    label: str = ""  # prefix of the score steps' names (e.g. 'addtext-')

    @cached_property
    def task(self) -> str:
        """The examples' task ('nli' or 'qa'), read once from the examples artifact (a file source's task is
        only known once its rows are read)."""
        from tasks.data import examples_task

        return examples_task(self.steps.store, self.examples)


@dataclass
class Trained:
    """A metric's training output: the models it scores with, and the diagnostic tables run.json lists."""

    models: dict[str, ArtifactRef] = field(default_factory=dict)
    tables: dict[str, ArtifactRef] = field(default_factory=dict)


_NO_CONST = object()


@dataclass(frozen=True)
class MetricOption:
    """A metric's command-line switch: `flag` sets `field` (a dotted path inside the metric's own section).
    `const`: a switch without a value that stores it (`--no-larev` stores False at `enabled`); `help`: words of its
    own instead of the field's description (type, choices and default always come from the field)."""

    flag: str
    field: str
    const: Any = _NO_CONST
    help: str | None = None

    @property
    def is_switch(self) -> bool:
        return self.const is not _NO_CONST


class Metric:
    """Base class of a metric (module docstring): the defaults of every hook; a metric overrides what it has."""

    name: str = ""
    score_names: tuple[str, ...] = ()  # empty: (name,)
    section: str | None = None
    options: type[BaseModel] | None = None
    description: str = ""  # the section's description in the UI form
    cli_options: tuple[MetricOption, ...] = ()
    controls: tuple[str, ...] = ()
    definition_version: str = "v1"  # a new formula under this name is a new metric or a new version

    def names(self) -> tuple[str, ...]:
        """What `--metrics` accepts for this metric: the names of its score rows."""
        return self.score_names or (self.name,)

    def enabled(self, params: Any) -> bool:
        if self.section is None:
            return True
        return bool(getattr(getattr(params, self.section), "enabled", True))

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        raise NotImplementedError

    def report_section(self, run: Run, trained: Trained) -> ArtifactRef | None:
        return None

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        raise NotImplementedError

    def row_names(self, models: dict[str, ArtifactRef]) -> list[str]:
        """The metric names its score rows carry with these models (LAREV adds its ablations and controls)."""
        return list(self.names())

    def signature_sections(self) -> tuple[str, ...]:
        """The parameter sections whose settings enter its scores besides the run's own (its section)."""
        return (self.section,) if self.section else ()

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        raise NotImplementedError

    def bench_summary(self, artifacts: dict, store: Any) -> dict | None:
        return None

    def bench_markdown(self, summary: dict) -> list[str]:
        return summary_lines(self.name, summary)


# The run's own sections: their settings enter every step, so resolution leaves them concrete (but `data`, whose
# unset fields belong to other sources) and every metric's signature covers them (`data` with its files' digests).
RUN_SECTIONS = ("data", "baselines", "model", "train", "score")


def resolved_params(params: Any, task: str, metric_sections: tuple[str, ...]) -> tuple[Any, dict[str, str]]:
    """The pipeline parameters with every unset setting (None, 'auto') filled from the presets for the run's
    backbone, task and data (larev/presets.py), validated again; and {setting path: the preset or setting that
    filled it}. Fails naming any setting of the run's or a metric's sections that no preset fills."""
    from larev.presets import data_kind, resolve_settings, unset_settings

    values = params.model_dump(mode="json")
    filled, provenance = resolve_settings(values, backbone=params.model.backbone, task=task,
                                          data=data_kind(params.data.source))
    checked = tuple(s for s in (*RUN_SECTIONS, *metric_sections) if s != "data")
    left = unset_settings(filled, checked)
    if left:
        raise ValueError(f"no preset fills {', '.join(left)} for backbone {params.model.backbone!r} and task "
                         f"{task!r}: set them (--set PATH=VALUE) or add a preset to larev/presets.toml")
    return type(params).model_validate(filled), provenance


PLACEMENT_FIELDS = ("device",)  # where a step runs, not what it computes


def _without_placement(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_placement(v) for k, v in value.items() if k not in PLACEMENT_FIELDS}
    return value


def metric_settings(metric: Metric, params: dict, data_digests: dict[str, str] | None = None) -> dict:
    """The resolved settings that enter `metric`'s scores: the run's RUN_SECTIONS and the metric's
    `signature_sections`, from run.json-shaped `params`; the data files named by their digests, not their paths."""
    data = dict(params.get("data", {}))
    for name, digest in (data_digests or {}).items():
        data[name] = f"sha256:{digest}"
    settings = {s: params.get(s) for s in RUN_SECTIONS if s != "data"} | {"data": data}
    settings |= {s: params.get(s) for s in metric.signature_sections()}
    return _without_placement(settings)


def run_signatures(metrics: list[Metric], models: dict[str, ArtifactRef], params: dict, *,
                   backbone_weights: dict | None = None, data_digests: dict[str, str] | None = None) -> dict[str, str]:
    """{score row metric name: its signature} for every metric whose models the run has (larev/signature.py)."""
    from larev import __version__
    from larev.signature import make_signature

    weights = (backbone_weights or {}).get("sha256")
    out = {}
    for metric in metrics:
        if not metric.trained(models):
            continue
        settings = metric_settings(metric, params, data_digests)
        for row in metric.row_names(models):
            out[row] = make_signature(row, metric.definition_version, params["model"]["backbone"], weights, settings,
                                      params["train"]["seed"], __version__)
    return out
