"""The accuracy-based baselines of the REV paper (section 3.3): RQ and LAS.

RQ (Wiegreffe et al. 2021):  per example 1[proxy(x, r) = y] - 1[proxy(x) = y], y the GOLD label; RQ = the mean.
LAS (Hase et al. 2020):      the same accuracy gain for the label the rationale comes with (a model's prediction;
                             gold for the built-in variants), averaged separately over examples whose rationale
                             leaks that label and those whose rationale does not, then macro-averaged over the two
                             groups. A rationale leaks when a rationale-only model recovers its label from it.
                             An empty group makes LAS undefined: NaN, as in RORA's table 2.
Proxies here: the "with rationale" proxy is an evaluator trained on (x, r) of the source's training rationales,
the "without" proxy is RORA's theta on x alone (the reference simulators train one model on both input forms;
two models of the same backbone keep each form's training separate and theta shared with RORA), and the leakage
indicator is RORA's rationale-only model of the source.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.config import ScoreConfig
from larev.metrics.scores import SCORE_COLUMNS, leak_macro_average, n_labels_of
from larev.metrics.rora import base_scores, with_examples, with_scores
from larev.models.evaluator import Evaluator
from larev.leakage.rationale_model import RationaleModel, predict
from larev.schema import label_sets


def accuracy_gain(correct_with: np.ndarray, correct_base: np.ndarray) -> np.ndarray:
    """Per example 1[with rationale correct] - 1[without correct], in {-1, 0, 1} (RQ's and LAS's pointwise term)."""
    return np.asarray(correct_with, dtype=np.float64) - np.asarray(correct_base, dtype=np.float64)


def las_aggregate(gain: np.ndarray, leaks: np.ndarray) -> float:
    """LAS: the mean gain among leaking rationales and among the others, macro-averaged; NaN if a group is empty
    (`larev.metrics.scores.leak_macro_average` on one sample)."""
    gain, leaks = np.asarray(gain, dtype=np.float64), np.asarray(leaks, dtype=bool)
    return float(leak_macro_average(gain[leaks].sum(), leaks.sum(), gain[~leaks].sum(), (~leaks).sum()))


def score_rq_las(proxy: Evaluator, theta: Evaluator, rationale_model: RationaleModel, rationales: pl.DataFrame,
                 examples: pl.DataFrame, config: ScoreConfig, *, progress: bool = False) -> pl.DataFrame:
    """Pointwise RQ (column score = accuracy gain for the gold label) and LAS rows (gain for the rationale's
    label, with `leaks`) for every rationale. logp columns hold the proxies' log p of that label.

    Each (rationale, label) pair is scored once: where the rationale's label is the gold one (the built-in
    variants), RQ and LAS share the proxies' predictions."""
    rows = with_examples(rationales, examples).with_row_index("row")
    rows = rows.with_columns(n_labels=n_labels_of(label_sets(rows)))
    pairs = (pl.concat([rows.select("row", target="gold"), rows.select("row", target="label")])
             .unique(maintain_order=True).join(rows.drop("label"), on="row"))
    s = with_scores(proxy, pairs, pairs["target"].to_list(), config, progress=progress, desc="rq/las: proxy(x, r)")
    with_rationale = pairs.select("row", "target").with_columns(
        logp_with=pl.Series(s.logp), pred_with=pl.Series(s.predicted), correct_with=pl.Series(s.correct))
    base = base_scores(theta, pairs, "target", config, progress=progress, desc="rq/las: proxy(x)")
    predicted = predict(rationale_model, rows["rationale"].to_list(), label_sets(rows))
    leaks = pl.Series([p == y for p, y in zip(predicted, rows["label"])], dtype=pl.Boolean)
    frames = []
    for metric, column in (("rq", "gold"), ("las", "label")):
        out = (rows.select("row", "id", "source", "label", "n_labels", target=column)
               .join(with_rationale, on=["row", "target"], how="left")
               .join(base, on=["id", "target"], how="left").sort("row"))
        out = out.with_columns(metric=pl.lit(metric),
                               leaks=leaks if metric == "las" else pl.lit(None, pl.Boolean),
                               aggregate=pl.lit("leak_macro" if metric == "las" else "mean"),
                               score=pl.Series(accuracy_gain(out["correct_with"].to_numpy(),
                                                             out["correct_base"].to_numpy())))
        frames.append(out.select(SCORE_COLUMNS))
    return pl.concat(frames)
