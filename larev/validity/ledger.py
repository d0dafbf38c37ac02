"""The ledger of report-split runs (protocols/ledger.jsonl): one JSON line per run on the report split, with the
commit, the protocol's digest and the date, so that each reading of the report split is on record."""

from __future__ import annotations

import json
from pathlib import Path

LEDGER_FIELDS = ("date", "commit", "protocol", "protocol_name", "task", "split", "seeds", "backbone", "partial")


def ledger_line(results: dict, *, out: str) -> dict:
    """The ledger's record of one results.json (its LEDGER_FIELDS) and where the results were written."""
    return {**{k: results.get(k) for k in LEDGER_FIELDS}, "out": out}


def append_ledger(path: str | Path, results: dict, *, out: str) -> dict:
    """Append the line of a report-split run to the ledger at `path` (created when absent); returns it."""
    if results.get("split") != "report":
        raise ValueError("only a run on the report split goes to the ledger")
    line = ledger_line(results, out=out)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(line, sort_keys=True) + "\n")
    return line


def read_ledger(path: str | Path) -> list[dict]:
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
