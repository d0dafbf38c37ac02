"""r_only's steps: the rationale-only evaluator g_r (REV's training step, role `r_only`) and REV's estimator with
g_r in phi's place (larev/methods/rev/r_only.py)."""

from __future__ import annotations

from larev.methods.rev.r_only import ROnlyConfig
from storage.ref import ArtifactRef
from tasks.metric import Metric, MetricOption, Run, Trained
from tasks.rev import score_with_estimator, train_model

ROLE = "r_only"


class ROnly(Metric):
    """r_only = log g_r[r](y) - log phi_base[b](y): g_r trained on r alone, phi_base REV's. Off unless asked for.
    Its training step is the one LAREV's `r_only` control runs (same step, same inputs: one model for both)."""

    name = "r_only"
    section = "r_only"
    options = ROnlyConfig
    description = ("r_only: REV's estimator with an evaluator that reads the rationale alone in phi's place (off "
                   "unless asked for)")
    cli_options = (MetricOption("--r-only", "enabled", const=True,
                                help="also train and score r_only (the rationale read alone, against phi_base on b)"),)

    def signature_sections(self) -> tuple[str, ...]:
        return ()  # g_r and phi_base train with the run's own sections; `enabled` computes nothing

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        p = run.params
        return Trained(models={self.name: run.steps.run(train_model, ROLE, run.examples, run.baselines, run.tokenizer,
                                                        p.model, p.train, step_label=f"train-{ROLE}")})

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return self.name in models and "phi_base" in models

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        return [score_with_estimator(run, self.name, models[self.name], models["phi_base"], rationales)]
