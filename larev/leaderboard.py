"""A run's leaderboard: every rationale source ever scored with its evaluators, ranked per metric.

Rows (LEADERBOARD_SCHEMA) are one scoring of one source under one metric: its score (the metric's aggregate, as
in summary.parquet), a BCa bootstrap interval over instances (metrics whose score is a mean over instances; NaN for
LAS's macro-average), the number of instances, its signature (larev/signature.py; null for a score written before
signatures were kept), its per-id scores (sorted by id) and when it was scored. The run's own variants (gold,
leaky, ...) are reference rows. An entry scored again keeps its old rows; the ranking reads each entry's latest row.

The ranking (`ranked`), per metric:
  - the reference is the run's own `gold` (its reference row); an entry whose signature differs from gold's, or
    that covers fewer than `min_share` of gold's ids, or that has no per-id scores, or no score, is listed apart
    with the reason, never ranked, and does not shrink the shared ids;
  - a metric whose score is a mean over instances is ranked on the ids every ranked entry was scored on: each
    ranked score and its BCa interval are recomputed there, and n is that shared count. LAS's macro-average keeps
    each entry's own aggregate (marked as not on the shared ids);
  - ranks are ranges, arena style: best = 1 + the number of entries whose interval lies wholly above (ci_low above
    this ci_high), worst = the number of entries whose ci_high is at or above this ci_low (itself included). "1"
    when both agree, "1-3" when intervals overlap. A score without an interval counts as the point [score, score].

Entries are named as `larev compare` names sources (`entry_name`), so any entry can be compared by that name.
Pure polars / numpy; tasks/leaderboard.py keeps the rows in the run's store.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from larev.metrics.intervals import mean_interval
from larev.metrics.scores import with_aggregate_kind
from larev.signature import SIGNATURE_COLUMN, signature_difference

REFERENCE, SCORED, INBOX = "reference", "score", "inbox"
GOLD = "gold"  # the reference entry every other entry's signature and ids are checked against
MIN_SHARE = 0.5  # an entry scored on fewer than this share of gold's ids is listed apart
LEVEL, N_BOOT = 0.95, 1000  # every leaderboard interval: BCa, this level and this many resamples, seed 0

LEADERBOARD_SCHEMA = {
    "entry": pl.String, "origin": pl.String, "output": pl.String, "source": pl.String, "file": pl.String,
    "metric": pl.String, "aggregate": pl.String, "signature": pl.String, "score": pl.Float64,
    "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64, "scored_at": pl.String,
    "ids": pl.List(pl.String), "id_scores": pl.List(pl.Float64),
}

# what `ranked` returns: one row per metric and entry, ranked entries first (by rank), then the ones listed apart
RANKED_SCHEMA = {
    "metric": pl.String, "rank": pl.String, "best": pl.Int64, "worst": pl.Int64, "of": pl.Int64,
    "entry": pl.String, "origin": pl.String, "output": pl.String, "source": pl.String, "file": pl.String,
    "aggregate": pl.String, "signature": pl.String, "checked": pl.Boolean, "score": pl.Float64,
    "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64, "on_shared": pl.Boolean, "apart": pl.String,
    "scored_at": pl.String,
}


def entry_name(output: str | None, source: str, n_sources: int) -> str:
    """How a scored source is named: the run's own source by its name; a `larev score --name OUTPUT` output by
    OUTPUT when it holds one source, else OUTPUT:SOURCE."""
    if output is None:
        return source
    return output if n_sources == 1 else f"{output}:{source}"


def entries(scores: pl.DataFrame | pl.LazyFrame, summary: pl.DataFrame, *, origin: str, output: str | None, file: str,
            scored_at: str, level: float = LEVEL, n_boot: int = N_BOOT) -> pl.DataFrame:
    """Leaderboard rows of one scoring: `summary` (metric, source, score, n[, signature]) gives each score and its
    signature (null when the summary has none); `scores` (id, metric, source, score per instance; a table without
    `aggregate`, written before it existed, is read as `larev.metrics.scores.with_aggregate_kind` reads it) its
    per-id scores and, for a mean, its interval."""
    sources = summary["source"].unique(maintain_order=True).to_list()
    per_id = (with_aggregate_kind(scores).select("id", "metric", "source", "score", "aggregate")
              .group_by("metric", "source")
              .agg(pl.col("aggregate").first(), pl.col("id").sort_by("id").alias("ids"),
                   pl.col("score").sort_by("id").alias("id_scores"))
              .collect())
    found = {(r["metric"], r["source"]): r for r in per_id.iter_rows(named=True)}
    signed = SIGNATURE_COLUMN in summary.columns
    rows = []
    for r in summary.iter_rows(named=True):
        own = found.get((r["metric"], r["source"]), {"aggregate": None, "ids": [], "id_scores": []})
        low = high = float("nan")
        if own["aggregate"] == "mean":
            low, high = mean_interval(np.asarray(own["id_scores"], dtype=np.float64), level=level, n_boot=n_boot)
        rows.append({"entry": entry_name(output, r["source"], len(sources)), "origin": origin, "output": output or "",
                     "source": r["source"], "file": file, "metric": r["metric"], "aggregate": own["aggregate"],
                     "signature": r[SIGNATURE_COLUMN] if signed else None, "score": r["score"], "ci_low": low,
                     "ci_high": high, "n": r["n"], "scored_at": scored_at, "ids": own["ids"],
                     "id_scores": own["id_scores"]})
    return pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)


def with_schema(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` in LEADERBOARD_SCHEMA's columns and order; a column missing from rows recorded before it existed
    (aggregate, signature, the per-id scores) is null."""
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in LEADERBOARD_SCHEMA.items()
               if name not in rows.columns]
    return rows.with_columns(missing).select([pl.col(k).cast(v) for k, v in LEADERBOARD_SCHEMA.items()])


