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
  recorded_options(run)  its section as run.json records it, 'auto' settings made concrete (default: as given)
  trained(models)   whether a finished run's models (run.json's artifacts) include everything it scores with
  score(run, models, rationales)  run its score steps; returns score tables (larev/metrics/scores.py's schema)
  bench_summary(artifacts, store)  its entry of `bench quality`'s results.json "leakage" section, or None
  bench_markdown(summary)          that entry as results.md lines (default: a table of its figures)

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

    def recorded_options(self, run: Run) -> dict | None:
        """Its section as run.json records it, with settings that depend on the run made concrete (LAREV's
        `definition` 'auto' for the data's task and the backbone); None: as given."""
        return None

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        raise NotImplementedError

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        raise NotImplementedError

    def bench_summary(self, artifacts: dict, store: Any) -> dict | None:
        return None

    def bench_markdown(self, summary: dict) -> list[str]:
        return summary_lines(self.name, summary)
