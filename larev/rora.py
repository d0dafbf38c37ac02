"""RORA (Jiang et al. 2024): leakage-robust rationale evaluation, the pieces between the core modules.

  3.1  leaky spans of the training rationales       larev/rationale_leakage.py
  3.2  counterfactual rationales r^e for every label  larev/infill.py (this module builds its examples)
  3.3  Phi: IRMv1 over the environments {D^e} (eq. 8) the IRM loop of larev/leakage_aware.py, probe weight 0,
       penalty on the label-set-normalised log-probability (irm_on='label_set')
       theta: log p(y | x) with no rationale (eq. 9)   the shared evaluator training loop
       score: log p_Phi(y | x, r) - log p_theta(y | x) (eq. 10)   larev/metrics/rora.py

Which rationales the models learn from. RORA's evaluator reads rationales from the distribution it is trained on
(eq. 10's note: the test set has the training set's rationale distribution), so `train_on='each_source'` (the
paper's protocol, default) trains the rationale-only model, the infiller and Phi once per rationale source that
has training rationales: the built-in variants, which larev can build for the training split too. Sources with
test rationales only (a user's model outputs) are scored with the models trained on the gold rationales.
`train_on='gold'` trains once on the gold rationales and scores every source with them (cheaper).
"""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import Field

from larev.addtext.perturb import SOURCE_TAG as ADDTEXT_TAG
from larev.config import TrainConfig, _Config
from larev.formats import infill_input, input_with_rationale, task_input
from larev.infill import InfillerConfig, mask_spans, rebuild, sentinel_target
from larev.leakage_aware import LAInstance, LeakageAwareConfig
from larev.rationale_leakage import LeakageDetectionConfig
from larev.schema import label_sets


class RoraConfig(_Config):
    """Everything RORA needs beyond the evaluator backbone; also switches the RQ and LAS baselines."""

    enabled: bool = Field(True, description="train RORA's models and score RORA, RQ and LAS")
    train_on: Literal["each_source", "gold"] = Field(
        "each_source", description="each_source: models per rationale source with training rationales (the "
                                   "paper's protocol); gold: one set of models from the gold rationales")
    detection: LeakageDetectionConfig = Field(default_factory=LeakageDetectionConfig,
                                              description="the rationale-only model and the leaky-word threshold")
    infiller: InfillerConfig = Field(default_factory=InfillerConfig, description="counterfactual infilling")
    objective: LeakageAwareConfig = Field(
        default_factory=lambda: LeakageAwareConfig(lambda_irm=1.0, lambda_probe=0.0, irm_on="label_set"),
        description="Phi's eq. 8: IRMv1 weight on the label-set scores (no probe term in RORA)")
    phi_train: TrainConfig = Field(default_factory=lambda: TrainConfig(epochs=2, batch_size=16),
                                   description="Phi: batch_size counts examples, each with all its environments")

    def sources(self, variants: list[str]) -> list[str]:
        """The rationale sources that get their own models ('gold' always: it scores every other source)."""
        if self.train_on == "gold":
            return ["gold"]
        return ["gold", *[v for v in variants if v != "gold"]]


def model_source(source: str, trained: list[str]) -> str:
    """The source whose models score `source`: its own when trained, else gold's. An AddText copy
    (`gold+addtext-rand-end`) is scored with its original source's models."""
    if source in trained:
        return source
    base = source.split(ADDTEXT_TAG, 1)[0]
    return base if base in trained else "gold"


def x_texts(frame: pl.DataFrame) -> list[str]:
    """RORA's x for every row of an examples-shaped frame."""
    return [task_input(t, p, h, q, c) for t, p, h, q, c in
            zip(frame["task"], frame["premise"], frame["hypothesis"], frame["question"], frame["choices"])]


def infill_examples(frame: pl.DataFrame, spans: list[list[list[int]]], max_spans: int) -> pl.DataFrame:
    """The infiller's training pairs for rows with at least one leaky span: input y (+) x (+) masked r, target
    the spans in sentinel format. `frame` holds the examples' columns and `rationale`."""
    rows = []
    for x, r, y, row_spans in zip(x_texts(frame), frame["rationale"], frame["label"], spans):
        if not row_spans:
            continue
        masked, originals = mask_spans(r, row_spans, max_spans)
        rows.append({"input": infill_input(y, x, masked), "target": sentinel_target(originals)})
    return pl.DataFrame(rows, schema={"input": pl.String, "target": pl.String})


def counterfactual_requests(frame: pl.DataFrame, spans: list[list[list[int]]],
                            max_spans: int) -> pl.DataFrame:
    """One row per (example, label e of its label set): the masked rationale and the infiller input for e."""
    rows = []
    for i, (x, r, cands, row_spans) in enumerate(zip(x_texts(frame), frame["rationale"], label_sets(frame),
                                                    spans)):
        masked, originals = mask_spans(r, row_spans or [], max_spans)
        for k, e in enumerate(cands):
            rows.append({"row": i, "env": k, "env_label": e, "masked": masked, "n_spans": len(originals),
                         "input": infill_input(e, x, masked)})
    return pl.DataFrame(rows, schema={"row": pl.Int64, "env": pl.Int64, "env_label": pl.String, "masked": pl.String,
                                      "n_spans": pl.Int64, "input": pl.String})


def rebuild_all(masked: list[str], fills: list[list[str | None]]) -> tuple[list[str], list[int]]:
    """The counterfactual rationales and, per row, how many fills were missing."""
    out = [rebuild(m, f) for m, f in zip(masked, fills)]
    return [t for t, _ in out], [n for _, n in out]


def rora_instances(frame: pl.DataFrame, env_rationales: list[list[str]], n_env: int) -> list[LAInstance]:
    """Phi's training instances: for each example, input_with_rationale(x, r^e) for e = 1..n_env, the gold label.

    A QA example with fewer choices than `n_env` repeats its original rationale in the missing environments.
    """
    out = []
    for x, r, y, cands, envs in zip(x_texts(frame), frame["rationale"], frame["label"], label_sets(frame),
                                    env_rationales):
        texts = list(envs) + [r] * (n_env - len(envs))
        out.append(LAInstance(inputs=tuple(input_with_rationale(x, t) for t in texts[:n_env]), probe_input="",
                              label=y, candidates=tuple(cands)))
    return out


def environment_names(n_env: int) -> tuple[str, ...]:
    return tuple(f"D{k + 1}" for k in range(n_env))
