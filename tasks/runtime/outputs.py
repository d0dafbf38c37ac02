"""A step's outputs: tables, JSON, files and model directories written under the current step's folder
`<root>/<step>/<key>/`, each returned as an ArtifactRef with its content digest."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import current_step


def put_table(store: ArtifactStore, name: str, df) -> ArtifactRef:
    """Write a polars frame as Parquet under the current step's folder; return its ref."""
    buf = io.BytesIO()
    df.write_parquet(buf)
    return put_bytes(store, name, buf.getvalue(), kind="table")


def put_json(store: ArtifactStore, name: str, obj: Any) -> ArtifactRef:
    data = json.dumps(obj, indent=2, sort_keys=True, default=str).encode()
    return put_bytes(store, name, data, kind="json")


def put_bytes(store: ArtifactStore, name: str, data: bytes, *, kind: str = "text") -> ArtifactRef:
    key = current_step().key(name)
    uri = store.write_bytes(key, data)
    return ArtifactRef(uri=uri, key=key, digest=hashlib.sha256(data).hexdigest(), kind=kind)


def put_file(store: ArtifactStore, name: str, local_file: str | Path, *, kind: str = "table") -> ArtifactRef:
    """Store a local file under the current step's folder, streamed (never whole in memory); return its ref."""
    key = current_step().key(name)
    uri, digest = store.put_file(local_file, key)
    return ArtifactRef(uri=uri, key=key, digest=digest, kind=kind)


@contextlib.contextmanager
def stacked_parquet(store: ArtifactStore, refs: Sequence[ArtifactRef], schema: dict) -> Iterator[Path]:
    """A local Parquet file holding the rows of every table in `refs`, in order, cast to `schema` (a dict of
    polars dtypes; missing columns become nulls). Read and written a row group at a time: memory is bounded by
    a row group, not by the tables."""
    import polars as pl
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stacked.parquet"
        empty = pl.DataFrame(schema=schema)
        with pq.ParquetWriter(out, empty.to_arrow().schema) as writer:
            writer.write_table(empty.to_arrow())
            for ref in refs:
                with store.local_copy(ref.key) as path:
                    for batch in pq.ParquetFile(path).iter_batches():
                        frame = pl.from_arrow(batch)
                        frame = frame.select([(pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c)
                                              for c, t in schema.items()])
                        writer.write_table(frame.to_arrow())
        yield out


def put_dir(store: ArtifactStore, name: str, local_dir: str | Path, *, kind: str = "model") -> ArtifactRef:
    key = current_step().key(name)
    uri = store.put_dir(local_dir, key)
    return ArtifactRef(uri=uri, key=key, digest=store.dir_digest(key), kind=kind)
