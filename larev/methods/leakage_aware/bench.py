"""LAREV's entry of `bench quality`'s results.json "leakage" section, and its results.md lines.

What the leakage spans removed (a fresh probe's residual accuracy on b with the spans masked, span recall, E3
coverage) and how much phi and phi_LA read the label from the spans (reliance, nats, validation rows).
"""

from __future__ import annotations

import polars as pl

from larev.reports import json_number


def larev_bench_summary(artifacts: dict, store) -> dict | None:
    """LAREV's figures from a finished run's diagnostic tables, or None when the run has no leakage spans:
    `artifacts` is its run.json's (name -> {"key": ...}), `store` its artifact store (`read_parquet(key)`,
    `get_dir(key)`).

    E3 coverage (share of rows with a leakage span that have an E3), span recall against the known label phrases,
    the probe's residual accuracy on the masked b before/after, the probe on x (reference) and chance, and
    reliance_phi / reliance_phi_la (`reliance`)."""
    from larev.methods.leakage_aware.environments import ANTONYM, coverage

    if "leakage_spans" not in artifacts:
        return None
    row = store.read_parquet(artifacts["leakage_spans"]["key"]).row(0, named=True)
    out = {"residual_accuracy": json_number(row["residual_after"]),
           "residual_before": json_number(row["residual_before"]), "reference": json_number(row["reference"]),
           "residual_reads": row.get("residual_reads", "baseline"),
           "residual_with_input": json_number(row.get("residual_with_input")),
           "accuracy_x": json_number(row.get("accuracy_x", row["reference"])),
           "hypothesis_only": json_number(row.get("hypothesis_only")),
           "chance": json_number(row["chance"]), "span_recall": json_number(row["span_recall"]),
           "converged": bool(row["converged"]), "chosen": row["chosen"]}
    if "environments" in artifacts:
        envs = store.read_parquet(artifacts["environments"]["key"])
        out["e3_coverage"] = json_number(coverage(envs).get(ANTONYM))
        if {"phi", "larev", "examples"} <= set(artifacts):
            out |= reliance(store, artifacts, envs)
    return out


def reliance(store, artifacts: dict, envs: pl.DataFrame) -> dict:
    """phi's and phi_LA's reliance on b's leakage spans (larev/methods/leakage_aware/reliance.py) over the
    validation rows that have a span."""
    from larev.methods.leakage_aware.environments import MASKED, ORIGINAL
    from larev.methods.leakage_aware.reliance import leakage_reliance
    from larev.models.evaluator import load_evaluator
    from larev.schema import label_sets

    examples = store.read_parquet(artifacts["examples"]["key"]).filter(pl.col("split") == "validation")
    wide = (envs.filter(pl.col("term").is_not_null()).pivot(on="env", index="id", values="baseline")
            .join(examples, on="id", how="inner"))
    if wide.is_empty():  # no validation row has a span: nothing to measure
        return {"reliance_phi": None, "reliance_phi_la": None}
    args = (wide[ORIGINAL].to_list(), wide[MASKED].to_list(), wide["label"].to_list(), label_sets(wide))
    return {f"reliance_{name}": leakage_reliance(load_evaluator(store.get_dir(artifacts[key]["key"]), device="cpu"),
                                                 *args)
            for name, key in (("phi", "phi"), ("phi_la", "larev"))}


def larev_bench_lines(la: dict) -> list[str]:
    """LAREV's entry as a results.md section (one seed's figures, or their means over seeds: `converged` is then
    the share of seeds whose span rule converged)."""
    def fmt(key: str) -> str:
        return "n/a" if la.get(key) is None else f"{la[key]:.3f}"

    converged = la.get("converged", True)
    capped = ("" if converged is True or converged == 1 else
              "; the span rule hit its size cap" + ("" if converged is False or converged == 0
                                                    else f" in {1 - converged:.0%} of the seeds"))
    reads = {"form": "the training split's b's form (x's clauses as placeholders)",
             "baseline": "the training split's b"}.get(la.get("residual_reads"), "the training split")
    return ["## What LAREV's leakage spans removed", "",
            f"Fresh probe on {reads}: {fmt('residual_before')} unmasked, "
            f"{fmt('residual_accuracy')} with the spans masked; on the whole masked b "
            f"{fmt('residual_with_input')}, on x alone {fmt('accuracy_x')}, on the hypothesis alone "
            f"{fmt('hypothesis_only')}; chance {fmt('chance')}. Span recall {fmt('span_recall')}, E3 coverage "
            f"{fmt('e3_coverage')}{capped}.", "",
            f"Reliance on the spans, mean log p(y | no rationale, b) - log p(y | no rationale, masked b) over "
            f"the validation rows: phi {fmt('reliance_phi')}, phi_LA {fmt('reliance_phi_la')} nats (LAREV "
            "aims to make phi_LA's smaller).", ""]
