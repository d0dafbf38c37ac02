"""ArtifactStore on local disk and on a real S3-protocol server (moto on loopback)."""

from __future__ import annotations

import errno
import io
import json
import os
import pickle
from pathlib import Path

import polars as pl
import pytest

import storage.store as store_mod
from larev.errors import ArtifactError, ConfigError
from storage import ArtifactStore, sha256_bytes
from storage.kv import StoreMapping
from storage.s3 import S3_RETRIES, s3_filesystem_options
from storage.store import MANIFEST_NAME, StoreIOError
from tests.s3server import FaultyS3Proxy, S3Server, fail_always, fail_next

DF = pl.DataFrame({
    "id": [1, 2, 3],
    "text": ["a", "ünïcode", None],
    "score": [0.5, -1.25, float("nan")],
    "tags": [["x"], [], ["y", "z"]],
})


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    """A fresh store: under tmp_path, or under a fresh bucket on the loopback S3 server."""
    if request.param == "local":
        return ArtifactStore(tmp_path / "store")
    server: S3Server = request.getfixturevalue("s3_server")
    return ArtifactStore(f"s3://{server.new_bucket()}/runs", storage_options=server.storage_options())


def tamper(st: ArtifactStore, key: str, data: bytes) -> None:
    """Overwrite an artifact's bytes behind the store's back (no new sidecar)."""
    with st.fs.open(st._path(key), "wb") as f:
        f.write(data)


def make_model_dir(path: Path) -> Path:
    (path / "tokenizer").mkdir(parents=True)
    (path / "model.safetensors").write_bytes(os.urandom(3000))
    (path / "config.json").write_text('{"d_model": 8}')
    (path / "larev_config.json").write_text('{"seed": 1}')
    (path / "tokenizer" / "spiece.model").write_bytes(b"\x00\x01tok")
    return path


