"""FTC end to end: counterfactuals for every (example, case), the task model on them, and the three FTC figures.

`ftc_scores` is pure given its extractor and task model: rows in, a per-row table and a summary out.

Aggregation. A neutral example has two counterfactual cases (N[A] and N[B], proposition 3), so the table has one
row per (example, case): one for entailment and contradiction examples, two for neutral ones. Each FTC figure
is averaged over the table rows that have a counterfactual, overall and per case (C, E, N[A], N[B] are the
columns of tables 4 and 5); rows without one keep their reason and are counted per reason, never dropped.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import polars as pl

from larev.errors import InputError
from larev.stress.ftc.counterfactual import build_counterfactuals
from larev.stress.ftc.distances import DEFAULT_ALPHA, EPS, as_probs, ftc_delta, ftc_kl, ftc_wasserstein, ground_distance
from larev.stress.ftc.relations import FtcAttempt, RelationExtractor
from larev.stress.ftc.task_model import NliTaskModel
from larev.schema import NLI_LABELS

PROB_COLUMNS = tuple(f"p_{label}" for label in NLI_LABELS)
FIGURES = ("ftc_delta", "ftc_kl", "ftc_wasserstein")
CASE_ORDER = ("C", "E", "N[A]", "N[B]")

TABLE_SCHEMA: dict[str, pl.DataType] = {
    "row": pl.Int64, "id": pl.String, "label": pl.String, "case": pl.String, "y_cf": pl.String,
    "backend": pl.String, "template": pl.String, "a": pl.String, "b": pl.String, "x_cf": pl.String,
    "reason": pl.String, "note": pl.String,
    **{c: pl.Float64 for c in PROB_COLUMNS}, "predicted": pl.String,
    **{f: pl.Float64 for f in FIGURES},
}


def _check_rows(rows: pl.DataFrame, explanation_column: str) -> None:
    required = ("premise", "hypothesis", explanation_column, "label")
    missing = [c for c in required if c not in rows.columns]
    if missing:
        raise InputError(f"FTC rows lack the column(s) {missing}; they need {list(required)}")
    for i, (label, premise, hypothesis) in enumerate(zip(rows["label"], rows["premise"], rows["hypothesis"])):
        if label not in NLI_LABELS:
            raise InputError(f"label {label!r} is not one of {list(NLI_LABELS)}", row=i, column="label")
        if premise is None or hypothesis is None:
            raise InputError("premise and hypothesis must be present", row=i,
                             column="premise" if premise is None else "hypothesis")


def counterfactual_attempts(rows: pl.DataFrame, extractor: RelationExtractor, *,
                            explanation_column: str = "explanation") -> list[tuple[int, FtcAttempt, str | None]]:
    """(row index, attempt, extraction note) for every case of every row, in row order."""
    _check_rows(rows, explanation_column)
    out = []
    for i, row in enumerate(rows.select("hypothesis", explanation_column, "label").iter_rows()):
        hypothesis, explanation, label = row
        extraction = extractor.extract(explanation or "", hypothesis, label)
        out.extend((i, att, extraction.note) for att in build_counterfactuals(extraction, hypothesis, label))
    return out


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarise(table: pl.DataFrame, n_examples: int, alpha: float) -> dict[str, Any]:
    """Counts, reasons and mean FTC figures of a table made by `ftc_scores`."""
    done = table.filter(pl.col("reason").is_null())
    summary: dict[str, Any] = {
        "n_examples": n_examples,
        "n_examples_extracted": done["row"].n_unique(),
        "n": table.height,
        "n_extracted": done.height,
        "n_unextracted": table.height - done.height,
        "unextracted_reasons": dict(Counter(table["reason"].drop_nulls().to_list()).most_common()),
        "backends": dict(Counter(table["backend"].to_list()).most_common()),
        "alpha": alpha,
        **{f: _mean(done[f].to_list()) for f in FIGURES},
        "by_case": {},
    }
    for case in CASE_ORDER:
        part = table.filter(pl.col("case") == case)
        if part.height:
            ok = part.filter(pl.col("reason").is_null())
            summary["by_case"][case] = {"n": part.height, "n_extracted": ok.height,
                                        **{f: _mean(ok[f].to_list()) for f in FIGURES}}
    return summary


def ftc_scores(rows: pl.DataFrame, extractor: RelationExtractor, task_model: NliTaskModel,
               alpha: float = DEFAULT_ALPHA, *, explanation_column: str = "explanation",
               eps: float = EPS) -> tuple[pl.DataFrame, dict[str, Any]]:
    """FTC-delta, FTC-K and FTC-W (section 2.3) of every explanation in `rows`.

    rows: premise, hypothesis, `explanation_column`, label (the label the explanation explains; an `id`
    column is carried over when present). The task model is called once on all counterfactuals.

    Returns the per-(example, case) table (columns of TABLE_SCHEMA: `row` indexes `rows`; reason is null
    exactly when x_cf was built; the p_* columns, predicted and the FTC figures are null otherwise) and the
    summary of `summarise`.
    """
    ground_distance(alpha)  # validates alpha before any work
    attempts = counterfactual_attempts(rows, extractor, explanation_column=explanation_column)
    done = [(i, att.counterfactual) for i, att, _ in attempts if att.counterfactual is not None]
    premises = rows["premise"].to_list()
    probs = np.zeros((0, len(NLI_LABELS)))
    if done:
        output = task_model.predict_proba([premises[i] for i, _ in done], [cf.x_cf for _, cf in done])
        probs = as_probs(output, "task model output")
        if len(probs) != len(done):
            raise ValueError(f"the task model returned {len(probs)} rows for {len(done)} counterfactuals")
    y_cf = [cf.y_cf for _, cf in done]
    figures = {"ftc_delta": ftc_delta(probs, y_cf), "ftc_kl": ftc_kl(probs, y_cf, eps),
               "ftc_wasserstein": ftc_wasserstein(probs, y_cf, alpha)} if done else {f: [] for f in FIGURES}
    ids = rows["id"].cast(pl.String).to_list() if "id" in rows.columns else [None] * rows.height
    labels = rows["label"].to_list()
    records = []
    k = 0
    for i, att, note in attempts:
        cf, rel = att.counterfactual, att.relation
        record: dict[str, Any] = {
            "row": i, "id": ids[i], "label": labels[i], "case": att.case, "y_cf": att.y_cf, "backend": att.backend,
            "template": rel.template if rel else None, "a": rel.a if rel else None, "b": rel.b if rel else None,
            "x_cf": cf.x_cf if cf else None, "reason": att.reason, "note": note,
            **{c: None for c in PROB_COLUMNS}, "predicted": None, **{f: None for f in FIGURES},
        }
        if cf is not None:
            record.update({c: float(probs[k, j]) for j, c in enumerate(PROB_COLUMNS)})
            record["predicted"] = NLI_LABELS[int(probs[k].argmax())]
            record.update({f: float(figures[f][k]) for f in FIGURES})
            k += 1
        records.append(record)
    table = pl.DataFrame(records, schema=TABLE_SCHEMA) if records else pl.DataFrame(schema=TABLE_SCHEMA)
    return table, summarise(table, rows.height, alpha)
