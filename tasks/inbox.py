"""The inbox of rationale files that scheduled re-evaluation watches: a local folder or an S3 prefix.

Tasks here do I/O only (list, fetch, quarantine, ledger); the ledger logic is larev/service/inbox.py. None of them is
cached: each scan must see the inbox as it is now.
"""

from __future__ import annotations

import posixpath
import time
from pathlib import Path

import fsspec
import polars as pl
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from larev.digests import sha256_file, sha256_stream
from larev.service.inbox import InboxFile, empty_ledger, inbox_id, matches
from storage import ArtifactStore
from storage.s3 import s3_filesystem_options

QUARANTINE = "quarantine"


def inbox_fs(inbox: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and base path of an inbox location (S3 endpoint and credentials from the environment)."""
    if inbox.startswith("s3://"):
        return fsspec.filesystem("s3", **s3_filesystem_options(None)), inbox[len("s3://"):].rstrip("/")
    path = Path(inbox).expanduser().resolve()
    return fsspec.filesystem("file"), str(path)


def _sha256(fs: fsspec.AbstractFileSystem, path: str) -> str:
    with fs.open(path, "rb") as f:
        return sha256_stream(f)


@task(name="scan-inbox", cache_policy=NONE, persist_result=False)
def scan_inbox(inbox: str, patterns: list[str], settle_seconds: float) -> tuple[list[InboxFile], dict[str, float]]:
    """The inbox's top-level rationale files with their digests, and the files held back: those modified in
    the last `settle_seconds` (perhaps still being written) wait for the next scan ({name: seconds since their
    last change}). A missing local inbox folder is created."""
    fs, base = inbox_fs(inbox)
    if not inbox.startswith("s3://"):
        Path(base).mkdir(parents=True, exist_ok=True)
    now = time.time()
    found, waiting = [], {}
    for info in fs.ls(base, detail=True):
        name = posixpath.basename(info["name"].rstrip("/"))
        if info.get("type") != "file" or not matches(name, patterns):
            continue
        modified = info.get("mtime") or info.get("LastModified")
        if modified is not None and settle_seconds > 0:
            stamp = modified.timestamp() if hasattr(modified, "timestamp") else float(modified)
            if now - stamp < settle_seconds:
                waiting[name] = max(0.0, now - stamp)
                continue
        found.append(InboxFile(name=name, sha256=_sha256(fs, info["name"])))
    return found, waiting


def location(inbox: str, name: str) -> str:
    """Where an inbox file lives, as a person would look for it: `<inbox>/<name>` (s3://... for S3)."""
    return f"{inbox.rstrip('/')}/{name}"


@task(name="fetch-inbox-file", cache_policy=NONE, persist_result=False)
def fetch(inbox: str, file: InboxFile, local_dir: str) -> str:
    """A local copy of an inbox file (same name, so its format is known), checked against the scanned digest."""
    fs, base = inbox_fs(inbox)
    target = Path(local_dir) / file.name
    fs.get_file(posixpath.join(base, file.name), str(target))
    digest = sha256_file(target)
    if digest != file.sha256:
        raise RuntimeError(f"{file.name} changed while it was being read (sha256 {digest[:12]} != "
                           f"{file.sha256[:12]}); it will be picked up by the next scan")
    return str(target)


@task(name="quarantine", cache_policy=NONE, persist_result=False)
def quarantine(inbox: str, file: InboxFile, error: str) -> str:
    """Move a file that failed validation to `<inbox>/quarantine/` with `<name>.error.txt` beside it."""
    fs, base = inbox_fs(inbox)
    folder = posixpath.join(base, QUARANTINE)
    fs.makedirs(folder, exist_ok=True)
    source, target = posixpath.join(base, file.name), posixpath.join(folder, file.name)
    fs.pipe_file(target + ".error.txt", f"{file.name} (sha256 {file.sha256})\n\n{error}\n".encode())
    fs.copy(source, target)
    fs.rm_file(source)
    return target if not inbox.startswith("s3://") else f"s3://{target}"


def ledger_key(inbox: str, name: str) -> str:
    return f"inbox/{inbox_id(inbox)}/{name}.parquet"


@task(name="read-ledger", cache_policy=NONE, persist_result=False)
def read_table(store: ArtifactStore, inbox: str, name: str) -> pl.DataFrame | None:
    """The inbox's ledger or results table from the artifact store (None when there is none yet)."""
    key = ledger_key(inbox, name)
    if not store.exists(key):
        return empty_ledger() if name == "ledger" else None
    return store.read_parquet(key)


@task(name="write-ledger", cache_policy=NONE, persist_result=False)
def write_table(store: ArtifactStore, inbox: str, name: str, table: pl.DataFrame) -> str:
    """Replace the inbox's ledger or results table (an atomic write: readers see the old or the new one)."""
    return store.write_parquet(ledger_key(inbox, name), table)


@task(name="publish-inbox-report", cache_policy=NONE, persist_result=False)
def publish_inbox_report(key: str, markdown: str, results: pl.DataFrame | None) -> None:
    """This scan's report and the cumulative results table, in the Prefect UI."""
    create_markdown_artifact(key=f"{key}-report", markdown=markdown, description="Inbox re-evaluation report")
    if results is not None and results.height:
        create_table_artifact(key=f"{key}-results", table=results.to_dicts(),
                              description="Every scored inbox file: score per metric and source")
