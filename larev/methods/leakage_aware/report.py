"""The LAREV section of a run's report.md."""

from __future__ import annotations

import polars as pl

from larev.methods.leakage_aware.environments import MIN_COVERAGE, ORIGINAL, coverage
from larev.reports import markdown_table


def larev_diagnostics(tokens: pl.DataFrame | None, terms: pl.DataFrame | None, environments: pl.DataFrame | None,
                      la_meta: dict[str, dict]) -> str:
    """What LAREV's training saw: the top IG tokens, the leakage terms, who built each environment, and phi_LA's
    losses."""
    parts = ["## LAREV diagnostics", ""]
    if tokens is not None and tokens.height:
        parts += ["Tokens of b with the highest mean Integrated-Gradients attribution under phi_base "
                  "(global table, training rows):", "", markdown_table(tokens.head(10)), ""]
    if terms is not None and terms.height:
        top = (terms.group_by("term").agg(n=pl.len()).sort(["n", "term"], descending=[True, False]).head(10)
               .with_columns(share=pl.col("n") / terms.height))
        parts += ["Most frequent leakage terms (the top-attributed whole word of each b):", "", markdown_table(top),
                  ""]
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
        history = meta.get("training", {}).get("history", [])
        weights = meta.get("objective", {}).get("effective_weights", {})
        if history:
            parts += [f"`{name}` training (lambda_irm {weights.get('lambda_irm')}, lambda_probe "
                      f"{weights.get('lambda_probe')}; erm/irm/probe are epoch means; val_logp per environment):", "",
                      markdown_table(pl.DataFrame(history)), ""]
    return "\n".join(parts)
