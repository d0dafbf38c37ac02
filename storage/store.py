"""Artifact store: the Parquet tables, JSON/Markdown/PNG files and saved models that pipeline steps pass on.

One `ArtifactStore` wraps a root on local disk (`runs/store`, `/abs/path`, `file:///abs/path`) or on S3
(`s3://bucket/prefix`) through fsspec. Artifacts are addressed by a relative *key* (a posix path inside
the root). The layout that steps use (keys built by tasks/runtime/cache.py)::

    <root>/<step>/<fingerprint>/<name>             a file artifact (e.g. scores.parquet)
    <root>/<step>/<fingerprint>/<name>.sha256      its checksum ("<hex>  <name>", sha256sum format)
    <root>/<step>/<fingerprint>/<dir>/...          a directory artifact (a saved model)
    <root>/<step>/<fingerprint>/<dir>/_MANIFEST.json   written last: path, size, sha256 of every file

`<fingerprint>` is a hash of the step's inputs, config and code version, computed by the caller (the step's
cache key, tasks/runtime/cache.py), so a finished step is found again by its key and a changed input gets a new key.

Guarantees:

- a file write is atomic: on local disk it goes to a temporary sibling `.tmp-<uuid>-<name>` that is
  renamed into place; on S3 a single PUT (or a completed multipart upload) is already atomic. A crash
  never leaves a partial file at the final key;
- a file's sha256 sidecar is written after the data and checked on every read (`verify=False` skips it);
- a directory artifact without `_MANIFEST.json` is an interrupted write and is never served;
  `get_dir` checks every file against the manifest.

Errors: a missing or corrupt artifact raises `ArtifactError` naming its URI; S3 requests that still fail after
botocore's retries (see storage/s3.py) raise `StoreIOError` (an ArtifactError) naming the URI; a root that cannot
work (not writable, under a regular file, unknown scheme, a full disk or quota) and an invalid key raise
`ConfigError`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, TypeVar

import fsspec
import polars as pl

from larev.digests import sha256_file
from larev.errors import ArtifactError, ConfigError
from storage.s3 import s3_filesystem_options

TMP_PREFIX = ".tmp-"
SIDECAR_SUFFIX = ".sha256"
MANIFEST_NAME = "_MANIFEST.json"
MANIFEST_FORMAT = "larev.dir-artifact/1"
_CHUNK = 1 << 20
T = TypeVar("T")
_PARQUET_MAGIC = b"PAR1"
_INCOMPLETE_HINT = "an interrupted write; rerun the step"
#: errno values of a full disk or an exhausted quota (EDQUOT is missing on some platforms).
_NO_SPACE = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)


class StoreIOError(ArtifactError):
    """The store could not read or write an artifact on S3 (after the client's retries): nothing to do with the
    artifact's content, so readers must not take it for a missing or damaged artifact."""


def _remote_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions of the S3 client stack that mean an I/O failure (botocore/aiohttp, imported lazily)."""
    types: list[type[BaseException]] = [OSError]
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        types += [BotoCoreError, ClientError]
    except ImportError:  # pragma: no cover - s3fs always brings botocore
        pass
    try:
        from aiohttp import ClientError as AiohttpClientError

        types.append(AiohttpClientError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


def _io_error(action: str, exc: BaseException) -> StoreIOError:
    reason = str(exc).splitlines()[0] if str(exc) else ""
    return StoreIOError(f"S3 request failed {action} after retries ({type(exc).__name__}: {reason}); check the "
                        "endpoint and its health, then rerun (finished steps are reused)")


def _write_local_atomically(path: str, write: Callable[[BinaryIO], T]) -> T:
    """`write` into a temporary sibling of `path`, fsync it and rename it into place: readers see the old file or
    the whole new one, and a failure leaves no temporary file behind. Returns what `write` returned."""
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name[:100]}")
    try:
        with open(tmp, "wb") as f:
            result = write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return result


# --------------------------------------------------------------------------------------------- hashing


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def _canonical_default(obj: Any) -> Any:
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, (bytes, bytearray)):
        return {"sha256": sha256_bytes(bytes(obj))}
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=lambda x: json.dumps(x, sort_keys=True, default=_canonical_default))
    if hasattr(obj, "model_dump"):  # pydantic models (larev configs)
        return obj.model_dump(mode="json")
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    raise TypeError(f"manifest: cannot hash a value of type {type(obj).__name__}")


def _canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=_canonical_default)


# ------------------------------------------------------------------------------------------------ keys


def _check_relpath(path: str, what: str) -> str:
    """`path` as a clean relative posix path, or ConfigError naming what is wrong."""
    if not isinstance(path, str):
        raise ConfigError(f"invalid {what} {path!r}: expected a string")
    if not path:
        raise ConfigError(f"invalid {what} '': empty")
    if "\\" in path:
        raise ConfigError(f"invalid {what} {path!r}: use '/' as separator, not '\\'")
    if path.startswith("/"):
        raise ConfigError(f"invalid {what} {path!r}: must be relative to the store root, not absolute")
    for part in path.split("/"):
        if not part:
            raise ConfigError(f"invalid {what} {path!r}: empty path component")
        if part in (".", ".."):
            raise ConfigError(f"invalid {what} {path!r}: '{part}' is not allowed")
        if part.startswith(TMP_PREFIX):
            raise ConfigError(f"invalid {what} {path!r}: names starting with '{TMP_PREFIX}' are reserved")
    return path


def validate_key(key: str) -> str:
    """Return `key` if it is a valid artifact key, else raise ConfigError.

    A key is a relative posix path with non-empty components, no '.'/'..', no '\\', no component
    starting with '.tmp-' (temporary files) and no trailing '.sha256' (checksum sidecars).
    """
    _check_relpath(key, "artifact key")
    if key.endswith(SIDECAR_SUFFIX):
        raise ConfigError(f"invalid artifact key {key!r}: the suffix '{SIDECAR_SUFFIX}' is reserved "
                          "for checksum files")
    return key


def default_cache_dir() -> Path:
    """Where `get_dir` puts directories downloaded from a remote root: $XDG_CACHE_HOME or ~/.cache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "larev" / "artifacts"


# ------------------------------------------------------------------------------------------- manifests


def _copy_hashing(src: IO[bytes], dst: IO[bytes]) -> tuple[int, str]:
    """Copy `src` to `dst`; return (size, sha256) of what was copied."""
    h = hashlib.sha256()
    size = 0
    for chunk in iter(lambda: src.read(_CHUNK), b""):
        h.update(chunk)
        dst.write(chunk)
        size += len(chunk)
    return size, h.hexdigest()


def _manifest(entries: list[dict[str, Any]]) -> dict[str, Any]:
    files = sorted(entries, key=lambda e: e["path"])
    return {"format": MANIFEST_FORMAT, "digest": sha256_bytes(_canonical_json(files).encode()), "files": files}


def _parse_manifest(raw: bytes, uri: str) -> dict[str, Any]:
    """Parse and check a manifest: structure, safe paths, and its digest over the file list."""
    bad = f"corrupt manifest {uri}"
    try:
        manifest = json.loads(raw)
        files = manifest["files"]
        digest = manifest["digest"]
        for entry in files:
            _check_relpath(entry["path"], "manifest path")
            if not isinstance(entry["size"], int) or not isinstance(entry["sha256"], str):
                raise ValueError(f"bad entry {entry!r}")
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError and ConfigError are ValueErrors
        raise ArtifactError(f"{bad}: {exc}; rerun the step") from exc
    if _manifest(files)["digest"] != digest:
        raise ArtifactError(f"{bad}: its digest does not match its file list; rerun the step")
    return manifest


# --------------------------------------------------------------------------------------------- store


class ArtifactStore:
    """Artifacts under one root, local or S3. Picklable: holds only the root and options; the fsspec
    filesystem is built lazily in the process that uses it.

    Every method taking a `key` also accepts a full URI inside the root (what the writers return).
    """

    def __init__(self, root: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        raw = os.fspath(root).strip()
        if not raw:
            raise ConfigError("artifact root is empty: give a local directory or s3://bucket/prefix")
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self._fs: fsspec.AbstractFileSystem | None = None
        self._root_ready = False
        scheme = raw.split("://", 1)[0].lower() if "://" in raw else ""
        if scheme in ("", "file"):
            path = raw.split("://", 1)[1] if scheme else raw
            self.protocol = "file"
            self._base = os.path.abspath(os.path.expanduser(path))
            self.root = self._base
            self._check_local_root()
        elif scheme == "s3":
            base = raw.split("://", 1)[1].rstrip("/")
            bucket = base.split("/", 1)[0]
            if not bucket:
                raise ConfigError(f"artifact root {raw!r} names no bucket: use s3://bucket/prefix")
            if base != bucket:
                _check_relpath(base[len(bucket) + 1:], f"prefix of artifact root {raw!r}")
            self.protocol = "s3"
            self._base = base
            self.root = f"s3://{base}"
        else:
            raise ConfigError(f"artifact root {raw!r}: unsupported scheme '{scheme}://' "
                              "(use a local directory or s3://bucket/prefix)")

    # -- pickling / display

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.root, self.storage_options))

    def __repr__(self) -> str:  # never shows storage_options: they may hold credentials
        return f"{type(self).__name__}({self.root!r})"

    # -- paths

    @property
    def is_local(self) -> bool:
        """True for a root on local disk."""
        return self.protocol == "file"

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem (built on first use)."""
        if self._fs is None:
            if self.is_local:
                self._fs = fsspec.filesystem("file")
            else:
                self._fs = fsspec.filesystem("s3", **s3_filesystem_options(self.storage_options))
        return self._fs

    def _path(self, key: str) -> str:
        """Filesystem path (fsspec form) of a validated key."""
        return posixpath.join(self._base, key)

    def uri(self, key: str) -> str:
        """Full URI of `key`: an absolute path for a local root, s3://bucket/... for S3."""
        key = self._as_key(key)
        return self._path(key) if self.is_local else f"s3://{self._path(key)}"

    def key_of(self, uri: str | os.PathLike[str]) -> str:
        """The key of a URI inside this root (inverse of `uri`); ArtifactError if it is outside."""
        text = os.fspath(uri)
        if self.is_local:
            if text.startswith("file://"):
                text = text[len("file://"):]
            path = None if "://" in text else os.path.abspath(os.path.expanduser(text))
        else:
            path = text[len("s3://"):].rstrip("/") if text.startswith("s3://") else None
        prefix = self._base.rstrip("/") + "/"
        if path is None or not path.startswith(prefix):
            raise ArtifactError(f"{text} is not inside the artifact root {self.root}")
        return validate_key(path[len(prefix):])

    def _as_key(self, key_or_uri: str | os.PathLike[str]) -> str:
        text = os.fspath(key_or_uri)
        if "://" in text or os.path.isabs(text):
            return self.key_of(text)
        return validate_key(text)

    # -- error translation

    def _check_local_root(self) -> None:
        """Fail at construction when the local root can never be a directory (a file is in the way)."""
        path = self._base
        while not os.path.exists(path):
            path = os.path.dirname(path)
        if not os.path.isdir(path):
            raise ConfigError(f"artifact root {self.root} is not usable: {path} is a file, not a directory; "
                              "choose another root")

    def _ensure_root(self) -> None:
        """Before the first local write: create the root and check it is writable."""
        if self._root_ready or not self.is_local:
            return
        try:
            os.makedirs(self._base, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"artifact root {self.root} cannot be created: {exc.strerror}; "
                              "choose a writable root") from exc
        if not os.access(self._base, os.W_OK | os.X_OK):
            raise ConfigError(f"artifact root {self.root} is not writable; choose a writable root")
        self._root_ready = True

    @contextlib.contextmanager
    def _errors(self, key: str, *, writing: bool = False) -> Iterator[None]:
        """Translate filesystem errors into ArtifactError / ConfigError naming the URI (no credentials)."""
        uri = self.uri(key)
        try:
            yield
        except PermissionError as exc:
            hint = "" if self.is_local else " (check the S3 credentials and the bucket policy)"
            raise ConfigError(f"permission denied {'writing' if writing else 'reading'} {uri} "
                              f"under artifact root {self.root}{hint}") from exc
        except FileNotFoundError as exc:
            if writing:  # local: the root vanished; S3: the bucket does not exist
                raise ConfigError(f"cannot write {uri}: artifact root {self.root} does not exist") from exc
            raise ArtifactError(f"artifact not found: {uri}") from exc
        except OSError as exc:
            if exc.errno == errno.EROFS:
                raise ConfigError(f"artifact root {self.root} is on a read-only filesystem") from exc
            if exc.errno in _NO_SPACE:
                full = "disk quota exceeded" if exc.errno != errno.ENOSPC else "no space left on the device"
                where = f" (at {exc.filename})" if exc.filename else ""
                action = f"writing {uri}" if writing else f"copying {uri} to local disk"
                raise ConfigError(f"{full}{where} while {action}: free some space (or raise the quota), or choose "
                                  f"another --store than {self.root}") from exc
            if self.is_local:
                raise
            raise _io_error(f"{'writing' if writing else 'reading'} {uri}", exc) from exc
        except _remote_error_types() as exc:  # botocore/aiohttp errors s3fs does not translate to OSError
            if self.is_local:
                raise
            raise _io_error(f"{'writing' if writing else 'reading'} {uri}", exc) from exc

    def _isfile(self, path: str) -> bool:
        """Like `fs.isfile`, but only a missing path gives False: an I/O failure (S3 unreachable after retries)
        raises, so callers inside `_errors` report it instead of taking the artifact for absent."""
        try:
            return self.fs.info(path)["type"] == "file"
        except (FileNotFoundError, NotADirectoryError):
            return False

    # -- file artifacts

    def _put(self, path: str, data: bytes) -> None:
        """Write `data` at `path` atomically (local: temp sibling + os.replace; S3: one PUT)."""
        if not self.is_local:
            self.fs.pipe_file(path, data)
            return
        _write_local_atomically(path, lambda f: f.write(data))

    def write_bytes(self, key: str, data: bytes) -> str:
        """Write a file artifact atomically, then its sha256 sidecar; return its URI."""
        key = self._as_key(key)
        path = self._path(key)
        self._ensure_root()
        with self._errors(key, writing=True):
            if self.is_local and os.path.isdir(path):
                raise ArtifactError(f"cannot write {self.uri(key)}: a directory artifact is there")
            self._put(path, bytes(data))
            try:
                self._put(path + SIDECAR_SUFFIX, f"{sha256_bytes(data)}  {posixpath.basename(key)}\n".encode())
            except BaseException:
                if self.is_local:  # leave no file without its (matching) checksum behind
                    for p in (path, path + SIDECAR_SUFFIX):
                        with contextlib.suppress(OSError):
                            os.unlink(p)
                raise
        return self.uri(key)

    def read_bytes(self, key: str, *, verify: bool = True) -> bytes:
        """Read a file artifact, checking it against its sha256 sidecar when there is one."""
        key = self._as_key(key)
        path = self._path(key)
        uri = self.uri(key)
        try:
            with self._errors(key):
                data = self.fs.cat_file(path)
        except StoreIOError:
            raise
        except (ArtifactError, IsADirectoryError) as exc:
            if self.fs.isdir(path):
                raise ArtifactError(f"{uri} is a directory artifact, not a file: use get_dir") from exc
            if isinstance(exc, ArtifactError):
                raise
            raise ArtifactError(f"artifact not found: {uri}") from exc
        if verify:
            expected = self._read_sidecar(key)
            if expected is not None and sha256_bytes(data) != expected:
                raise ArtifactError(f"checksum mismatch for {uri}: the file changed after it was written "
                                    "or its write was interrupted; rerun the step")
        return data

    def _read_sidecar(self, key: str) -> str | None:
        try:
            with self._errors(key):
                text = self.fs.cat_file(self._path(key) + SIDECAR_SUFFIX).decode("utf-8", "replace")
        except StoreIOError:
            raise
        except ArtifactError:
            return None
        digest = text.split()[0] if text.split() else ""
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ArtifactError(f"corrupt checksum file {self.uri(key)}{SIDECAR_SUFFIX}; rerun the step")
        return digest

    def write_text(self, key: str, text: str) -> str:
        """Write UTF-8 text (Markdown, CSV, ...); return the URI."""
        return self.write_bytes(key, text.encode("utf-8"))

    def read_text(self, key: str, *, verify: bool = True) -> str:
        """Read a UTF-8 text artifact."""
        data = self.read_bytes(key, verify=verify)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArtifactError(f"{self.uri(key)} is not UTF-8 text: {exc}") from exc

    def write_json(self, key: str, obj: Any, *, indent: int | None = 2) -> str:
        """Write `obj` as JSON (UTF-8, trailing newline); return the URI."""
        return self.write_text(key, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")

    def read_json(self, key: str, *, verify: bool = True) -> Any:
        """Read a JSON artifact."""
        text = self.read_text(key, verify=verify)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{self.uri(key)} is not valid JSON: {exc}") from exc

    def write_parquet(self, key: str, df: pl.DataFrame) -> str:
        """Write a polars DataFrame as Parquet (serialised in memory, then one atomic put); return the URI."""
        if not isinstance(df, pl.DataFrame):
            raise TypeError(f"write_parquet expects a polars DataFrame, got {type(df).__name__}")
        buf = io.BytesIO()
        df.write_parquet(buf)
        return self.write_bytes(key, buf.getvalue())

    def read_parquet(self, key_or_uri: str, *, verify: bool = True) -> pl.DataFrame:
        """Read a Parquet artifact into a polars DataFrame."""
        data = self.read_bytes(key_or_uri, verify=verify)
        uri = self.uri(key_or_uri)
        if len(data) < 12 or data[:4] != _PARQUET_MAGIC or data[-4:] != _PARQUET_MAGIC:
            raise ArtifactError(f"{uri} is not a Parquet file")
        try:
            return pl.read_parquet(io.BytesIO(data))
        except Exception as exc:  # polars/arrow raise several types for a damaged file
            raise ArtifactError(f"cannot read Parquet {uri}: {exc}") from exc

    def put_file(self, local_file: str | os.PathLike[str], key: str) -> tuple[str, str]:
        """Store a local file as the file artifact `key`, streamed (never whole in memory), then its sha256
        sidecar; return (URI, sha256). Local roots write a temporary sibling and rename it into place; S3 uploads
        one object (multipart when large)."""
        key = self._as_key(key)
        path = self._path(key)
        if not os.path.isfile(local_file):
            raise ArtifactError(f"put_file: {local_file} is not a file")
        self._ensure_root()
        with self._errors(key, writing=True):
            if self.is_local:
                if os.path.isdir(path):
                    raise ArtifactError(f"cannot write {self.uri(key)}: a directory artifact is there")
                with open(local_file, "rb") as fin:
                    _, digest = _write_local_atomically(path, lambda fout: _copy_hashing(fin, fout))
            else:
                digest = sha256_file(local_file)
                self.fs.put_file(os.fspath(local_file), path)
            self._put(path + SIDECAR_SUFFIX, f"{digest}  {posixpath.basename(key)}\n".encode())
        return self.uri(key), digest

    @contextlib.contextmanager
    def local_copy(self, key_or_uri: str, *, verify: bool = True) -> Iterator[Path]:
        """A local path holding the file artifact, checked against its sha256 sidecar without reading it into
        memory: the artifact itself under a local root (do not modify it), else a temporary download that is
        deleted when the block ends."""
        key = self._as_key(key_or_uri)
        path = self._path(key)
        uri = self.uri(key)
        expected = self._read_sidecar(key) if verify else None
        with tempfile.TemporaryDirectory(prefix="larev-") as tmp:
            if self.is_local:
                local = Path(path)
                if local.is_dir():
                    raise ArtifactError(f"{uri} is a directory artifact, not a file: use get_dir")
                if not local.is_file():
                    raise ArtifactError(f"artifact not found: {uri}")
            else:
                local = Path(tmp) / posixpath.basename(key)
                with self._errors(key):
                    self.fs.get_file(path, os.fspath(local))
            if expected is not None and sha256_file(local) != expected:
                raise ArtifactError(f"checksum mismatch for {uri}: the file changed after it was written "
                                    "or its write was interrupted; rerun the step")
            yield local

    # -- directory artifacts

    def _open_write(self, path: str) -> BinaryIO:
        if self.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return open(path, "wb")
        return self.fs.open(path, "wb")

    def put_dir(self, local_dir: str | os.PathLike[str], key: str) -> str:
        """Store every file under `local_dir` as the directory artifact `key`; return its URI.

        Files go up first and `_MANIFEST.json` (path, size, sha256 of each file + a combined digest)
        last, so a directory without a manifest is known to be incomplete. A previous artifact at `key`
        is replaced. Local roots build the directory under a temporary sibling and rename it into place.
        """
        key = self._as_key(key)
        src = Path(local_dir)
        if not src.is_dir():
            raise ArtifactError(f"put_dir: {src} is not a directory")
        files = sorted(p for p in src.rglob("*") if p.is_file() and p.relative_to(src).as_posix() != MANIFEST_NAME)
        if not files:
            raise ArtifactError(f"put_dir: {src} holds no files")
        self._ensure_root()
        final = self._path(key)
        with self._errors(key, writing=True):
            if self.is_local:
                parent, name = os.path.split(final)
                os.makedirs(parent, exist_ok=True)
                target = os.path.join(parent, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name[:100]}")
            else:
                self.delete(key)  # drops the old manifest first: never a mix of old and new files
                target = final
            try:
                entries = []
                for file in files:
                    rel = _check_relpath(file.relative_to(src).as_posix(), f"file name in {src}")
                    with open(file, "rb") as fin, self._open_write(posixpath.join(target, rel)) as fout:
                        size, digest = _copy_hashing(fin, fout)
                    entries.append({"path": rel, "size": size, "sha256": digest})
                manifest = json.dumps(_manifest(entries), indent=1).encode()
                if self.is_local:
                    with self._open_write(os.path.join(target, MANIFEST_NAME)) as f:
                        f.write(manifest)
                        f.flush()
                        os.fsync(f.fileno())
                    _swap_dir_into_place(target, final)
                else:
                    self.fs.pipe_file(posixpath.join(target, MANIFEST_NAME), manifest)
            except BaseException:
                if self.is_local:
                    shutil.rmtree(target, ignore_errors=True)
                raise
        return self.uri(key)

    def read_manifest(self, key: str) -> dict[str, Any]:
        """The checked `_MANIFEST.json` of a directory artifact.

        ArtifactError when the directory is missing, when it has no manifest (an interrupted write) or
        when the manifest is damaged.
        """
        key = self._as_key(key)
        uri = self.uri(key)
        path = self._path(key)
        try:
            with self._errors(key):
                raw = self.fs.cat_file(posixpath.join(path, MANIFEST_NAME))
        except StoreIOError:
            raise
        except (ArtifactError, NotADirectoryError) as exc:
            if self.fs.isfile(path):
                raise ArtifactError(f"{uri} is a file artifact, not a directory") from exc
            if self.fs.isdir(path):
                raise ArtifactError(f"incomplete artifact {uri} (no manifest): {_INCOMPLETE_HINT}") from exc
            raise ArtifactError(f"artifact not found: {uri}") from exc
        return _parse_manifest(raw, uri)

    def dir_digest(self, key: str) -> str:
        """The combined digest from the manifest of a directory artifact (identifies its content)."""
        return str(self.read_manifest(key)["digest"])

    def get_dir(self, key_or_uri: str, local_cache_dir: str | os.PathLike[str] | None = None,
                *, verify: bool = True) -> Path:
        """A local directory holding the directory artifact, checked against its manifest.

        Local root: the artifact's own directory (every file's size and sha256 checked unless
        `verify=False`). S3 root: a copy in `<local_cache_dir>/<digest>` (default cache:
        `~/.cache/larev/artifacts/<digest>`), downloaded and checked file by file; an existing copy
        whose manifest has the same digest (and whose files have the listed sizes) is reused.
        """
        key = self._as_key(key_or_uri)
        manifest = self.read_manifest(key)
        uri = self.uri(key)
        if self.is_local:
            path = Path(self._path(key))
            if verify:
                _verify_local_dir(path, manifest, uri)
            return path
        cache_root = Path(local_cache_dir) if local_cache_dir is not None else default_cache_dir()
        target = cache_root / manifest["digest"]
        if _cached_copy_ok(target, manifest):
            return target
        cache_root.mkdir(parents=True, exist_ok=True)
        tmp = cache_root / f"{TMP_PREFIX}{uuid.uuid4().hex}-{manifest['digest']}"
        try:
            with self._errors(key):
                for entry in manifest["files"]:
                    dest = tmp / entry["path"]
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        with self.fs.open(posixpath.join(self._path(key), entry["path"]), "rb") as fin, \
                                open(dest, "wb") as fout:
                            size, digest = _copy_hashing(fin, fout)
                    except FileNotFoundError as exc:
                        raise ArtifactError(f"artifact {uri}: {entry['path']} is listed in the manifest but "
                                            "missing; rerun the step") from exc
                    if (size, digest) != (entry["size"], entry["sha256"]):
                        raise ArtifactError(f"artifact {uri}: {entry['path']} does not match the manifest "
                                            "(size or sha256); rerun the step")
            (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1))
            _swap_dir_into_place(str(tmp), str(target), keep_existing=lambda: _cached_copy_ok(target, manifest))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return target

    # -- listing and deletion

    def exists(self, key: str) -> bool:
        """True when a complete artifact is at `key`: a file, or a directory with its manifest.

        An incomplete directory (no manifest) and a mere prefix (`step/fingerprint`) give False;
        use `ls` for prefixes. A store that cannot be reached raises (StoreIOError on S3) rather than giving False.
        """
        key = self._as_key(key)
        path = self._path(key)
        with self._errors(key):
            return self._isfile(path) or self._isfile(posixpath.join(path, MANIFEST_NAME))

    def ls(self, prefix: str = "") -> list[str]:
        """Sorted keys directly under `prefix` (the root when empty): files and directories, without
        checksum sidecars and temporary files. A missing prefix gives []."""
        path = self._path(self._as_key(prefix)) if prefix else self._base
        try:
            entries = self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        except _remote_error_types() as exc:
            if self.is_local:
                raise
            raise _io_error(f"listing s3://{path}", exc) from exc
        base = self._base.rstrip("/") + "/"
        keys = []
        for entry in entries:
            entry = entry.rstrip("/")
            if not entry.startswith(base):
                continue
            name = posixpath.basename(entry)
            if name.startswith(TMP_PREFIX) or name.endswith(SIDECAR_SUFFIX):
                continue
            keys.append(entry[len(base):])
        return sorted(keys)

    def delete(self, key: str) -> bool:
        """Delete the artifact at `key` (a file with its sidecar, or a whole directory); False if absent.

        A directory loses its manifest first, so a delete cut short leaves an incomplete artifact,
        never one that looks complete.
        """
        key = self._as_key(key)
        path = self._path(key)
        with self._errors(key, writing=True):
            if self.fs.isdir(path):
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(posixpath.join(path, MANIFEST_NAME))
                self.fs.rm(path, recursive=True)
                return True
            found = False
            for p in (path, path + SIDECAR_SUFFIX):
                if self._isfile(p):
                    self.fs.rm_file(p)
                    found = True
            return found


