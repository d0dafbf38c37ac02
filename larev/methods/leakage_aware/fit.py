"""phi_LA's training step as the pipeline and the GPU check both run it: the instances of an environment frame
(`phi_la_plan`), then eq. 4.10's training loop on them (`fit_phi_la`). Every setting arrives resolved."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from larev.config import TrainConfig
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.methods.leakage_aware.counterfactuals import exclusive_terms_named
from larev.methods.leakage_aware.instances import la_env_names, la_instances
from larev.methods.leakage_aware.training import LAResult, epochs_for_min_steps, train_leakage_aware
from larev.models.checkpoint import Checkpointer
from larev.models.evaluator import Evaluator
from larev.schema import label_sets


@dataclass
class PhiLAPlan:
    """What phi_LA trains on, built from an environment frame (`phi_la_plan`): its instances, the validation
    instances and label sets, the training config with its epochs grown to the minimum steps, and what the
    evaluator's meta records of the rows."""

    train_instances: list
    val_instances: list
    val_candidates: list[list[str]]
    train: TrainConfig
    env_names: tuple[str, ...]
    task: str
    meta: dict


def phi_la_plan(frame, env_names: list[str], train: TrainConfig, objective: LeakageAwareConfig, *, min_steps: int,
                label_edits: str, exclusive_terms: str, mask_token: str, desc: str = "phi_LA") -> PhiLAPlan:
    """phi_LA's training and validation instances from an environment frame (train and validation rows, one column
    per environment; `instances.environment_frame`), every setting resolved: the objective's zero-term rows
    where it has them, counterfactual twins (train rows only) where `exclusive_terms` names terms, the label's
    own text edited by `label_edits`, at least `min_steps` optimizer steps."""
    terms = exclusive_terms_named(exclusive_terms)
    task = frame["task"][0]
    tr, val = frame.filter(pl.col("split") == "train"), frame.filter(pl.col("split") == "validation")
    edits = {"label_edits": label_edits, "mask_token": mask_token,
             "empty_rationales": objective.empty_rationales,
             "borrowed": objective.empty_rationales and (objective.lambda_borrowed or 0.0) > 0,
             "label_statements": objective.label_statements,
             "baseline_rationales": objective.baseline_rationales, "seed": train.seed}
    twins = {"counterfactuals": objective.counterfactual_rationales if terms else 0.0, "exclusive_terms": terms}
    train_instances = la_instances(tr, env_names, **edits, **twins, mismatched=objective.lambda_mismatched > 0)
    meta = {"label_edits": label_edits,
            "zero_rows": {"empty_rationales": edits["empty_rationales"], "borrowed": edits["borrowed"],
                          "label_statements": edits["label_statements"],
                          "baseline_rationales": edits["baseline_rationales"],
                          "counterfactuals": len(train_instances) - tr.height if terms else 0,
                          "exclusive_terms": exclusive_terms if terms else "none",
                          "mismatched": sum(x.mismatched_input is not None for x in train_instances)}}
    return PhiLAPlan(train_instances=train_instances, val_instances=la_instances(val, env_names, **edits),
                     val_candidates=label_sets(val),
                     train=epochs_for_min_steps(train, len(train_instances), min_steps, desc=desc),
                     env_names=tuple(la_env_names(env_names, label_edits)), task=task, meta=meta)


def fit_phi_la(phi_la: Evaluator, probe: Evaluator | None, plan: PhiLAPlan, objective: LeakageAwareConfig, *,
               progress: bool = True, checkpointer: Checkpointer | None = None, desc: str = "phi_LA") -> LAResult:
    """Train phi_LA in place on `plan` with eq. 4.10 (`train_leakage_aware`) and record the plan in its meta: the
    one phi_LA training step the pipeline's task and the GPU check (larev/bench/gpu.py) both call."""
    result = train_leakage_aware(phi_la, probe, plan.train_instances, plan.val_instances, plan.val_candidates,
                                 plan.train, objective, task=plan.task, progress=progress, env_names=plan.env_names,
                                 checkpointer=checkpointer, desc=desc)
    phi_la.meta.update(plan.meta)
    return result
