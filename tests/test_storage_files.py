"""File artifacts streamed in and out of the store (put_file / local_copy): what the streaming score path uses
for tables too big to hold in memory. Local and loopback S3."""

from __future__ import annotations

import hashlib

import polars as pl
import pytest

from larev.errors import ArtifactError
from storage import ArtifactStore
from tests.test_storage import store  # noqa: F401  (the local / S3 store fixture)


def test_put_file_then_local_copy_round_trip_with_checksums(store, tmp_path):
    local = tmp_path / "table.parquet"
    pl.DataFrame({"x": list(range(1000))}).write_parquet(local)
    uri, digest = store.put_file(local, "step/abc/table.parquet")
    assert digest == hashlib.sha256(local.read_bytes()).hexdigest()
    assert uri == store.uri("step/abc/table.parquet")
    assert store.read_bytes("step/abc/table.parquet") == local.read_bytes()  # the sidecar matches
    with store.local_copy(uri) as path:
        assert pl.read_parquet(path)["x"].sum() == sum(range(1000))
    again = tmp_path / "other.parquet"
    pl.DataFrame({"x": [1]}).write_parquet(again)
    store.put_file(again, "step/abc/table.parquet")  # replaced as a whole, sidecar included
    with store.local_copy("step/abc/table.parquet") as path:
        assert pl.read_parquet(path)["x"].to_list() == [1]


def test_local_copy_refuses_a_changed_file_and_names_missing_ones(store, tmp_path):
    local = tmp_path / "a.bin"
    local.write_bytes(b"original bytes")
    store.put_file(local, "s/k/a.bin")
    with store.fs.open(store._path("s/k/a.bin"), "wb") as f:  # changed behind the store's back
        f.write(b"tampered bytes")
    with pytest.raises(ArtifactError, match="checksum mismatch"), store.local_copy("s/k/a.bin"):
        pass
    with pytest.raises(ArtifactError, match="artifact not found"), store.local_copy("s/k/missing.bin"):
        pass


def test_put_file_of_a_missing_local_file_leaves_nothing(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    with pytest.raises(ArtifactError, match="nope.parquet is not a file"):
        store.put_file(tmp_path / "nope.parquet", "s/k/t.parquet")
    assert not store.exists("s/k/t.parquet")
    leftovers = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert leftovers == []
