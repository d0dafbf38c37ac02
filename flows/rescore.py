"""Scheduled re-evaluation: score the rationale files that arrived in an inbox since the last scan.

Each scan lists the inbox (a local folder or an S3 prefix), skips every file the ledger already records
(by name and content digest; the ledger lives in the run's artifact store), scores each new file with the
`score-rationales` flow, appends its summary to the inbox's results table and publishes a report. A file that
fails validation is moved to `<inbox>/quarantine/` with an error report beside it, and the others go on.
The ledger is written after every file, so a scan cut short never scores a file twice.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from prefect import flow
from prefect.exceptions import FailedRun
from pydantic import BaseModel, ConfigDict, Field

from flows.score import ScoreParams, score_rationales
from larev.config import Device
from larev.data.logged import RationaleReading
from larev.errors import InputError, LarevError
from larev.service.inbox import (DEFAULT_PATTERNS, inbox_label, ledger_entry, new_files, output_name, record,
                                 results_rows, scan_report)
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.data import check_rationale_file
from tasks.inbox import (fetch, ledger_key, location, publish_inbox_report, quarantine, read_table, scan_inbox,
                         write_table)
from tasks.export import read_run
from tasks.reports import artifact_key
from tasks.runtime.sharding import ScaleOutConfig


class RescoreParams(BaseModel):
    """Parameters of one inbox scan (the Prefect UI renders them as a form)."""

    model_config = ConfigDict(extra="forbid")

    run: str = Field(..., description="a finished pipeline run's directory (holding run.json): its evaluators score "
                                      "the files")
    inbox: str = Field(..., description="where new rationale files arrive: a local folder or s3://bucket/prefix "
                                        "(id, source, rationale[, label]; .parquet, .jsonl, .json or .csv; or "
                                        "lm-evaluation-harness sample logs)")
    patterns: list[str] = Field(list(DEFAULT_PATTERNS), description="file name patterns to pick up")
    settle_seconds: float = Field(30.0, ge=0, description="files modified more recently than this wait for the "
                                                           "next scan (they may still be being written)")
    column_map: dict[str, str] = Field(default_factory=dict, description="file column -> canonical column")
    reading: RationaleReading = Field(default_factory=RationaleReading,
                                      description="how logged files (lm-eval sample logs, JSON lines) and "
                                                  "reasoning traces (think tags) are read: the same for every file "
                                                  "of the inbox")
    device: Device = Field("auto", description="auto (CUDA when present), cpu or cuda")
    scale_out: ScaleOutConfig = Field(default_factory=ScaleOutConfig,
                                      description="shard large files over a Dask cluster (shard_rows > 0)")


@flow(name="rescore-inbox", flow_run_name="rescore-{params.inbox}", log_prints=True)
def rescore_inbox(params: RescoreParams) -> dict:
    """Score each new inbox file exactly once; quarantine the files that fail validation."""
    run = read_run(params.run)
    store = ArtifactStore(run["artifact_root"])
    examples = ArtifactRef(**run["artifacts"]["examples"])
    ledger = read_table(store, params.inbox, "ledger")
    results = read_table(store, params.inbox, "results")
    found, waiting = scan_inbox(params.inbox, params.patterns, params.settle_seconds)
    todo = new_files(found, ledger)
    handled, failed, board_moves = ledger.clear(), {}, {}
    for file in todo:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                local = fetch(params.inbox, file, tmp)
                # validated here first, under the file's inbox name: a bad file is an expected outcome (quarantine),
                # not a failed scoring run with a traceback
                check_rationale_file(store, examples, local, params.column_map or None, params.scale_out.shard_rows,
                                     shown_as=location(params.inbox, file.name), reading=params.reading)
                out = score_rationales(ScoreParams(run=params.run, rationales=local, name=output_name(file),
                                                   column_map=params.column_map, reading=params.reading,
                                                   device=params.device,
                                                   progress=False, scale_out=params.scale_out, origin="inbox"))
            except InputError as exc:  # the file breaks the data contract: set it aside, go on with the others
                moved = quarantine(params.inbox, file, str(exc))
                print(f"quarantined {location(params.inbox, file.name)} -> {moved}: {exc}")
                entry = ledger_entry(file, "quarantined", output=moved, error=str(exc))
            except (LarevError, OSError, RuntimeError, FailedRun) as exc:  # not the file's fault: retried next scan
                failed[file.name] = f"{type(exc).__name__}: {exc}"
                continue
            else:
                summary = pl.read_parquet(Path(out["run_dir"]) / "summary.parquet")
                rows_scored = int(summary.group_by("metric").agg(pl.col("n").sum())["n"].max())
                entry = ledger_entry(file, "scored", rows=rows_scored, output=out["run_dir"])
                rows = results_rows(summary, file, entry["handled_at"][0])
                board_moves[file.name] = out.get("leaderboard", [])
                results = rows if results is None else pl.concat([results, rows], how="diagonal_relaxed")
                write_table(store, params.inbox, "results", results)
        ledger = record(ledger, entry)
        handled = pl.concat([handled, entry])
        write_table(store, params.inbox, "ledger", ledger)
    report = scan_report(params.inbox, handled, results, failed, waiting, params.settle_seconds, board_moves)
    publish_inbox_report(artifact_key(f"inbox-{inbox_label(params.inbox)}"), report, results)
    print(report)
    if failed:
        raise LarevError(f"{len(failed)} inbox file(s) could not be scored and will be retried: "
                           + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    return {"scored": handled.filter(pl.col("status") == "scored")["file"].to_list(),
            "quarantined": handled.filter(pl.col("status") == "quarantined")["file"].to_list(),
            "waiting": sorted(waiting),
            "results": store.uri(ledger_key(params.inbox, "results")),
            "checked_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
