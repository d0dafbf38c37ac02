"""The LAREV section of a run's report.md."""

from __future__ import annotations

import json

import polars as pl

from larev.methods.leakage_aware.environments import MIN_COVERAGE, ORIGINAL, coverage
from larev.reports import markdown_table


def _residual_sentence(row: dict) -> str:
    """What the residual probe read and measured, next to the probes on x and on the hypothesis, and chance."""
    def fmt(key: str) -> str:
        return "n/a" if row.get(key) is None else f"{row[key]:.3f}"

    if row.get("residual_reads") == "form":
        text = (f"on b's form (x's clauses as placeholders, what b adds to x) unmasked {fmt('residual_before')}, "
                f"masked {fmt('residual_after')}; chance {fmt('chance')} (the rule stops at chance + "
                f"{fmt('tolerance')}). For comparison, the whole masked b (x in place) {fmt('residual_with_input')}, "
                f"x alone {fmt('accuracy_x')}")
    else:
        text = (f"b unmasked {fmt('residual_before')}, b masked {fmt('residual_after')}; the same probe on x alone "
                f"{fmt('reference')}")
    if row.get("hypothesis_only") is not None:
        text += f", the hypothesis alone {fmt('hypothesis_only')}"
    if row.get("residual_reads") != "form":
        text += f"; chance {fmt('chance')} (the rule stops at max(x, chance) + {fmt('tolerance')})"
    text += "."
    if not row["converged"]:
        text += " The rule reached its size cap before the residual fell to its stopping level: the masked b still "
        text += "carries label information."
    return text


def leakage_lines(leakage: pl.DataFrame) -> list[str]:
    """The span rule's summary: what it masked and the residual leakage next to the probe on x and chance."""
    row = leakage.row(0, named=True)
    recall = row.get("span_recall")
    lines = [f"Leakage spans ({row['ranking']} ranking): masked {row['chosen'] or 'nothing'} "
             f"in {row['rows_with_spans']:.1%} of the baselines."
             + (f" Span recall against the known label phrases: {recall:.1%}." if recall is not None else ""), "",
             "Residual leakage (validation accuracy of a fresh bag-of-n-grams probe trained on the training rows): "
             + _residual_sentence(row), ""]
    steps = json.loads(row["steps"]) if isinstance(row.get("steps"), str) else row.get("steps") or []
    if steps:
        lines += ["Growth steps (size: words chosen, or top words per row):", "", markdown_table(pl.DataFrame(steps)),
                  ""]
    return lines


def larev_diagnostics(tokens: pl.DataFrame | None, terms: pl.DataFrame | None, environments: pl.DataFrame | None,
                      la_meta: dict[str, dict], leakage: pl.DataFrame | None = None) -> str:
    """What LAREV's training saw: the top IG words, the leakage spans and their residual check, who built each
    environment, and phi_LA's losses."""
    parts = ["## LAREV diagnostics", ""]
    if tokens is not None and tokens.height:
        parts += ["Words of b with the highest mean Integrated-Gradients attribution share under phi_base "
                  "(global table, training rows):", "", markdown_table(tokens.head(10)), ""]
    if leakage is not None and leakage.height:
        parts += leakage_lines(leakage)
    if terms is not None and terms.height:
        top = (terms.group_by("term").agg(n=pl.len()).sort(["n", "term"], descending=[True, False]).head(10)
               .with_columns(share=pl.col("n") / terms.height))
        parts += ["Most frequent leakage spans (the masked text of each b, spans joined by ' | '):", "",
                  markdown_table(top), ""]
    if environments is not None and environments.height:
        built = (environments.filter(pl.col("env") != ORIGINAL).group_by("env", "backend", maintain_order=True)
                 .agg(n=pl.len()).sort(["env", "n", "backend"], descending=[False, True, False]))
        parts += ["Who built each environment (per environment and backend; `absent` = no rewrite found: the row "
                  "has no such environment, and IRM runs over the ones it has):", "", markdown_table(built), ""]
        shares = coverage(environments)
        parts += ["Coverage (share of rows with a leakage term that have the environment): "
                  + ", ".join(f"{name} {share:.1%}" for name, share in shares.items())
                  + (f" (under {MIN_COVERAGE:.0%}: thin)" if any(v < MIN_COVERAGE for v in shares.values()) else "")
                  + ".", ""]
    for name, meta in la_meta.items():
        parts += phi_la_training_lines(name, meta)
    return "\n".join(parts)


def phi_la_training_lines(name: str, meta: dict) -> list[str]:
    """One phi_LA's epochs (its saved meta): the weights it trained with and the losses and validation per epoch."""
    history = meta.get("training", {}).get("history", [])
    weights = meta.get("objective", {}).get("effective_weights", {})
    zero_rows = meta.get("zero_rows", {})
    if not history:
        return []
    return [f"`{name}` training (lambda_irm {weights.get('lambda_irm')}, lambda_probe "
            f"{weights.get('lambda_probe')}, lambda_borrowed {weights.get('lambda_borrowed', 0.0)}; "
            f"no-rationale instances {'on' if zero_rows.get('empty_rationales') else 'off'}; "
            "erm/irm/probe/borrowed/empty are epoch means; val_logp per environment, and of the no-rationale "
            "and borrowed inputs where trained):", "", markdown_table(pl.DataFrame(history)), ""]


def larev_vs_empty_diagnostics(meta: dict) -> str:
    """larev_vs_empty's section of report.md: what it computes, the zero terms its phi_LA trained with, and its
    epochs."""
    objective, zero_rows = meta.get("objective", {}), meta.get("zero_rows", {})
    terms = ", ".join(f"{k} {objective.get(k)}" for k in ("lambda_borrowed", "label_statements",
                                                          "baseline_rationales", "zero_terms_start"))
    parts = ["## larev_vs_empty diagnostics", "",
             "larev_vs_empty = log p_LA'(y | r, b) - log p_LA'(y | empty, b): its phi_LA' trained on LAREV's "
             "environments with eq. 4.10 and the zero terms, so that a rationale saying nothing about the instance "
             "scores about 0; `empty` scores 0 by construction.", "",
             f"Zero terms: {terms}; counterfactual twins {zero_rows.get('counterfactuals', 0)} (exclusive terms "
             f"{zero_rows.get('exclusive_terms', 'none')}).", ""]
    return "\n".join(parts + phi_la_training_lines("larev_vs_empty", meta))