# ----------------------------------------------------------------------------------- local dir helpers


def _swap_dir_into_place(tmp: str, final: str, keep_existing: Callable[[], bool] | None = None) -> None:
    """Rename the finished directory `tmp` to `final`, replacing what is there.

    With `keep_existing` (a callable), an existing `final` for which it returns True is kept and
    `tmp` discarded (another process finished the same download first).
    """
    if os.path.lexists(final):
        if keep_existing is not None and keep_existing():
            shutil.rmtree(tmp, ignore_errors=True)
            return
        parent, name = os.path.split(final)
        old = os.path.join(parent, f"{TMP_PREFIX}{uuid.uuid4().hex}-old-{name[:100]}")
        os.replace(final, old)
        if os.path.isdir(old):
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.unlink(old)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(final + SIDECAR_SUFFIX)
    try:
        os.replace(tmp, final)
    except OSError:
        if keep_existing is not None and keep_existing():  # lost a race to an identical copy
            shutil.rmtree(tmp, ignore_errors=True)
            return
        raise


def _verify_local_dir(path: Path, manifest: dict[str, Any], uri: str) -> None:
    for entry in manifest["files"]:
        file = path / entry["path"]
        if not file.is_file():
            raise ArtifactError(f"artifact {uri}: {entry['path']} is listed in the manifest but missing; "
                                "rerun the step")
        if file.stat().st_size != entry["size"] or sha256_file(file) != entry["sha256"]:
            raise ArtifactError(f"artifact {uri}: {entry['path']} does not match the manifest "
                                "(size or sha256); rerun the step")


def _cached_copy_ok(target: Path, manifest: dict[str, Any]) -> bool:
    """A cached download is reusable when its manifest has the same digest and the listed file sizes."""
    try:
        cached = json.loads((target / MANIFEST_NAME).read_text())
        if cached.get("digest") != manifest["digest"]:
            return False
        return all((target / e["path"]).stat().st_size == e["size"] for e in manifest["files"])
    except (OSError, ValueError, AttributeError):
        return False
