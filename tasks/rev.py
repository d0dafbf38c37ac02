"""REV's steps: its two evaluators (phi_base on b, phi on [r, b]) and the score step of REV's estimator (also
LAREV's, with phi_LA in place of phi)."""

from __future__ import annotations

import polars as pl

import larev.metrics.rev as rev
from larev.baselines.build import build_baselines
from larev.config import BaselineConfig, ModelConfig, ScoreConfig, TrainConfig
from larev.formats import target_text
from larev.methods.rev.inputs import ROLES, evaluator_inputs
from larev.models.evaluator import load_evaluator
from larev.models.train import train_evaluator
from larev.schema import label_sets
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.checkpoints import epoch_checkpoints
from tasks.metric import Metric, Run, Trained
from tasks.runtime.outputs import put_table
from tasks.training import new_run_evaluator, put_evaluator, split_train_validation, training_frame


@larev_task("train", task_run_name="train-{role}", gpu=True)
def train_model(store: ArtifactStore, role: str, examples: ArtifactRef, baselines: ArtifactRef,
                tokenizer: ArtifactRef | None, model: ModelConfig, train: TrainConfig,
                progress: bool = True) -> ArtifactRef:
    """Train one evaluator (phi_base on b, phi on [r, b], or LAREV's r_only control on r) and save it with its
    configs and history."""
    tr, val = split_train_validation(training_frame(store, examples, baselines))
    ev = new_run_evaluator(store, tokenizer, model, train.seed)
    with epoch_checkpoints(store, role, train.epochs) as checkpoints:
        train_evaluator(ev, evaluator_inputs(role, tr), [target_text(y) for y in tr["label"]],
                        evaluator_inputs(role, val), [target_text(y) for y in val["label"]], label_sets(val), train,
                        progress=progress, desc=role, checkpointer=checkpoints)
        return put_evaluator(store, role, ev, role)


def baselines_for(store: ArtifactStore, examples: pl.DataFrame, baselines: ArtifactRef, rationales: pl.DataFrame,
                  config: BaselineConfig) -> pl.DataFrame:
    """Baselines for every (id, label) among the rationales: the stored gold-label ones, plus any label a
    rationale file asserts that is not the gold one (b states the label being evaluated)."""
    known = store.read_parquet(baselines.key).select("id", "label", "baseline")
    wanted = rationales.select("id", "label").unique()
    missing = wanted.join(known, on=["id", "label"], how="anti")
    if missing.is_empty():
        return known
    rows = examples.drop("label").join(missing, on="id", how="inner")
    extra = build_baselines(rows, config, progress=False).with_columns(label=rows["label"])
    return pl.concat([known, extra.select("id", "label", "baseline")])


@larev_task("score", task_run_name="score-{metric}")
def score_metric(store: ArtifactStore, metric: str, phi: ArtifactRef, phi_base: ArtifactRef, rationales: ArtifactRef,
                 examples: ArtifactRef, baselines: ArtifactRef, baseline_config: BaselineConfig,
                 score: ScoreConfig, device: str = "auto", progress: bool = True, zero: str = "base") -> ArtifactRef:
    """Pointwise scores (REV eq. 5; LAREV eq. 4.4 when phi is phi_LA) for every rationale, with both
    evaluators' predictions; `zero`: what log p_base is (larev.metrics.rev.score_rev)."""
    ex = store.read_parquet(examples.key)
    rat = store.read_parquet(rationales.key)
    b = baselines_for(store, ex, baselines, rat, baseline_config)
    g_prime = load_evaluator(store.get_dir(phi.key), device=device)
    g = load_evaluator(store.get_dir(phi_base.key), device=device) if zero == "base" else None
    scores = rev.score_rev(g_prime, g, rat, ex, b, score, metric=metric, progress=progress, zero=zero)
    return put_table(store, "scores.parquet", scores)


@larev_task("relabel-scores", task_run_name="score-{metric}")
def relabel_scores(store: ArtifactStore, scores: ArtifactRef, metric: str) -> ArtifactRef:
    """Another metric's score table under `metric`'s name: what a score step gives for a model already scored
    under another name (the same artifact, the same rows), without scoring it again."""
    return put_table(store, "scores.parquet", store.read_parquet(scores.key).with_columns(metric=pl.lit(metric)))


def score_with_estimator(run: Run, metric: str, phi: ArtifactRef, phi_base: ArtifactRef,
                         rationales: ArtifactRef | list[ArtifactRef], zero: str = "base") -> ArtifactRef:
    """REV's estimator (eq. 5) of `metric` with `phi` as g' and, as the zero point, phi_base on b (`zero`
    'base') or phi's own reading of no rationale ('empty'), over a rationale table."""
    return run.steps.score(score_metric, metric, phi, phi_base, rationales=rationales, examples=run.examples,
                           baselines=run.baselines, baseline_config=run.baseline_config, score=run.score,
                           device=run.device, zero=zero, step_label=f"{run.label}score-{metric}")


class Rev(Metric):
    """REV: phi_base and phi, scored with eq. 5. No section of its own: it reads the run's `model`, `train` and
    `score` sections, and always trains (its evaluators are LAREV's too)."""

    name = "rev"

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        p = run.params
        return Trained(models={role: run.steps.run(train_model, role, run.examples, run.baselines, run.tokenizer,
                                                   p.model, p.train, step_label=f"train-{role}")
                               for role in ROLES})

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return set(ROLES) <= set(models)

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        return [score_with_estimator(run, "rev", models["phi"], models["phi_base"], rationales)]
