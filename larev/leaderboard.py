"""A run's leaderboard: every rationale source ever scored with its evaluators, ranked per metric.

Rows (LEADERBOARD_SCHEMA) are one scoring of one source under one metric: its score (the metric's aggregate, as
in summary.parquet), a BCa bootstrap interval over instances (metrics whose score is a mean over instances; NaN for
LAS's macro-average), the number of instances and when it was scored. The run's own variants (gold, leaky, ...) are
reference rows. An entry scored again keeps its old rows; the ranking reads each entry's latest row.

Entries are named as `larev compare` names sources (`entry_name`), so any entry can be compared by that name.
Pure polars / numpy; tasks/leaderboard.py keeps the rows in the run's store.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from larev.metrics.intervals import mean_interval
from larev.metrics.scores import with_aggregate_kind

REFERENCE, SCORED, INBOX = "reference", "score", "inbox"

LEADERBOARD_SCHEMA = {
    "entry": pl.String, "origin": pl.String, "output": pl.String, "source": pl.String, "file": pl.String,
    "metric": pl.String, "score": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64,
    "scored_at": pl.String,
}


def entry_name(output: str | None, source: str, n_sources: int) -> str:
    """How a scored source is named: the run's own source by its name; a `larev score --name OUTPUT` output by
    OUTPUT when it holds one source, else OUTPUT:SOURCE."""
    if output is None:
        return source
    return output if n_sources == 1 else f"{output}:{source}"


def entries(scores: pl.DataFrame | pl.LazyFrame, summary: pl.DataFrame, *, origin: str, output: str | None, file: str,
            scored_at: str, level: float = 0.95, n_boot: int = 1000) -> pl.DataFrame:
    """Leaderboard rows of one scoring: `summary` (metric, source, score, n) gives each score; `scores` (metric,
    source, score per instance; a table without `aggregate`, written before it existed, is read as
    `larev.metrics.scores.with_aggregate_kind` reads it) its interval."""
    sources = summary["source"].unique(maintain_order=True).to_list()
    scores = with_aggregate_kind(scores).select("metric", "source", "score", "aggregate").collect()
    kinds = dict(scores.group_by("metric").agg(pl.col("aggregate").first()).iter_rows())
    rows = []
    for r in summary.iter_rows(named=True):
        low = high = float("nan")
        if kinds.get(r["metric"]) == "mean":
            values = scores.filter((pl.col("metric") == r["metric"]) & (pl.col("source") == r["source"]))["score"]
            low, high = mean_interval(values.to_numpy(), level=level, n_boot=n_boot)
        rows.append({"entry": entry_name(output, r["source"], len(sources)), "origin": origin, "output": output or "",
                     "source": r["source"], "file": file, "metric": r["metric"], "score": r["score"],
                     "ci_low": low, "ci_high": high, "n": r["n"], "scored_at": scored_at})
    return pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)


def ranked(board: pl.DataFrame) -> pl.DataFrame:
    """Each entry's latest row per metric, ranked by score (1 = highest; ties share the best rank), with the
    number of entries ranked; sorted by metric, then rank."""
    if board.height == 0:
        return board.with_columns(rank=pl.lit(None, pl.Int64), of=pl.lit(None, pl.Int64))
    latest = board.sort("scored_at").group_by("metric", "entry", maintain_order=True).last()
    return latest.with_columns(
        rank=pl.col("score").rank(method="min", descending=True).over("metric").cast(pl.Int64),
        of=pl.len().over("metric").cast(pl.Int64),
    ).sort("metric", "rank", "entry")


def moves(before: pl.DataFrame, after: pl.DataFrame, new: list[str]) -> list[str]:
    """What a scoring changed, in words: where each new entry landed per metric, and which entries it pushed
    down. `before` / `after`: `ranked` boards."""
    lines = []
    old_rank = {(r["metric"], r["entry"]): r["rank"] for r in before.iter_rows(named=True)}
    for metric in after["metric"].unique(maintain_order=True).to_list():
        part = after.filter(pl.col("metric") == metric)
        for r in part.filter(pl.col("entry").is_in(new)).iter_rows(named=True):
            was = old_rank.get((metric, r["entry"]))
            where = "enters" if was is None else f"moves from {was} to"
            below = part.filter(pl.col("rank") > r["rank"])
            above = below.filter(pl.col("rank") == below["rank"].min())["entry"].to_list() if below.height else []
            tail = f", above {', '.join(above)}" if above else ""
            lines.append(f"{metric}: {r['entry']} {where} rank {r['rank']} of {r['of']} "
                         f"(score {r['score']:+.3f}){tail}")
        pushed = [e["entry"] for e in part.iter_rows(named=True) if e["entry"] not in new
                  and (metric, e["entry"]) in old_rank and e["rank"] > old_rank[(metric, e["entry"])]]
        if pushed:
            lines.append(f"{metric}: moved down: {', '.join(pushed)}")
    return lines


def _cell(x: float) -> str:
    return "-" if x is None or np.isnan(x) else f"{x:+.3f}"


def leaderboard_markdown(board: pl.DataFrame, title: str) -> str:
    """leaderboard.md: one ranked table per metric."""
    lines = [f"# {title}", "", "Each entry's latest scoring, ranked by score (1 = highest). Interval: BCa bootstrap "
             "95 % over instances (test sampling only; NaN for a macro-average). Reference rows are the run's own "
             "variants.", ""]
    for metric in board["metric"].unique(maintain_order=True).to_list():
        lines += [f"## {metric}", "", "| rank | entry | origin | score | interval | n | scored at |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in board.filter(pl.col("metric") == metric).iter_rows(named=True):
            lines.append(f"| {r['rank']} | {r['entry']} | {r['origin']} | {_cell(r['score'])} | "
                         f"[{_cell(r['ci_low'])}, {_cell(r['ci_high'])}] | {r['n']} | {r['scored_at']} |")
        lines.append("")
    return "\n".join(lines)