def rank_ranges(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(best, worst) rank of each interval [low_i, high_i] among all of them: best = 1 + #{j: low_j > high_i},
    worst = #{j: high_j >= low_i} (i itself included)."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    best = 1 + (low[None, :] > high[:, None]).sum(axis=1)
    worst = (high[None, :] >= low[:, None]).sum(axis=1)
    return best.astype(np.int64), worst.astype(np.int64)


def rank_text(best: int, worst: int) -> str:
    return str(best) if best == worst else f"{best}-{worst}"


def reference_row(rows: list[dict]) -> dict | None:
    """The row every entry of one metric is checked against: the reference `gold`, else the first reference row,
    else None (a board of scored entries only)."""
    references = [r for r in rows if r["origin"] == REFERENCE]
    return next((r for r in references if r["entry"] == GOLD), references[0] if references else None)


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def apart_reason(row: dict, reference: dict | None, total: int, min_share: float, mean: bool) -> str | None:
    """Why an entry is not ranked (None: it is): its signature differs from the reference's, it has no per-id
    scores to put on the shared ids (a mean recorded before they were kept), it covers fewer than `min_share` of
    the reference's `total` ids, or it has no score."""
    ref_signature = reference["signature"] if reference else None
    if ref_signature and row["signature"] and row["signature"] != ref_signature:
        try:
            fields = signature_difference(row["signature"], ref_signature)
        except ValueError:
            return f"signature not readable: {row['signature']!r}"
        return f"signature differs in {', '.join(fields)}"
    if mean and row["ids"] is None:
        return "no per-id scores (recorded before they were kept): score it again"
    if reference is not None and reference["ids"] is not None and row["ids"] is not None:
        covered = len(set(row["ids"]) & set(reference["ids"]))
    else:
        covered = row["n"] or 0
    if covered < min_share * total:
        return f"too few ids: {covered} of {total}"
    if _missing(row["score"]):
        return "no score (undefined on its rows)"
    return None


def _shared_score(row: dict, shared: set[str], level: float, n_boot: int) -> tuple[float, float, float]:
    """(mean, ci_low, ci_high) of the entry's per-id scores on the shared ids; the recorded interval when the
    shared ids are all of its ids and the interval is the one `entries` records (the same values in the same id
    order, the same level and resamples: the same BCa interval)."""
    keep = [s for i, s in zip(row["ids"], row["id_scores"]) if i in shared]
    values = np.asarray([np.nan if s is None else s for s in keep], dtype=np.float64)
    score = float(np.nanmean(values)) if np.any(~np.isnan(values)) else float("nan")
    if len(keep) == len(row["ids"]) and (level, n_boot) == (LEVEL, N_BOOT) and not _missing(row["ci_low"]):
        return score, row["ci_low"], row["ci_high"]
    low, high = mean_interval(values, level=level, n_boot=n_boot)
    return score, low, high


def _rank_metric(rows: list[dict], min_share: float, level: float, n_boot: int) -> list[dict]:
    """One metric's latest rows (LEADERBOARD_SCHEMA) with RANKED_SCHEMA's columns added, ranked rows first."""
    reference = reference_row(rows)
    kinds = {r["aggregate"] for r in rows if r["aggregate"]}
    mean = kinds != {"leak_macro"}  # a metric recorded before `aggregate` was kept is read as a mean
    if reference is not None:
        total = len(reference["ids"]) if reference["ids"] is not None else (reference["n"] or 0)
    else:
        total = max((r["n"] or 0 for r in rows), default=0)
    ref_signature = reference["signature"] if reference else None
    out, ranked_rows = [], []
    for r in rows:
        reason = apart_reason(r, reference, total, min_share, mean)
        shown = r | {
            "rank": None, "best": None, "worst": None, "of": None, "apart": reason, "on_shared": False,
            "checked": bool(ref_signature and r["signature"])}
        (out if reason else ranked_rows).append(shown)
    if mean and ranked_rows:
        shared = set.intersection(*(set(r["ids"]) for r in ranked_rows))
        for r in ranked_rows:
            r["score"], r["ci_low"], r["ci_high"] = _shared_score(r, shared, level, n_boot)
            r["n"], r["on_shared"] = len(shared), True
        for r in [r for r in ranked_rows if _missing(r["score"])]:  # no score left on the shared ids
            r.update(apart=f"no score on the {len(shared)} shared ids", on_shared=False)
            ranked_rows.remove(r)
            out.append(r)
    if ranked_rows:
        low, high = zip(*(_bounds(r) for r in ranked_rows))
        best, worst = rank_ranges(np.array(low, dtype=float), np.array(high, dtype=float))
        for r, b, w in zip(ranked_rows, best, worst):
            r.update(best=int(b), worst=int(w), rank=rank_text(int(b), int(w)), of=len(ranked_rows))
        ranked_rows.sort(key=lambda r: (r["best"], r["worst"], -r["score"], r["entry"]))
    return ranked_rows + sorted(out, key=lambda r: r["entry"])


def ranked(board: pl.DataFrame, *, min_share: float = MIN_SHARE, level: float = LEVEL,
           n_boot: int = N_BOOT) -> pl.DataFrame:
    """Each entry's latest row per metric, ranked (module docstring) in RANKED_SCHEMA: per metric (sorted by
    name), the ranked entries by rank, then the entries listed apart with the reason (`apart`)."""
    board = with_schema(board)
    latest = board.sort("scored_at").group_by("metric", "entry", maintain_order=True).last()
    rows = []
    for metric in sorted(latest["metric"].unique().to_list()):
        rows += _rank_metric(latest.filter(pl.col("metric") == metric).to_dicts(), min_share, level, n_boot)
    return pl.DataFrame([{k: r[k] for k in RANKED_SCHEMA} for r in rows], schema=RANKED_SCHEMA)


def _overlaps(a: dict, b: dict) -> bool:
    low_a, high_a = _bounds(a)
    low_b, high_b = _bounds(b)
    return not (low_b > high_a or high_b < low_a)


def _bounds(r: dict) -> tuple[float, float]:
    return (r["score"] if _missing(r["ci_low"]) else r["ci_low"],
            r["score"] if _missing(r["ci_high"]) else r["ci_high"])


def _names(rows: list[dict], most: int = 3) -> str:
    names = [r["entry"] for r in rows]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def moves(before: pl.DataFrame, after: pl.DataFrame, new: list[str]) -> list[str]:
    """What a scoring changed, in words: where each new entry landed per metric (its rank range, the entries its
    interval overlaps, the next entries wholly below it) or why it is listed apart, and which entries it pushed
    down (their best rank got worse). `before` / `after`: `ranked` boards."""
    lines = []
    old = {(r["metric"], r["entry"]): r for r in before.iter_rows(named=True)}
    for metric in after["metric"].unique(maintain_order=True).to_list():
        part = after.filter(pl.col("metric") == metric)
        ranked_rows = part.filter(pl.col("rank").is_not_null()).to_dicts()
        for r in part.filter(pl.col("entry").is_in(new)).iter_rows(named=True):
            if r["rank"] is None:
                lines.append(f"{metric}: {r['entry']} is listed apart, not ranked: {r['apart']} "
                             f"(score {r['score']:+.3f})")
                continue
            was = old.get((metric, r["entry"]))
            if was is None or was["rank"] is None:
                where = "enters"
            elif was["rank"] == r["rank"]:
                where = "stays at"
            else:
                where = f"moves from rank {was['rank']} to"
            tied = [o for o in ranked_rows if o["entry"] != r["entry"] and _overlaps(o, r)]
            below = [o for o in ranked_rows if _bounds(o)[1] < _bounds(r)[0]]
            nearest = [o for o in below if o["best"] == min(b["best"] for b in below)] if below else []
            tail = (f", tied with {_names(tied)}" if tied else "") + (f", above {_names(nearest)}" if nearest else "")
            lines.append(f"{metric}: {r['entry']} {where} rank {r['rank']} of {r['of']} "
                         f"(score {r['score']:+.3f}, n {r['n']}){tail}")
        pushed = [e["entry"] for e in ranked_rows if e["entry"] not in new
                  and old.get((metric, e["entry"]), {}).get("best") is not None
                  and e["best"] > old[(metric, e["entry"])]["best"]]
        if pushed:
            lines.append(f"{metric}: moved down: {', '.join(pushed)}")
    return lines


def _cell(x: float | None) -> str:
    return "-" if _missing(x) else f"{x:+.3f}"


def leaderboard_markdown(board: pl.DataFrame, title: str) -> str:
    """leaderboard.md (`board`: `ranked`): per metric its signature, the ranked table, then the entries listed
    apart with the reason."""
    lines = [f"# {title}", "",
             f"Each entry's latest scoring. Per metric, only the entries with the signature of the reference `{GOLD}` "
             "(how the scores were made: larev/signature.py) that were scored on enough of its ids are ranked; the "
             "others are listed apart with the reason. A mean is ranked on the ids every ranked entry was scored "
             "on (n): each ranked score and its interval are recomputed there. Interval: BCa bootstrap 95 % over "
             "those ids (test sampling only; none for a macro-average). Rank: the range of ranks the intervals "
             "allow, '1' when no other interval reaches it, '1-3' when some overlap (best = 1 + the entries wholly "
             "above, worst = the entries whose interval reaches at or above its low end).", ""]
    for metric in board["metric"].unique(maintain_order=True).to_list():
        part = board.filter(pl.col("metric") == metric)
        rows = part.to_dicts()
        reference = reference_row(rows)
        ranked_rows = [r for r in rows if r["rank"] is not None]
        apart = [r for r in rows if r["rank"] is None]
        lines += [f"## {metric}", ""]
        if reference is not None and reference["signature"]:
            lines.append(f"Signature: `{reference['signature']}` ({reference['entry']}'s; every ranked entry with a "
                         "signature carries it).")
        else:
            lines.append("Signature: unknown (the reference was scored before signatures were kept): entries are "
                         "ranked without the check.")
        unchecked = [r["entry"] for r in ranked_rows if not r["checked"]]
        if unchecked and reference is not None and reference["signature"]:
            lines.append(f"Not checked (scored before signatures were kept): {', '.join(unchecked)}.")
        if ranked_rows and ranked_rows[0]["on_shared"]:
            lines.append(f"Ranked on the {ranked_rows[0]['n']} ids all {len(ranked_rows)} ranked entries share.")
        elif ranked_rows:
            lines.append("Score: each entry's own aggregate (a macro-average, not a mean over instances): not "
                         "recomputed on shared ids; n is the entry's own.")
        lines += ["", "| rank | entry | origin | score | interval | n | scored at |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in ranked_rows:
            lines.append(f"| {r['rank']} | {r['entry']} | {r['origin']} | {_cell(r['score'])} | "
                         f"[{_cell(r['ci_low'])}, {_cell(r['ci_high'])}] | {r['n']} | {r['scored_at']} |")
        if apart:
            lines += ["", "Listed apart (not ranked):", "",
                      "| entry | origin | score | n | not ranked: why | scored at |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for r in apart:
                lines.append(f"| {r['entry']} | {r['origin']} | {_cell(r['score'])} | {r['n']} | {r['apart']} | "
                             f"{r['scored_at']} |")
        lines.append("")
    return "\n".join(lines)
