"""The thesis's table 5.8 for any set of sources (section 5.4.5): per metric and source, the source's own rationale
r, r minus each of its degradations (leaky, gold_leaky, vacuous: larev/generate/degradations.py) and their SUM, with
paired bootstrap intervals over the rows; in Markdown, as JSON and as a figure like the thesis's figure 5.3.

The intervals are larev.metrics.bootstrap.bootstrap_intervals' with r as the reference: the same example ids are
drawn for r and its degradations, so each separation and SUM gets a paired interval, as the run's own gold-minus-
variant separations do.
"""

from __future__ import annotations

import math

import polars as pl

from larev.generate.degradations import DEGRADATIONS, degraded_name, split_degraded
from larev.metrics.bootstrap import bootstrap_intervals
from larev.reports import json_number, markdown_table, png_bytes, with_interval

#: The name of a source's own rationale in the table (the thesis's r).
OWN = "r"
#: The table's quantities: r, r minus each degradation (`r-leaky`, ...), their sum (thesis table 5.8's SUM).
SEPARATIONS: tuple[str, ...] = tuple(f"{OWN}-{d}" for d in DEGRADATIONS)
TOTAL = "SUM"
QUANTITIES: tuple[str, ...] = (OWN, *SEPARATIONS, TOTAL)
TABLE_SCHEMA = {"metric": pl.String, "source": pl.String, "quantity": pl.String, "estimate": pl.Float64,
                "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64}
LEVEL, N_BOOT, SEED = 0.95, 1000, 0  # the leaderboard's and the verdict's intervals: 95 %, 1000 resamples, seed 0


def degraded_sources(sources: list[str]) -> list[str]:
    """The sources among `sources` that have at least one degradation among them, in their order."""
    found = {split[0] for s in sources if (split := split_degraded(s)) is not None}
    return [s for s in sources if s in found]


def degradation_table(scores: pl.DataFrame, *, level: float = LEVEL, n_boot: int = N_BOOT,
                      seed: int = SEED) -> pl.DataFrame:
    """Thesis table 5.8, long (TABLE_SCHEMA): per metric and source S with degradations in `scores` (the score
    contract: id, metric, source, score[, aggregate, leaks]), the quantities r (S's aggregate score), r-D (S minus
    its degradation D, paired over the ids S was scored on) and SUM (the sum of those separations), each with its
    bootstrap interval; n is the number of ids."""
    sources = degraded_sources(scores["source"].unique(maintain_order=True).to_list())
    parts = [source_separations(scores, source, level=level, n_boot=n_boot, seed=seed) for source in sources]
    table = pl.concat(parts) if parts else pl.DataFrame(schema=TABLE_SCHEMA)
    order = {q: i for i, q in enumerate(QUANTITIES)}
    metrics = {m: i for i, m in enumerate(scores["metric"].unique(maintain_order=True).to_list())}
    return (table.with_columns(__m=pl.col("metric").replace_strict(metrics, return_dtype=pl.Int32),
                               __s=pl.col("source").replace_strict({s: i for i, s in enumerate(sources)},
                                                                   return_dtype=pl.Int32),
                               __q=pl.col("quantity").replace_strict(order, return_dtype=pl.Int32))
            .sort("__m", "__s", "__q").drop("__m", "__s", "__q"))


def source_separations(scores: pl.DataFrame, source: str, *, level: float = LEVEL, n_boot: int = N_BOOT,
                       seed: int = SEED) -> pl.DataFrame:
    """One source's rows of `degradation_table`: its scores and its degradations' renamed to r and D, then
    bootstrap_intervals with r as the reference (its SUM adds every separation asked for: the three of the
    thesis)."""
    names = {source: OWN, **{degraded_name(source, d): d for d in DEGRADATIONS}}
    part = scores.filter(pl.col("source").is_in(list(names))).with_columns(
        pl.col("source").replace_strict(names, return_dtype=pl.String))
    intervals = bootstrap_intervals(part, n_boot=n_boot, seed=seed, level=level, reference=OWN,
                                    degraded=DEGRADATIONS)
    return (intervals.filter(pl.col("quantity").is_in(QUANTITIES))
            .with_columns(source=pl.lit(source, pl.String)).select(list(TABLE_SCHEMA)))


def wide_table(table: pl.DataFrame) -> pl.DataFrame:
    """One row per (metric, source): r, each separation and SUM as 'estimate [low, high]', and n: table 5.8's
    layout."""
    rows = []
    for (metric, source), part in table.group_by("metric", "source", maintain_order=True):
        cells = {q: with_interval(e, (lo, hi)) for q, e, lo, hi in
                 part.select("quantity", "estimate", "ci_low", "ci_high").iter_rows()}
        rows.append({"metric": metric, "source": source, **{q: cells.get(q, "-") for q in QUANTITIES},
                     "n": part["n"].max()})
    schema = {"metric": pl.String, "source": pl.String, **{q: pl.String for q in QUANTITIES}, "n": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def degradation_markdown(table: pl.DataFrame, *, level: float = LEVEL) -> str:
    """report.md's section: table 5.8's layout with intervals, and how to read it."""
    if table.height == 0:
        return ""
    return "\n".join([
        "## Each source against its own degradations (thesis table 5.8)", "",
        (f"Per metric and source: `{OWN}` is the source's mean score (LAS: its macro-average), `{OWN}-D` the "
         "source minus its degradation D on the same ids (`leaky`: \"The answer is {label}.\"; `gold_leaky`: r "
         "followed by that sentence; `vacuous`: the baseline b), and SUM their sum, with a paired "
         f"{level:.0%} bootstrap interval over the rows. A metric that rewards new information scores r above "
         "each degradation: all positive, larger is clearer."), "",
        markdown_table(wide_table(table)), ""])


def degradation_results(table: pl.DataFrame, *, level: float = LEVEL, n_boot: int = N_BOOT,
                        seed: int = SEED) -> dict:
    """results.json: {"table_5_8": {metric: {source: {"n": n, quantity: {estimate, ci_low, ci_high}}}}} with the
    bootstrap's settings (an undefined figure is null)."""
    out: dict = {}
    for r in table.iter_rows(named=True):
        entry = out.setdefault(r["metric"], {}).setdefault(r["source"], {"n": r["n"]})
        entry[r["quantity"]] = {k: json_number(r[k]) for k in ("estimate", "ci_low", "ci_high")}
    return {"table_5_8": out, "quantities": list(QUANTITIES), "interval": {"level": level, "n_boot": n_boot,
                                                                            "seed": seed, "paired": True}}


def sum_lines(results: dict) -> list[str]:
    """SUM per source (rows) and metric (columns) from `degradation_results`, for a terminal."""
    table = results.get("table_5_8") or {}
    metrics = list(table)
    sources = list(dict.fromkeys(s for m in metrics for s in table[m]))
    if not sources:
        return []
    width = max([len(m) for m in metrics] + [8]) + 2
    name_width = max(len(s) for s in [*sources, "source"]) + 2
    lines = [f"Each source minus its leaky, gold_leaky and vacuous degradations, {TOTAL} (thesis table 5.8):",
             "source".ljust(name_width) + "".join(m.ljust(width) for m in metrics)]
    for s in sources:
        cells = [(table[m].get(s, {}).get(TOTAL) or {}).get("estimate") for m in metrics]
        lines.append(s.ljust(name_width) + "".join(("-" if c is None else f"{c:+.3f}").ljust(width) for c in cells))
    return lines


def degradation_plot(table: pl.DataFrame) -> bytes:
    """degradations.png, like the thesis's figure 5.3: one panel per metric, a group of bars per degradation
    (r minus it), a bar per source, with the paired bootstrap intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = table["metric"].unique(maintain_order=True).to_list()
    sources = table["source"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, max(1, len(metrics)), figsize=(1.2 + 3.2 * max(1, len(metrics)), 3.6), dpi=120,
                             squeeze=False)
    width = 0.8 / max(1, len(sources))
    for ax, metric in zip(axes[0], metrics):
        for i, source in enumerate(sources):
            values, low, high = _bars(table, metric, source)
            xs = [j + (i - (len(sources) - 1) / 2) * width for j in range(len(SEPARATIONS))]
            ax.bar(xs, values, width=width, label=source, yerr=[low, high], capsize=2)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(SEPARATIONS)), [s.replace(f"{OWN}-", f"{OWN} - ") for s in SEPARATIONS],
                      fontsize=8)
        ax.set_title(metric.upper())
    axes[0][0].set_ylabel("separation (nats; RQ, LAS: accuracy)")
    if sources:
        axes[0][-1].legend(frameon=False, fontsize=8)
    fig.suptitle("each source's rationale r minus its degradations (95% paired bootstrap intervals)", fontsize=10)
    return png_bytes(fig)


def _bars(table: pl.DataFrame, metric: str, source: str) -> tuple[list[float], list[float], list[float]]:
    """The separations of one metric and source as bar heights, and their error bars' lengths below and above
    (0 where undefined)."""
    part = {q: (e, lo, hi) for q, e, lo, hi in table.filter((pl.col("metric") == metric) & (pl.col("source") == source))
            .select("quantity", "estimate", "ci_low", "ci_high").iter_rows()}

    def finite(x) -> float:
        return 0.0 if x is None or math.isnan(x) else float(x)

    cells = [part.get(q, (None, None, None)) for q in SEPARATIONS]
    values = [finite(e) for e, _, _ in cells]
    low = [finite(e - lo) if e is not None and lo is not None else 0.0 for e, lo, _ in cells]
    high = [finite(hi - e) if e is not None and hi is not None else 0.0 for e, _, hi in cells]
    return values, low, high