def files_of(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


# ----------------------------------------------------------------------------------------- file artifacts


def test_parquet_round_trip(store: ArtifactStore) -> None:
    key = "score/0123abcd/scores.parquet"
    uri = store.write_parquet(key, DF)
    assert uri == store.uri(key)
    assert uri.startswith("s3://" if not store.is_local else "/")
    assert store.exists(key)
    for ref in (key, uri):
        assert store.read_parquet(ref).equals(DF)
    assert store.key_of(uri) == key


def test_json_text_bytes_round_trip(store: ArtifactStore) -> None:
    store.write_json("r/metrics.json", {"rev": 0.25, "label": "ünï"})
    store.write_text("r/report.md", "# Report\n")
    store.write_bytes("r/plot.png", b"\x89PNG\r\n\x1a\n")
    assert store.read_json("r/metrics.json") == {"rev": 0.25, "label": "ünï"}
    assert store.read_text("r/report.md") == "# Report\n"
    assert store.read_bytes("r/plot.png") == b"\x89PNG\r\n\x1a\n"
    assert store.ls("r") == ["r/metrics.json", "r/plot.png", "r/report.md"]  # no sidecars
    assert store.ls() == ["r"]
    assert store.ls("nothing/here") == []


def test_sidecar_records_sha256(store: ArtifactStore) -> None:
    store.write_bytes("a/data.bin", b"payload")
    sidecar = store.fs.cat_file(store._path("a/data.bin") + ".sha256").decode()
    assert sidecar == f"{sha256_bytes(b'payload')}  data.bin\n"


def test_checksum_mismatch_detected(store: ArtifactStore) -> None:
    store.write_parquet("t/table.parquet", DF)
    buf = io.BytesIO()
    DF.head(1).write_parquet(buf)  # valid Parquet, different content
    tamper(store, "t/table.parquet", buf.getvalue())
    with pytest.raises(ArtifactError, match="checksum mismatch .*t/table.parquet"):
        store.read_parquet("t/table.parquet")
    assert store.read_parquet("t/table.parquet", verify=False).height == 1


def test_missing_and_wrong_kind(store: ArtifactStore) -> None:
    with pytest.raises(ArtifactError, match="not found: .*missing/x.parquet"):
        store.read_parquet("missing/x.parquet")
    assert not store.exists("missing/x.parquet")
    store.write_text("t/notes.parquet", "not a table")
    with pytest.raises(ArtifactError, match="not a Parquet file"):
        store.read_parquet("t/notes.parquet")
    store.write_text("t/bad.json", "{oops")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        store.read_json("t/bad.json")


def test_overwrite_and_delete(store: ArtifactStore) -> None:
    store.write_text("k/a.txt", "one")
    store.write_text("k/a.txt", "two")
    assert store.read_text("k/a.txt") == "two"
    assert store.delete("k/a.txt") is True
    assert not store.exists("k/a.txt")
    assert not store.fs.exists(store._path("k/a.txt") + ".sha256")
    assert store.delete("k/a.txt") is False


# -------------------------------------------------------------------------------------------- atomicity


def test_atomic_write_crash_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = ArtifactStore(tmp_path / "store")
    st.write_text("s/old.txt", "old")

    def crash(src: str, dst: str) -> None:
        assert os.path.basename(src).startswith(".tmp-") and os.path.getsize(src) > 0  # temp fully written
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(store_mod.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        st.write_parquet("s/new.parquet", DF)
    with pytest.raises(OSError, match="simulated crash"):
        st.write_text("s/old.txt", "new")
    monkeypatch.undo()

    assert not st.exists("s/new.parquet")
    assert st.read_text("s/old.txt") == "old"  # the previous version is untouched
    assert sorted(p.name for p in (tmp_path / "store" / "s").iterdir()) == ["old.txt", "old.txt.sha256"]

    # a hard crash (no cleanup) leaves a temp sibling: it is invisible to exists/ls
    (tmp_path / "store" / "s" / ".tmp-0123-new.parquet").write_bytes(b"PAR1partial")
    assert not st.exists("s/new.parquet")
    assert st.ls("s") == ["s/old.txt"]


def test_atomic_write_crash_s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3_server.new_bucket()
    st = ArtifactStore(f"s3://{bucket}", storage_options=s3_server.storage_options())

    def crash(path: str, data: bytes, **kwargs: object) -> None:
        raise OSError("simulated crash during PUT")

    monkeypatch.setattr(st.fs, "pipe_file", crash)
    with pytest.raises(StoreIOError, match="writing s3://.*/s/new.parquet after retries .*simulated crash"):
        st.write_parquet("s/new.parquet", DF)
    monkeypatch.undo()
    assert not st.exists("s/new.parquet")
    assert s3_server.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0


@pytest.mark.parametrize("failing_fsync", [1, 2], ids=["data", "sidecar"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
def test_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       code: int, failing_fsync: int) -> None:
    st = ArtifactStore(tmp_path / "store")
    st.write_text("s/old.txt", "old")
    calls = []
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:  # the data reached the temp file; the device refuses to keep it
        calls.append(fd)
        if len(calls) == failing_fsync:
            raise OSError(code, os.strerror(code))
        real_fsync(fd)

    monkeypatch.setattr(store_mod.os, "fsync", full_disk)
    uri = st.uri("s/new.parquet")
    full = "no space left on the device" if code == errno.ENOSPC else "disk quota exceeded"
    with pytest.raises(ConfigError, match=f"{full} while writing {uri}: free some space .*another --store"):
        st.write_parquet("s/new.parquet", DF)
    monkeypatch.undo()
    assert len(calls) == failing_fsync
    assert not st.exists("s/new.parquet")
    with pytest.raises(ArtifactError, match="not found"):
        st.read_parquet("s/new.parquet")
    # no data, no sidecar, no temporary file: only the earlier artifact
    assert sorted(p.name for p in (tmp_path / "store" / "s").iterdir()) == ["old.txt", "old.txt.sha256"]
    assert st.read_text("s/old.txt") == "old"


def test_full_disk_in_dir_artifacts(store: ArtifactStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_model_dir(tmp_path / "model")

    def full_disk(fin, fout):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    if store.is_local:  # writing the directory artifact fills the disk
        monkeypatch.setattr(store_mod, "_copy_hashing", full_disk)
        with pytest.raises(ConfigError, match=f"no space left .* while writing {store.uri('m')}: free some space"):
            store.put_dir(src, "m")
        monkeypatch.undo()
        assert not store.exists("m") and list((tmp_path / "store").iterdir()) == []  # no temporary directory
    else:  # downloading an S3 directory artifact into the local cache fills the local disk
        store.put_dir(src, "m")
        monkeypatch.setattr(store_mod, "_copy_hashing", full_disk)
        with pytest.raises(ConfigError, match=f"no space left .* while copying {store.uri('m')} to local disk"):
            store.get_dir("m", local_cache_dir=tmp_path / "cache")
        monkeypatch.undo()
        assert list((tmp_path / "cache").iterdir()) == []


# ---------------------------------------------------------------------------------- directory artifacts


def test_put_get_dir_local(tmp_path: Path) -> None:
    st = ArtifactStore(tmp_path / "store")
    src = make_model_dir(tmp_path / "model")
    key = "train/abc123/model"
    uri = st.put_dir(src, key)
    got = st.get_dir(uri)
    assert got == Path(uri) and got.is_dir()
    manifest = json.loads((got / MANIFEST_NAME).read_text())
    assert [f["path"] for f in manifest["files"]] == [
        "config.json", "larev_config.json", "model.safetensors", "tokenizer/spiece.model"]
    assert st.dir_digest(key) == manifest["digest"]
    assert {k: v for k, v in files_of(got).items() if k != MANIFEST_NAME} == files_of(src)
    assert st.exists(key) and st.ls("train/abc123") == [key]
    assert not list((tmp_path / "store" / "train" / "abc123").glob(".tmp-*"))

    (got / "config.json").write_text('{"d_model": 9}')  # same size, other content
    with pytest.raises(ArtifactError, match="config.json does not match the manifest"):
        st.get_dir(key)
    assert st.get_dir(key, verify=False) == got

    st.put_dir(src, key)  # replacing an artifact
    assert st.get_dir(key) == got
    assert st.delete(key) and not st.exists(key) and not got.exists()


def test_put_get_dir_s3(s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = ArtifactStore(f"s3://{s3_server.new_bucket()}/runs", storage_options=s3_server.storage_options())
    src = make_model_dir(tmp_path / "model")
    uri = st.put_dir(src, "train/abc123/model")
    assert uri.startswith("s3://") and st.exists("train/abc123/model")
    cache = tmp_path / "cache"
    got = st.get_dir(uri, local_cache_dir=cache)
    digest = st.dir_digest("train/abc123/model")
    assert got == cache / digest
    assert {k: v for k, v in files_of(got).items() if k != MANIFEST_NAME} == files_of(src)
    # the digest depends on content only: the same directory stored locally has the same one
    local = ArtifactStore(tmp_path / "store")
    local.put_dir(src, "m")
    assert local.dir_digest("m") == digest

    # a second get_dir reuses the cache without downloading
    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("downloaded again")

    monkeypatch.setattr(st.fs, "open", no_download)
    assert st.get_dir("train/abc123/model", local_cache_dir=cache) == got
    monkeypatch.undo()

    (got / "model.safetensors").write_bytes(b"truncated")  # a damaged cache is downloaded again
    assert st.get_dir("train/abc123/model", local_cache_dir=cache) == got
    assert (got / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert not list(cache.glob(".tmp-*"))


def test_get_dir_default_cache(s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    st = ArtifactStore(f"s3://{s3_server.new_bucket()}", storage_options=s3_server.storage_options())
    st.put_dir(make_model_dir(tmp_path / "model"), "m")
    assert st.get_dir("m") == tmp_path / "xdg" / "larev" / "artifacts" / st.dir_digest("m")


def test_s3_download_checks_checksums(s3_server: S3Server, tmp_path: Path) -> None:
    st = ArtifactStore(f"s3://{s3_server.new_bucket()}", storage_options=s3_server.storage_options())
    st.put_dir(make_model_dir(tmp_path / "model"), "m")
    tamper(st, "m/config.json", b'{"d_model": 9}')
    with pytest.raises(ArtifactError, match="config.json does not match the manifest"):
        st.get_dir("m", local_cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []  # nothing half-downloaded is left
    st.put_dir(make_model_dir(tmp_path / "model2"), "m")
    st.fs.rm_file(st._path("m/tokenizer/spiece.model"))
    with pytest.raises(ArtifactError, match="tokenizer/spiece.model is listed in the manifest but missing"):
        st.get_dir("m", local_cache_dir=tmp_path / "cache")


def test_incomplete_dir(store: ArtifactStore) -> None:
    store.write_bytes("train/f/model/model.safetensors", b"weights")  # files, but no manifest
    assert not store.exists("train/f/model")
    with pytest.raises(ArtifactError, match=r"incomplete artifact .*train/f/model \(no manifest\).*rerun"):
        store.get_dir("train/f/model")
    with pytest.raises(ArtifactError, match="not found"):
        store.get_dir("train/f/other")
    with pytest.raises(ArtifactError, match="is a file artifact"):
        store.get_dir("train/f/model/model.safetensors")


def test_put_dir_interrupted(store: ArtifactStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_model_dir(tmp_path / "model")
    calls = []
    real_copy = store_mod._copy_hashing

    def crash_on_third(fin, fout):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 3:
            raise OSError("simulated crash mid-upload")
        return real_copy(fin, fout)

    monkeypatch.setattr(store_mod, "_copy_hashing", crash_on_third)
    with pytest.raises(OSError if store.is_local else StoreIOError, match="simulated crash"):
        store.put_dir(src, "train/f/model")
    monkeypatch.undo()
    assert not store.exists("train/f/model")
    with pytest.raises(ArtifactError, match="incomplete artifact|not found"):
        store.get_dir("train/f/model")
    if store.is_local:  # the temporary directory is cleaned up; nothing at the final key
        assert list((tmp_path / "store" / "train" / "f").iterdir()) == []
    store.put_dir(src, "train/f/model")  # a rerun completes it
    assert store.exists("train/f/model")


def test_read_bytes_of_a_directory(store: ArtifactStore, tmp_path: Path) -> None:
    store.put_dir(make_model_dir(tmp_path / "model"), "m")
    with pytest.raises(ArtifactError, match="directory artifact"):
        store.read_bytes("m")


# ------------------------------------------------------------------------------------ keys, roots, misc


@pytest.mark.parametrize("key", [
    "", "/abs/key", "a/../b", "..", "a//b", "a/./b", "a/", "a\\b", ".tmp-123-x", "a/.tmp-x/b", "a.parquet.sha256",
])
def test_invalid_keys(tmp_path: Path, key: str) -> None:
    st = ArtifactStore(tmp_path)
    with pytest.raises((ConfigError, ArtifactError)):
        st.write_bytes(key, b"x")
    if not key.startswith("/"):  # an absolute path is taken as a URI (outside the root: ArtifactError)
        with pytest.raises(ConfigError, match="invalid artifact key"):
            st.exists(key)


def test_key_of(tmp_path: Path) -> None:
    st = ArtifactStore(f"file://{tmp_path}/root")
    assert st.root == str(tmp_path / "root")
    assert st.key_of(f"file://{tmp_path}/root/a/b.json") == "a/b.json"
    assert st.key_of(tmp_path / "root" / "a" / "b.json") == "a/b.json"
    for outside in (tmp_path / "other" / "x", tmp_path / "root", tmp_path / "rootx" / "y", "s3://b/root/x"):
        with pytest.raises(ArtifactError, match="not inside the artifact root"):
            st.key_of(outside)
    s3 = ArtifactStore("s3://bucket/pre/fix/")
    assert s3.root == "s3://bucket/pre/fix"
    assert s3.uri("a/b") == "s3://bucket/pre/fix/a/b" and s3.key_of("s3://bucket/pre/fix/a/b") == "a/b"
    with pytest.raises(ArtifactError):
        s3.key_of("s3://bucket/pre/other/a")


def test_relative_root_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    st = ArtifactStore("runs/store")
    assert st.root == str(tmp_path / "runs" / "store")
    monkeypatch.chdir("/")
    assert st.uri(st.write_text("a.txt", "x")) == str(tmp_path / "runs" / "store" / "a.txt")


@pytest.mark.parametrize("root", ["", "gs://bucket/x", "s3://", "s3:///prefix", "s3://bucket/../x"])
def test_bad_roots(root: str) -> None:
    with pytest.raises(ConfigError):
        ArtifactStore(root)


def test_root_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(ConfigError, match=f"artifact root {tmp_path}/afile/x .*is a file"):
        ArtifactStore(tmp_path / "afile" / "x")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_root(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        for root in (ro, ro / "sub"):
            st = ArtifactStore(root)
            with pytest.raises(ConfigError, match=f"artifact root {root}"):
                st.write_text("a.txt", "x")
    finally:
        ro.chmod(0o700)


def test_pickle_round_trip(store: ArtifactStore) -> None:
    store.write_json("p/a.json", [1, 2])  # builds the filesystem before pickling
    clone = pickle.loads(pickle.dumps(store))
    assert clone.root == store.root and clone._fs is None
    assert clone.read_json("p/a.json") == [1, 2]
    clone.write_json("p/b.json", {"ok": True})
    assert store.read_json("p/b.json") == {"ok": True}


def test_no_credentials_in_repr(s3_server: S3Server) -> None:
    st = ArtifactStore("s3://bucket/x", storage_options={**s3_server.storage_options(), "secret": "s3cr3t-value"})
    assert repr(st) == "ArtifactStore('s3://bucket/x')"
    assert "s3cr3t" not in repr(st) and "s3cr3t" not in str(st)


def test_boto3_sees_what_the_store_wrote(s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.new_bucket()
    st = ArtifactStore(f"s3://{bucket}/runs", storage_options=s3_server.storage_options())
    st.write_parquet("score/f1/scores.parquet", DF)
    st.put_dir(make_model_dir(tmp_path / "model"), "train/f0/model")
    client = s3_server.client()
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert keys == {
        "runs/score/f1/scores.parquet", "runs/score/f1/scores.parquet.sha256",
        "runs/train/f0/model/_MANIFEST.json", "runs/train/f0/model/config.json",
        "runs/train/f0/model/larev_config.json", "runs/train/f0/model/model.safetensors",
        "runs/train/f0/model/tokenizer/spiece.model",
    }
    body = client.get_object(Bucket=bucket, Key="runs/score/f1/scores.parquet")["Body"].read()
    assert pl.read_parquet(io.BytesIO(body)).equals(DF)
    # and the store sees objects written by others (no stale listing cache)
    client.put_object(Bucket=bucket, Key="runs/score/f1/extra.json", Body=b"{}")
    assert st.ls("score/f1") == ["score/f1/extra.json", "score/f1/scores.parquet"]
    assert st.read_json("score/f1/extra.json") == {}


def test_s3_endpoint_and_credentials_from_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    st = ArtifactStore(f"s3://{s3_server.new_bucket()}/p")  # no storage_options
    st.write_parquet("a.parquet", DF)
    assert st.read_parquet("a.parquet").equals(DF)


def test_s3_missing_bucket_is_config_error(s3_server: S3Server) -> None:
    st = ArtifactStore("s3://no-such-bucket-larev/p", storage_options=s3_server.storage_options())
    with pytest.raises(ConfigError, match="s3://no-such-bucket-larev/p"):
        st.write_text("a.txt", "x")
    with pytest.raises(ArtifactError, match="not found"):
        st.read_text("a.txt")


def test_hashes() -> None:
    assert sha256_bytes(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# ------------------------------------------------------------------------- S3 faults (a proxy in front of moto)


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """No waiting between botocore's retries: the tests count retries, they need not sit through the backoff."""
    from botocore.retries.standard import ExponentialBackoff

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.0)


def proxied_store(s3_server: S3Server, proxy: FaultyS3Proxy, bucket: str) -> ArtifactStore:
    """A store on `bucket` that reaches the S3 server through the proxy (endpoint in storage_options)."""
    return ArtifactStore(f"s3://{bucket}/runs", storage_options=S3Server(proxy.endpoint_url).storage_options())


def test_s3_retry_options() -> None:
    assert s3_filesystem_options(None)["config_kwargs"] == {"retries": {"mode": "standard", "total_max_attempts": 6}}
    mine = {"config_kwargs": {"retries": {"mode": "adaptive", "max_attempts": 2}, "read_timeout": 5}}
    assert s3_filesystem_options(mine)["config_kwargs"] == mine["config_kwargs"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_MAX_ATTEMPTS", "3")  # botocore reads it when no retries are configured
        assert "retries" not in s3_filesystem_options(None).get("config_kwargs", {})


def test_s3_transient_errors_are_retried(s3_server: S3Server) -> None:
    """503 SlowDown twice per request (fewer than the 6 attempts), real botocore backoff: the store never notices."""
    bucket = s3_server.new_bucket()
    with FaultyS3Proxy(s3_server.endpoint_url, fail_next(2)) as proxy:
        st = proxied_store(s3_server, proxy, bucket)
        st.write_bytes("a/data.bin", b"payload")
        assert st.fs.s3.meta.config.retries == S3_RETRIES
        # botocore's own retries ("attempt=3; max=6"), not a second try by s3fs (which would start at attempt=1)
        assert [(r.method, r.status, r.headers.get("amz-sdk-request", "").split(";")[0]) for r in proxy.requests] == [
            ("PUT", 503, "attempt=1"), ("PUT", 503, "attempt=2"), ("PUT", 200, "attempt=3"), ("PUT", 200, "attempt=1")]
        assert proxy.requests[0].path == proxy.requests[2].path == f"/{bucket}/runs/a/data.bin"
        assert proxy.requests[2].headers["amz-sdk-request"] == "attempt=3; max=6"
        proxy.fail = fail_next(2)
        assert st.read_bytes("a/data.bin") == b"payload"
        assert len(proxy.failed) == 4
    body = s3_server.client().get_object(Bucket=bucket, Key="runs/a/data.bin")["Body"].read()
    assert body == b"payload"


def test_s3_transient_errors_in_dir_artifacts(s3_server: S3Server, tmp_path: Path, fast_backoff: None) -> None:
    bucket = s3_server.new_bucket()
    src = make_model_dir(tmp_path / "model")
    with FaultyS3Proxy(s3_server.endpoint_url, fail_next(3)) as proxy:
        st = proxied_store(s3_server, proxy, bucket)
        st.put_dir(src, "train/f/model")
        proxy.fail = fail_next(3)
        got = st.get_dir("train/f/model", local_cache_dir=tmp_path / "cache")
        assert len(proxy.failed) == 6
    assert {k: v for k, v in files_of(got).items() if k != MANIFEST_NAME} == files_of(src)


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (500, "InternalError")])
def test_s3_persistent_errors_fail_clearly_and_leave_nothing(s3_server: S3Server, fast_backoff: None,
                                                             status: int, code: str) -> None:
    bucket = s3_server.new_bucket()
    with FaultyS3Proxy(s3_server.endpoint_url, fail_always, status=status, code=code, message="injected") as proxy:
        st = proxied_store(s3_server, proxy, bucket)
        with pytest.raises(StoreIOError, match=rf"S3 request failed writing s3://{bucket}/runs/a/new\.bin after "
                                               r"retries \(OSError: .*injected\); check the endpoint") as info:
            st.write_bytes("a/new.bin", b"payload")
        assert isinstance(info.value, ArtifactError)
        attempts = S3_RETRIES["total_max_attempts"]
        assert len(proxy.requests) == len(proxy.failed) > attempts - 1
        # every botocore call made all its attempts; s3fs calls again only on SlowDown (its own 5 tries)
        assert len(proxy.failed) == (5 * attempts if code == "SlowDown" else attempts)
        assert {r.path for r in proxy.requests} == {f"/{bucket}/runs/a/new.bin"}
        proxy.fail = None  # the endpoint recovers: nothing was left that a read would trust
        assert not st.exists("a/new.bin")
        with pytest.raises(ArtifactError, match="not found"):
            st.read_bytes("a/new.bin")
    assert s3_server.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_s3_persistent_errors_on_read_are_not_a_missing_artifact(s3_server: S3Server, fast_backoff: None) -> None:
    bucket = s3_server.new_bucket()
    key = "c" * 64
    with FaultyS3Proxy(s3_server.endpoint_url) as proxy:
        st = proxied_store(s3_server, proxy, bucket)
        st.write_bytes("a/data.bin", b"payload")
        cache = StoreMapping(st, "llm-cache")
        cache[key] = "value"
        proxy.fail = fail_always
        with pytest.raises(StoreIOError, match=f"reading s3://{bucket}/runs/a/data.bin after retries"):
            st.read_bytes("a/data.bin")
        with pytest.raises(StoreIOError, match="reading .*after retries"):
            st.exists("a/data.bin")
        with pytest.raises(StoreIOError):  # an unreachable prompt cache is not a cache miss
            cache[key]
        with pytest.raises(StoreIOError, match=f"listing s3://{bucket}/runs/a after retries"):
            st.ls("a")
        proxy.fail = None
        assert st.read_bytes("a/data.bin") == b"payload" and cache[key] == "value"


def test_s3_put_dir_failing_before_its_manifest_is_never_served(s3_server: S3Server, tmp_path: Path,
                                                               fast_backoff: None) -> None:
    bucket = s3_server.new_bucket()

    def manifest_fails(number: int, method: str, path: str) -> bool:
        return method == "PUT" and path.split("?")[0].endswith(f"/{MANIFEST_NAME}")

    with FaultyS3Proxy(s3_server.endpoint_url, manifest_fails) as proxy:
        st = proxied_store(s3_server, proxy, bucket)
        with pytest.raises(StoreIOError, match=f"writing s3://{bucket}/runs/train/f/model after retries"):
            st.put_dir(make_model_dir(tmp_path / "model"), "train/f/model")
        assert proxy.failed and len(proxy.requests) > len(proxy.failed)  # the files went up, the manifest did not
        proxy.fail = None
        assert not st.exists("train/f/model")
        with pytest.raises(ArtifactError, match=r"incomplete artifact .*train/f/model \(no manifest\)"):
            st.get_dir("train/f/model", local_cache_dir=tmp_path / "cache")
