"""RORA's entry of `bench quality`'s results.json "leakage" section, and its results.md lines: per training
source, what the leaky spans left (a probe's accuracy on the masked rationales)."""

from __future__ import annotations

import polars as pl

from larev.reports import json_number, markdown_table


def rora_bench_summary(artifacts: dict, store) -> dict | None:
    """Per source (run.json's `rora_leakage:<source>` tables): the probe's accuracy on the masked rationales
    (residual_accuracy), unmasked, chance, and residual_gain (the probe on (x, masked r) minus the same probe on x,
    RORA's residual rule; null with rule='threshold'). None when the run trained no RORA."""
    out = {}
    for name, ref in artifacts.items():
        if name.startswith("rora_leakage:"):
            row = store.read_parquet(ref["key"]).row(0, named=True)
            out[name.split(":", 1)[1]] = {
                "residual_accuracy": json_number(row["accuracy_masked"]),
                "accuracy_unmasked": json_number(row["accuracy_unmasked"]), "chance": json_number(row["chance"]),
                "residual_gain": json_number(row.get("residual_gain"))}
    return out or None


def rora_bench_lines(by_source: dict) -> list[str]:
    """RORA's entry as a results.md section: one row per source."""
    rows = [{"source": s, **v} for s, v in by_source.items()]
    return ["## What RORA's leaky spans left (probe accuracy on the masked rationales)", "",
            markdown_table(pl.DataFrame(rows)), ""]
