"""The AddText shift table as Markdown and as a plot: per metric, how far added irrelevant text moves the score
and how often it raises it (a rise is the failure: the rationale looks more informative for saying nothing more)."""

from __future__ import annotations

import polars as pl

from larev.reports import png_bytes
from larev.stress.addtext.shift import ALL, per_kind


def _fmt(x: float | None, digits: int = 3) -> str:
    return "" if x is None else f"{x:+.{digits}f}"


def shift_markdown(shift: pl.DataFrame, *, title: str = "AddText stress test") -> str:
    """A table per original source: one row per metric, the mean shift and rise share of each kind (all
    positions) and over everything."""
    lines = [f"# {title}", "",
             "Mean score shift (perturbed - original) and, in brackets, the share of rationales whose score rises. "
             "Added text carries no label information: a robust metric shifts little and rarely rises.", ""]
    kinds = [k for k in shift["addtext_kind"].unique(maintain_order=True).to_list() if k != ALL]
    by_kind = per_kind(shift)
    for source in by_kind["orig_source"].unique(maintain_order=True).to_list():
        part = by_kind.filter(pl.col("orig_source") == source)
        lines += [f"## {source}", "", "| metric | " + " | ".join([*kinds, "all"]) + " | n |",
                  "| --- | " + " | ".join("---:" for _ in [*kinds, "all"]) + " | ---: |"]
        for metric in part["metric"].unique(maintain_order=True).to_list():
            cells, n = [], 0
            for kind in [*kinds, ALL]:
                rows = part.filter((pl.col("metric") == metric) & (pl.col("addtext_kind") == kind))
                row = rows.row(0, named=True) if rows.height else {}
                shift_mean, rise = row.get("mean_shift"), row.get("rise_share")
                if kind == ALL:
                    n = row.get("n", 0)
                cells.append(f"{_fmt(shift_mean)} ({rise:.0%})" if rise is not None else "")
            lines.append(f"| {metric} | " + " | ".join(cells) + f" | {n} |")
        lines.append("")
    return "\n".join(lines)


def shift_plot(shift: pl.DataFrame) -> bytes:
    """PNG: per metric, the share of rationales whose score rises under each AddText kind (all positions), for
    the first original source."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    source = shift["orig_source"][0] if shift.height else ""
    rises = per_kind(shift).filter((pl.col("orig_source") == source) & (pl.col("addtext_kind") != ALL))
    metrics = rises["metric"].unique(maintain_order=True).to_list()
    kinds = rises["addtext_kind"].unique(maintain_order=True).to_list()
    fig, ax = plt.subplots(figsize=(2 + 1.2 * max(1, len(metrics)), 3.4), dpi=120)
    width = 0.8 / max(1, len(kinds))
    for i, kind in enumerate(kinds):
        values = [rises.filter((pl.col("metric") == m) & (pl.col("addtext_kind") == kind))["rise_share"].sum()
                  for m in metrics]
        ax.bar([j + (i - (len(kinds) - 1) / 2) * width for j in range(len(metrics))], values, width=width,
               label=f"AddText-{kind}")
    ax.set_xticks(range(len(metrics)), [m.upper() for m in metrics])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of scores that rise")
    ax.set_title(f"irrelevant text added to '{source}' rationales")
    if kinds:
        ax.legend(frameon=False, fontsize=8)
    return png_bytes(fig)
