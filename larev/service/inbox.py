"""The ledger of a rationale inbox: which files were already handled, so scheduled re-evaluation is idempotent.

A file is identified by its name in the inbox and the sha256 of its content: a file scored (or quarantined)
once is never handled again, while a file replaced by new content under the same name counts as new.
The ledger and the cumulative results table are plain Parquet tables; the flow keeps them in the artifact store.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone

import polars as pl

LEDGER_SCHEMA = {
    "file": pl.String,  # name inside the inbox
    "sha256": pl.String,  # content digest
    "status": pl.String,  # 'scored' or 'quarantined'
    "handled_at": pl.String,  # ISO-8601 UTC
    "rows": pl.Int64,  # rationale rows scored (0 when quarantined)
    "output": pl.String,  # where the scores went, or where the file was quarantined
    "error": pl.String,  # why it was quarantined (null when scored)
}
STATUSES = ("scored", "quarantined")
DEFAULT_PATTERNS = ("*.parquet", "*.jsonl", "*.json", "*.csv")


@dataclass(frozen=True)
class InboxFile:
    name: str
    sha256: str


def empty_ledger() -> pl.DataFrame:
    return pl.DataFrame(schema=LEDGER_SCHEMA)


def matches(name: str, patterns: tuple[str, ...] | list[str] = DEFAULT_PATTERNS) -> bool:
    """True when a file name matches one of the patterns (hidden and temporary files never do)."""
    if name.startswith((".", "~")) or name.endswith((".tmp", ".part")):
        return False
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def new_files(found: list[InboxFile], ledger: pl.DataFrame) -> list[InboxFile]:
    """The files whose (name, content) the ledger has no record of, in name order."""
    seen = set(zip(ledger["file"].to_list(), ledger["sha256"].to_list()))
    return sorted((f for f in found if (f.name, f.sha256) not in seen), key=lambda f: f.name)


def ledger_entry(file: InboxFile, status: str, *, rows: int = 0, output: str = "", error: str | None = None,
                 now: datetime | None = None) -> pl.DataFrame:
    """One ledger row."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
    when = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    return pl.DataFrame([{"file": file.name, "sha256": file.sha256, "status": status, "handled_at": when,
                          "rows": rows, "output": output, "error": error}], schema=LEDGER_SCHEMA)


def record(ledger: pl.DataFrame, entry: pl.DataFrame) -> pl.DataFrame:
    """The ledger with `entry` appended (a second record of the same (file, sha256) is refused)."""
    key = entry.select("file", "sha256").row(0)
    if ledger.filter((pl.col("file") == key[0]) & (pl.col("sha256") == key[1])).height:
        raise ValueError(f"the ledger already records {key[0]} ({key[1][:12]})")
    return pl.concat([ledger.cast(LEDGER_SCHEMA), entry])


def results_rows(summary: pl.DataFrame, file: InboxFile, handled_at: str) -> pl.DataFrame:
    """A scored file's summary (one row per metric and source), labelled with the file it came from."""
    return summary.with_columns(file=pl.lit(file.name), sha256=pl.lit(file.sha256),
                                scored_at=pl.lit(handled_at)).select("file", "sha256", "scored_at",
                                                                     *summary.columns)


def output_name(file: InboxFile) -> str:
    """A run-directory-safe name for a file's scores: its stem and the start of its digest."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", file.name.rsplit(".", 1)[0]).strip("-._") or "file"
    return f"inbox-{stem[:60]}-{file.sha256[:8]}"


def inbox_id(inbox: str) -> str:
    """A short stable id of an inbox location (names its ledger in the artifact store)."""
    return hashlib.sha256(inbox.rstrip("/").encode()).hexdigest()[:12]


def scan_report(inbox: str, entries: pl.DataFrame, results: pl.DataFrame | None, failed: dict[str, str],
                waiting: dict[str, float] | None = None, settle_seconds: float = 0.0,
                leaderboard: dict[str, list[str]] | None = None) -> str:
    """Markdown for one scan: what was scored (with its scores and, `leaderboard` {file: lines}, where it landed
    on the run's leaderboard), quarantined (with why), failed, or held back (`waiting`: files changed less than
    `settle_seconds` ago, {name: seconds since the change})."""
    lines = [f"# Inbox re-evaluation: {inbox}", ""]
    if entries.is_empty() and not failed:
        lines.append("No new rationale files." if not waiting else
                     "No new rationale files ready: the files below changed too recently and wait for the next scan.")
        lines.append("")
    scored = entries.filter(pl.col("status") == "scored")
    if scored.height:
        lines += ["## Scored", "", "| file | rows | outputs |", "| --- | --- | --- |"]
        lines += [f"| {f} | {n} | {o} |" for f, n, o in scored.select("file", "rows", "output").iter_rows()]
        if results is not None:
            mine = results.filter(pl.col("sha256").is_in(scored["sha256"].to_list()))
            lines += ["", "| file | metric | source | score | n |", "| --- | --- | --- | --- | --- |"]
            lines += [f"| {f} | {m} | {s} | {v:.4f} | {n} |" for f, m, s, v, n in
                      mine.select("file", "metric", "source", "score", "n").iter_rows()]
        lines.append("")
        if leaderboard:
            lines += ["## Leaderboard moves", ""]
            lines += [f"- {file}: {line}" for file, moved in leaderboard.items() for line in moved]
            lines.append("")
    quarantined = entries.filter(pl.col("status") == "quarantined")
    if quarantined.height:
        lines += ["## Quarantined (failed validation)", "", "| file | moved to | error |", "| --- | --- | --- |"]
        lines += [f"| {f} | {o} | {(e or '').splitlines()[0][:300]} |"
                  for f, o, e in quarantined.select("file", "output", "error").iter_rows()]
        lines.append("")
    if failed:
        lines += ["## Failed (retried on the next scan)", ""] + [f"- {f}: {e}" for f, e in failed.items()] + [""]
    if waiting:
        lines += [f"## Held back (changed less than {settle_seconds:g} s ago; scored on the next scan)", ""]
        lines += [f"- {name}: changed {age:.0f} s ago" for name, age in sorted(waiting.items())] + [""]
    return "\n".join(lines)


def inbox_label(inbox: str) -> str:
    """A readable, unique name of an inbox location for Prefect artifact keys: its last folder name and its id
    (two inboxes named `inbox` in different places get different labels)."""
    name = re.sub(r"[^a-z0-9-]+", "-", inbox.rstrip("/").rsplit("/", 1)[-1].lower()).strip("-") or "inbox"
    return f"{name[:40]}-{inbox_id(inbox)[:8]}"
