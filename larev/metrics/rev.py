"""REV: rationale evaluation with conditional V-information (REV paper section 2.2).

pointwise   REV(x, y, r) = log g'[r, b](y) - log g[b](y)          (eq. 5)
aggregate   REV_D = mean_i REV(x_i, y_i, r_i)                      (eq. 6)
g  = phi_base, trained on the vacuous baseline b alone;  g' = phi, trained on [r, b].
Both log-probabilities use the same normalisation (`ScoreConfig.normalisation`).

LAREV's experimental definition ('new_information', docs/methods.md) keeps g' = phi_LA and takes the zero point from
g' itself: log g'[empty, b](y), the reading of no rationale (`zero='empty'`); an empty rationale then scores 0
exactly, and any other score says what r adds to that reading.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.config import ScoreConfig
from larev.formats import baseline_input, rationale_input, rationale_only_input
from larev.metrics.scores import SCORE_COLUMNS, n_labels_of
from larev.models.evaluator import Evaluator, score_labels
from larev.schema import label_sets


def pointwise_rev(logp_with: np.ndarray, logp_base: np.ndarray) -> np.ndarray:
    """REV eq. 5: log g'[r, b](y) - log g[b](y), per example."""
    return np.asarray(logp_with, dtype=np.float64) - np.asarray(logp_base, dtype=np.float64)


def aggregate(pointwise: np.ndarray) -> float:
    """REV eq. 6: the mean pointwise score over the test set (nan for an empty set)."""
    pointwise = np.asarray(pointwise, dtype=np.float64)
    return float(pointwise.mean()) if pointwise.size else float("nan")


ZEROS = ("base", "empty")  # score_rev's zero points


def reading_inputs(phi: Evaluator, rows: pl.DataFrame, *, empty: bool = False) -> list[str]:
    """The inputs of g' (the evaluator that reads the rationale): [r, b], or r alone for an evaluator trained
    that way (the `r_only` control). Every evaluator is scored on the input form it was trained on (its saved
    role). empty: the same inputs with no rationale ([empty, b]; the zero point 'empty')."""
    rationales = [""] * rows.height if empty else rows["rationale"].to_list()
    if phi.meta.get("role") == "r_only":
        return [rationale_only_input(r) for r in rationales]
    return [rationale_input(r, b) for r, b in zip(rationales, rows["baseline"])]


def score_rev(phi: Evaluator, phi_base: Evaluator | None, rationales: pl.DataFrame, examples: pl.DataFrame,
              baselines: pl.DataFrame, config: ScoreConfig, *, metric: str = "rev",
              progress: bool = False, zero: str = "base") -> pl.DataFrame:
    """Score rationales (id, source, rationale, label) with REV; one row per (id, source).

    The same estimator gives LAREV (thesis eq. 4.4) when `phi` is the leakage-aware phi_LA: `metric` names it.
    zero: the second term. 'base': log phi_base[b](y) (REV eq. 5, the thesis's LAREV); 'empty': log phi[empty,
    b](y), phi's own reading of no rationale (LAREV's 'new_information'; phi_base unused, may be None). The
    columns logp_base / pred_base / correct_base hold that term's figures either way.

    examples: the canonical examples (for the label set of each id); baselines: id, label, baseline for every
    (id, label) pair among the rationales (b states the label being evaluated, which need not be the gold one).
    g[b](y) is computed once per distinct (id, label) and shared by every rationale of that pair.
    """
    rows = (rationales.join(examples.select("id", "task", "choices"), on="id", how="left")
            .join(baselines.select("id", "label", "baseline"), on=["id", "label"], how="left"))
    missing = rows.filter(pl.col("baseline").is_null())
    if not missing.is_empty():
        raise ValueError(f"no baseline for (id, label) {missing.select('id', 'label').row(0)}")
    cands = label_sets(rows)
    labels = rows["label"].to_list()
    with_scores = score_labels(phi, reading_inputs(phi, rows), labels, cands, config, progress=progress,
                               desc=f"{metric}: g'[r, b]")
    base_rows = rows.unique(["id", "label"], keep="first", maintain_order=True)
    base_cands = label_sets(base_rows)
    if zero == "base":
        if phi_base is None:
            raise ValueError("zero='base' needs phi_base")
        base_scores = score_labels(phi_base, [baseline_input(b) for b in base_rows["baseline"]],
                                   base_rows["label"].to_list(), base_cands, config, progress=progress,
                                   desc=f"{metric}: g[b]")
    elif zero == "empty":
        base_scores = score_labels(phi, reading_inputs(phi, base_rows, empty=True), base_rows["label"].to_list(),
                                   base_cands, config, progress=progress, desc=f"{metric}: g'[empty, b]")
    else:
        raise ValueError(f"zero must be one of {ZEROS}, got {zero!r}")
    base = base_rows.select("id", "label").with_columns(
        logp_base=pl.Series(base_scores.logp), pred_base=pl.Series(base_scores.predicted),
        correct_base=pl.Series(base_scores.correct))
    out = rows.select("id", "source", "label").with_columns(
        logp_with=pl.Series(with_scores.logp), pred_with=pl.Series(with_scores.predicted),
        correct_with=pl.Series(with_scores.correct), n_labels=n_labels_of(cands))
    out = out.join(base, on=["id", "label"], how="left")
    out = out.with_columns(metric=pl.lit(metric), leaks=pl.lit(None, pl.Boolean), aggregate=pl.lit("mean"),
                           score=pl.Series(pointwise_rev(out["logp_with"].to_numpy(), out["logp_base"].to_numpy())))
    return out.select(SCORE_COLUMNS)
