"""`larev bench quality`: the machine-readable results of one run of the whole protocol.

results.json = {"scores": {METRIC: {VARIANT: float}}, "accuracy": {METRIC: {VARIANT: float}},
                "separations": {METRIC: {"gold-leaky": ..., "SUM": ...}}, "n_test": int, "seconds": float}
METRIC is rev, larev (and larev_<ablation>), rora, rq, las. `scores` are the aggregate scores (REV eq. 6, LAREV
eq. 4.4, RORA eq. 10 averaged; RQ's mean accuracy gain; LAS's macro-average), `accuracy` the accuracy of the
evaluator that reads the rationale. An undefined value (LAS with an empty group) is null.
"""

from __future__ import annotations

import polars as pl

import math

from larev.metrics.rev import VARIANTS, separations
from larev.reports import markdown_table, separation_table


def _number(x) -> float | None:
    """JSON has no NaN: an undefined value is null."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def quality_results(summary: pl.DataFrame, *, n_test: int, seconds: float) -> dict:
    """results.json's content from a run's summary (metric, source, score, accuracy_with, ...)."""
    scores: dict[str, dict[str, float]] = {}
    accuracy: dict[str, dict[str, float]] = {}
    for row in summary.filter(pl.col("source").is_in(VARIANTS)).iter_rows(named=True):
        scores.setdefault(row["metric"], {})[row["source"]] = _number(row["score"])
        accuracy.setdefault(row["metric"], {})[row["source"]] = _number(row["accuracy_with"])
    seps = {m: {k: _number(v) for k, v in separations(summary, m).items()} for m in scores}
    return {"scores": scores, "accuracy": accuracy, "separations": seps, "n_test": n_test,
            "seconds": round(seconds, 1)}


def quality_markdown(summary: pl.DataFrame, results: dict, *, title: str) -> str:
    """The score table (metric x variant), the separations with their sum, and the evaluator accuracies."""
    metrics = list(results["scores"])
    wide = pl.DataFrame([{"metric": m, **{v: results["scores"][m].get(v) for v in VARIANTS}} for m in metrics])
    acc = pl.DataFrame([{"metric": m, **{v: results["accuracy"][m].get(v) for v in VARIANTS}} for m in metrics])
    return "\n".join([
        f"# {title}", "", f"{results['n_test']} test examples, {results['seconds']:.0f} s.", "",
        "## Mean score per rationale variant (nats)", "", markdown_table(wide), "",
        "## Separations: gold minus each degraded variant (all positive = the metric ranks gold first)", "",
        markdown_table(separation_table(summary)), "",
        "## Accuracy of the evaluator that reads the rationale", "", markdown_table(acc), ""])
