"""The seam every metric plugs into: what the pipeline and the score flow ask of a metric.

A metric (REV, LAREV, RORA, RQ / LAS) is an object with

  name            what it is called in logs and `--metrics`
  enabled(p)      whether a pipeline with parameters `p` trains it
  train(run)      run its training steps; returns the model refs it needs to score (their keys are the metric's
                  own names in run.json, e.g. `larev`, `rora_phi:gold`) and diagnostic tables for the report
  trained(models) whether a finished run's models (run.json's artifacts) include everything it scores with
  score(run, models, rationales)  run its score steps; returns score tables (larev/metrics/scores.py's schema)

`flows/metrics.py` lists the metrics in order (a metric may use models an earlier one trained: LAREV reads REV's
phi_base, RQ / LAS read RORA's theta); both flows loop over that list. CONTRIBUTING.md has the recipe for adding one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from larev.config import BaselineConfig, ScoreConfig
from storage.ref import ArtifactRef
from tasks.runner import StepRunner


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


@dataclass
class Trained:
    """A metric's training output: the models it scores with, and tables / models its report section reads."""

    models: dict[str, ArtifactRef] = field(default_factory=dict)
    tables: dict[str, ArtifactRef] = field(default_factory=dict)
    report_models: dict[str, ArtifactRef] = field(default_factory=dict)


class Metric(Protocol):
    name: str

    def enabled(self, params: Any) -> bool: ...

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained: ...

    def trained(self, models: dict[str, ArtifactRef]) -> bool: ...

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]: ...
