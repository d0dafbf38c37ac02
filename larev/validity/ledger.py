"""The ledger of report-split readings (protocols/ledger.jsonl), so that each reading of the report split is on
record, the ones that never finished included.

A reading writes a `began` line before its first step (date, commit, the protocol's digest, task, split, seeds,
where its results go) and, under the same `reading` id, an `ended` line when its results are written or a `failed`
line when it stops on an error. A reading whose process was killed leaves its `began` line alone: it is counted
and shown as unfinished by every later reading (`summarise`). Paths are relative to the working directory (the
repository root, where larev runs) when they lie inside it, so the ledger names no machine's folders. A line
without an `event` is a reading recorded whole when it ended (before readings were recorded as they began).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

LEDGER_FIELDS = ("date", "commit", "protocol", "protocol_name", "task", "split", "seeds", "backbone", "partial")
EVENTS = ("began", "ended", "failed")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def repository_path(path: str | Path) -> str:
    """`path` relative to the working directory when it lies inside it, else as given."""
    resolved, here = Path(path).resolve(), Path.cwd().resolve()
    return os.path.relpath(resolved, here) if resolved.is_relative_to(here) else str(path)


def _append(path: str | Path, line: dict) -> dict:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(line, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return line


def begin_reading(path: str | Path, *, protocol: str, protocol_name: str, task: str, split: str, seeds: list[int],
                  backbone: str, partial: bool, commit: str | None, out: str | Path) -> dict:
    """Append the `began` line of a reading of the report split (before its first step); returns it (its `reading`
    id names the reading's later line)."""
    if split != "report":
        raise ValueError("only a reading of the report split goes to the ledger")
    return _append(path, {"event": "began", "reading": uuid.uuid4().hex[:12], "date": _now(), "commit": commit,
                          "protocol": protocol, "protocol_name": protocol_name, "task": task, "split": split,
                          "seeds": list(seeds), "backbone": backbone, "partial": partial,
                          "out": repository_path(out)})


def end_reading(path: str | Path, began: dict, *, error: BaseException | None = None) -> dict:
    """Append the reading's `ended` line, or its `failed` line with the error's first line."""
    line = {"event": "failed" if error is not None else "ended", "reading": began["reading"], "date": _now(),
            "protocol": began["protocol"], "task": began["task"]}
    if error is not None:
        line["error"] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}".strip()
    return _append(path, line)


def read_ledger(path: str | Path) -> list[dict]:
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@dataclass
class Reading:
    """One reading of the report split as the ledger has it: its `began` line (or its whole line) and how it
    ended: 'ended', 'failed' or 'unfinished' (began, never ended)."""

    line: dict
    status: str
    error: str | None = None
    ended: str | None = None  # the date of its last line


@dataclass
class Readings:
    readings: list[Reading] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.readings)

    def lines(self) -> list[str]:
        """One line per reading: date, commit, status and where its results went."""
        out = []
        for r in self.readings:
            commit = str(r.line.get("commit") or "?")[:12]
            note = {"ended": "", "failed": f": failed ({r.error})", "unfinished": ": began, never ended"}[r.status]
            out.append(f"{r.line.get('date')} commit {commit} -> {r.line.get('out')}{note}")
        return out


def readings(lines: list[dict], *, protocol: str | None = None, task: str | None = None) -> Readings:
    """The readings of the ledger's lines (those of `protocol` and `task` when given), in the order they began."""
    def wanted(line: dict) -> bool:
        return (protocol is None or line.get("protocol") == protocol) and (task is None or line.get("task") == task)

    found: dict[str, Reading] = {}
    order: list[str] = []
    for n, line in enumerate(lines):
        if not wanted(line):
            continue
        event = line.get("event")
        if event is None:  # a whole reading recorded when it ended
            key = f"line-{n}"
            found[key] = Reading(line=line, status="ended", ended=line.get("date"))
            order.append(key)
        elif event == "began":
            found[line["reading"]] = Reading(line=line, status="unfinished")
            order.append(line["reading"])
        elif event in ("ended", "failed") and line.get("reading") in found:
            reading = found[line["reading"]]
            reading.status, reading.error, reading.ended = event, line.get("error"), line.get("date")
    return Readings([found[key] for key in order])
