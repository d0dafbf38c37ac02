"""Keep a run's leaderboard in its artifact store (local or S3), and publish it.

Every scoring writes its rows as a Parquet file of its own under `leaderboard/<run>/rows/` (one atomic put each:
a local rename or one S3 object), so two scorings that race both land; the board is the union of those files and
the run's reference rows, read fresh each time. Each row carries its per-id scores, so the ranking puts every
entry on the ids the ranked entries share from the row files alone (no other artifact has to outlive the scoring).
RUN/leaderboard.parquet and RUN/leaderboard.md are snapshots of the ranked board for people, rebuilt after each
scoring until no row file arrived meanwhile. The ranking and the words are larev/leaderboard.py.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from larev.leaderboard import MIN_SHARE, REFERENCE, entries, leaderboard_markdown, moves, ranked, with_schema
from larev.run_files import RUN_FILE
from storage import ArtifactStore
from storage.store import _write_local_atomically
from tasks.reports import artifact_key, ui_rows

SNAPSHOT = "leaderboard.parquet"
REFERENCE_FILE = "reference-per-id.parquet"  # the reference rows with their per-id scores


def now() -> str:
    """The time a scoring is recorded: UTC, ISO 8601 to the microsecond (sorts as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def board_prefix(run: dict) -> str:
    """Where a run's leaderboard lives in its store: the run's name and its reference summary's digest (two runs
    of one name with different evaluators keep apart)."""
    return f"leaderboard/{run['params']['run_name']}-{run['artifacts']['summary']['digest'][:12]}"


def reference_rows(store: ArtifactStore, run: dict, run_dir: str | Path) -> pl.DataFrame:
    """The run's own variants as reference rows (with their per-id scores), computed once and kept beside the
    scored rows."""
    key = f"{board_prefix(run)}/{REFERENCE_FILE}"
    if store.exists(key):
        return store.read_parquet(key)
    scored_at = datetime.fromtimestamp((Path(run_dir) / RUN_FILE).stat().st_mtime, timezone.utc)
    rows = entries(store.read_parquet(run["artifacts"]["scores"]["key"]),
                   store.read_parquet(run["artifacts"]["summary"]["key"]), origin=REFERENCE, output=None, file="",
                   scored_at=scored_at.isoformat(timespec="microseconds"))
    store.write_parquet(key, rows)  # identical content whoever writes it first
    return rows


def row_keys(store: ArtifactStore, run: dict) -> list[str]:
    prefix = f"{board_prefix(run)}/rows"
    return sorted(k for k in store.ls(prefix) if k.endswith(".parquet"))


def read_board(store: ArtifactStore, run: dict, run_dir: str | Path) -> tuple[pl.DataFrame, list[str]]:
    """(every row ever recorded, the row files read)."""
    keys = row_keys(store, run)
    parts = [reference_rows(store, run, run_dir), *(store.read_parquet(k) for k in keys)]
    return pl.concat([with_schema(p) for p in parts]), keys


def record(store: ArtifactStore, run: dict, rows: pl.DataFrame) -> str:
    """Write one scoring's rows as a new file (never over another's); return its key."""
    stamp = rows["scored_at"][0].replace(":", "").replace("-", "").replace("+", "_") if rows.height else "empty"
    key = f"{board_prefix(run)}/rows/{stamp}-{uuid.uuid4().hex[:12]}.parquet"
    store.write_parquet(key, rows)
    return key


def write_snapshot(store: ArtifactStore, run: dict, run_dir: str | Path, *,
                   min_share: float = MIN_SHARE) -> pl.DataFrame:
    """RUN/leaderboard.parquet and .md from every row file, rebuilt until the listing is unchanged after the
    write (a scoring that lands meanwhile is then in the snapshot, or rebuilds it itself); the ranked board
    (`min_share`: the share of gold's ids an entry needs to be ranked)."""
    run_dir = Path(run_dir)
    while True:
        board, keys = read_board(store, run, run_dir)
        table = ranked(board, min_share=min_share)
        markdown = leaderboard_markdown(table, f"larev leaderboard: {run['params']['run_name']}").encode()
        _write_local_atomically(str(run_dir / SNAPSHOT), table.write_parquet)
        _write_local_atomically(str(run_dir / "leaderboard.md"), lambda f: f.write(markdown))
        if row_keys(store, run) == keys:
            return table


@task(name="update-leaderboard", cache_policy=NONE, persist_result=False)
def update_leaderboard(store: ArtifactStore, run: dict, run_dir: str | Path, rows: pl.DataFrame) -> list[str]:
    """Record one scoring's rows, rebuild the snapshot, publish the board as the run's `leaderboard` artifact;
    return what moved where, in words."""
    before = ranked(read_board(store, run, run_dir)[0])
    record(store, run, rows)
    after = write_snapshot(store, run, run_dir)
    lines = moves(before, after, rows["entry"].unique(maintain_order=True).to_list())
    publish_leaderboard(run, after, lines)
    return lines


def publish_leaderboard(run: dict, board: pl.DataFrame, lines: list[str]) -> None:
    """The run's leaderboard as a Prefect table artifact (one key per run: the UI keeps its history)."""
    key = artifact_key(f"{run['params']['run_name']}-leaderboard")
    shown = board.select("metric", "rank", "of", "entry", "origin", "score", "ci_low", "ci_high", "n", "on_shared",
                         pl.col("apart").fill_null("ranked").alias("listed"), "signature", "scored_at")
    summary = "; ".join(lines[:6]) or "no change"
    create_table_artifact(key=key, table=ui_rows(shown),
                          description=f"every source scored with run {run['params']['run_name']}: {summary}")
    create_markdown_artifact(key=f"{key}-moves", markdown="\n".join(f"- {line}" for line in lines) or "no change",
                             description="what the latest scoring moved")
