"""RORA's score (paper eq. 10): log p_Phi(y | x, r) - log p_theta(y | x), per rationale, averaged over the test set.

Phi is trained with IRMv1 over the counterfactual environments {D^e} (eq. 8), theta on x alone (eq. 9); both
log-probabilities use the project's one normalisation (`ScoreConfig.normalisation`, label-set by default).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.config import ScoreConfig
from larev.formats import input_only, input_with_rationale, task_inputs
from larev.metrics.scores import SCORE_COLUMNS, n_labels_of
from larev.models.evaluator import Evaluator, LabelScores, score_labels
from larev.schema import label_sets


def with_examples(rationales: pl.DataFrame, examples: pl.DataFrame) -> pl.DataFrame:
    """Rationale rows with their example's input columns and its gold label (`gold`)."""
    cols = examples.select("id", "task", "premise", "hypothesis", "question", "choices", pl.col("label").alias("gold"))
    rows = rationales.join(cols, on="id", how="left")
    missing = rows.filter(pl.col("task").is_null())
    if not missing.is_empty():
        raise ValueError(f"rationale for unknown example id {missing['id'][0]!r}")
    return rows


def pointwise_rora(logp_with: np.ndarray, logp_base: np.ndarray) -> np.ndarray:
    """Eq. 10 inside the expectation: log p_Phi(y | x, r) - log p_theta(y | x)."""
    return np.asarray(logp_with, dtype=np.float64) - np.asarray(logp_base, dtype=np.float64)


def base_scores(theta: Evaluator, rows: pl.DataFrame, label_column: str, config: ScoreConfig, *,
                progress: bool = False, desc: str = "theta(x)") -> pl.DataFrame:
    """theta's log p(label | x), once per distinct (id, label): id, <label_column>, logp_base, pred_base,
    correct_base."""
    unique = rows.unique(["id", label_column], keep="first", maintain_order=True)
    s = score_labels(theta, [input_only(x) for x in task_inputs(unique)], unique[label_column].to_list(),
                     label_sets(unique), config, progress=progress, desc=desc)
    return unique.select("id", label_column).with_columns(
        logp_base=pl.Series(s.logp), pred_base=pl.Series(s.predicted), correct_base=pl.Series(s.correct))


def with_scores(phi: Evaluator, rows: pl.DataFrame, labels: list[str], config: ScoreConfig, *,
                progress: bool = False, desc: str = "Phi(x, r)") -> LabelScores:
    return score_labels(phi, [input_with_rationale(x, r) for x, r in zip(task_inputs(rows), rows["rationale"])],
                        labels, label_sets(rows), config, progress=progress, desc=desc)


def score_rora(phi: Evaluator, theta: Evaluator, rationales: pl.DataFrame, examples: pl.DataFrame,
               config: ScoreConfig, *, metric: str = "rora", progress: bool = False) -> pl.DataFrame:
    """Pointwise RORA scores (eq. 10) for rationales (id, source, rationale, label); one row per (id, source)."""
    rows = with_examples(rationales, examples)
    s = with_scores(phi, rows, rows["label"].to_list(), config, progress=progress, desc=f"{metric}: Phi(x, r)")
    out = rows.select("id", "source", "label").with_columns(
        logp_with=pl.Series(s.logp), pred_with=pl.Series(s.predicted), correct_with=pl.Series(s.correct),
        n_labels=n_labels_of(label_sets(rows)))
    out = out.join(base_scores(theta, rows, "label", config, progress=progress), on=["id", "label"], how="left")
    out = out.with_columns(metric=pl.lit(metric), leaks=pl.lit(None, pl.Boolean), aggregate=pl.lit("mean"),
                           score=pl.Series(pointwise_rora(out["logp_with"].to_numpy(), out["logp_base"].to_numpy())))
    return out.select(SCORE_COLUMNS)
