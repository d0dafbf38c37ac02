"""The RORA section of a run's report.md."""

from __future__ import annotations

import polars as pl

from larev.reports import markdown_table


def rora_diagnostics(tables: dict[str, pl.DataFrame]) -> str:
    """Per RORA training source: how many training rationales had leaky spans, the leaky words, and how often
    the counterfactual rationales differ between labels (tables keyed rora_words:<source>, rora_spans:<source>,
    counterfactuals:<source>)."""
    sources = [k.split(":", 1)[1] for k in tables if k.startswith("rora_spans:")]
    if not sources:
        return ""
    rows = []
    for source in sources:
        spans = tables[f"rora_spans:{source}"]
        words = tables.get(f"rora_words:{source}")
        cf = tables.get(f"counterfactuals:{source}")
        leaky = words.filter(pl.col("leaky"))["word"].head(6).to_list() if words is not None else []
        row = {"source": source, "rationales": spans.height,
               "with_spans": (spans["span_source"] != "none").mean(),
               "by_fallback": (spans["span_source"] == "fallback").mean(),
               "leaky_words": ", ".join(leaky) + (" ..." if words is not None and
                                                  words["leaky"].sum() > len(leaky) else "")}
        leakage = tables.get(f"rora_leakage:{source}")
        if leakage is not None and leakage.height:
            row |= {k: leakage[k][0] for k in ("chance", "accuracy_unmasked", "accuracy_masked", "accuracy_x",
                                               "residual_gain") if k in leakage.columns}
        if cf is not None and cf.height:
            varied = cf.group_by("id").agg(pl.col("rationale").n_unique() > 1)["rationale"].mean()
            row |= {"edited_by_label": varied, "missing_fills": int(cf["n_missing"].sum())}
        rows.append(row)
    return "\n".join([
        "## RORA diagnostics", "",
        "Per training source: share of training rationales with leaky spans (and by the explicit fallback), the "
        "top leaky words; the validation accuracy of a rationale-only model before and after masking the spans "
        "(residual leakage; `chance` = 1/K), the same probe on x alone and its gain from reading the masked "
        "rationale too (`residual_gain`, span rule); the share of rationales whose counterfactuals differ between "
        "labels, and sentinels the infiller left unfilled.", "", markdown_table(pl.DataFrame(rows)), ""])
