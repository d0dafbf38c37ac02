"""`larev data get`: download a published release (larev/data/published.py), check it, convert it, say where it went.

Files come from the authors' URLs (`Dataset.base` + the file's published path), from a mirror (`mirror` or the
`LAREV_DATA_MIRROR` variable: a URL under which `NAME/<published path>` is served, the layout `larev data get`
keeps its downloads in), or from a folder of files already downloaded (`source_dir`, holding them under their
published paths, directly or under `NAME/`).

The lock file `OUT/sources.lock.json` records each source file's sha256 the first time it is read. A later file
that differs (the authors changed it, or a mirror serves another one) is refused with an error naming it, unless
`accept_changed` is given, which records the new digest. Everything is written under a temporary folder inside
OUT first (downloads streamed to temporary names, then renamed) and moved into place only once every file has
been fetched, checked and converted: a failure leaves OUT as it was.

OUT afterwards: `NAME/<output>.parquet` (the data contract of docs/data.md), `raw/NAME/<published path>` (the
downloaded files as published), `sources.lock.json`.
"""

from __future__ import annotations

import datetime
import hashlib
import http.client
import json
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from larev.data.published import COMMITTED_DIGESTS, Dataset, content_digest, dataset
from larev.digests import CHUNK, sha256_file
from larev.errors import ConfigError, InputError, LarevError
from larev.progress import progress_bar

log = logging.getLogger(__name__)

#: names a mirror of the published files (a URL under which NAME/<published path> is served)
MIRROR_ENV = "LAREV_DATA_MIRROR"
#: the lock file, in the output folder
LOCK_NAME = "sources.lock.json"
#: where the downloaded files are kept, in the output folder
RAW_DIR = "raw"
#: seconds without a byte before a download is given up
TIMEOUT_S = 60.0


class FetchError(LarevError):
    """A source that cannot be fetched (the message names the URL) or that differs from the locked one."""


@dataclass(frozen=True)
class Written:
    """One converted file: where it went, its rows, its content digest and, for a file the committed results were
    computed on, whether it holds the same rows (None: no committed counterpart, or another form)."""

    path: Path
    rows: int
    digest: str
    matches_committed: bool | None


@dataclass
class GetResult:
    """What `get_dataset` wrote."""

    name: str
    form: str
    out: Path
    written: list[Written] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # where each source file was read from (URL or path)
    raw_dir: Path | None = None  # where the downloaded files were kept (None with source_dir)
    lock: Path | None = None
    notes: list[str] = field(default_factory=list)


# ---- downloading ------------------------------------------------------------------------------------------------

def download(url: str, dest: Path, *, progress: bool = True, timeout: float = TIMEOUT_S) -> tuple[str, int]:
    """Stream `url` into `dest` (a temporary name beside it, renamed once complete) with a progress bar; return the
    file's sha256 and size. Any failure is a FetchError naming the URL, and leaves no file behind."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, part = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as f:
            request = urllib.request.Request(url, headers={"User-Agent": "larev-data-get"})
            with urllib.request.urlopen(request, timeout=timeout) as response:
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                with progress_bar(None, desc=dest.name, enabled=progress, unit="B", total=total, unit_scale=True,
                                  unit_divisor=1024) as bar:
                    while block := response.read(CHUNK):
                        f.write(block)
                        digest.update(block)
                        size += len(block)
                        bar.update(len(block))
        if total is not None and size != total:
            raise FetchError(f"could not download {url}: it stopped after {size} of {total} bytes; try again")
        os.replace(part, dest)
    except urllib.error.HTTPError as e:
        raise FetchError(f"could not download {url}: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        raise FetchError(f"could not reach {url} ({e.reason}); without access, fetch the files elsewhere and use "
                         "--from DIR, or a mirror (--mirror URL)") from None
    except (http.client.HTTPException, OSError) as e:  # the connection dropped, a timeout, a full disk
        raise FetchError(f"could not download {url} ({type(e).__name__}: {e}); try again") from None
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return digest.hexdigest(), size


# ---- the lock file ----------------------------------------------------------------------------------------------

def read_lock(path: Path) -> dict[str, dict]:
    """The lock file's entries, `NAME/<published path>` -> {sha256, bytes, url, recorded}; {} when there is none."""
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())["files"]
        if not isinstance(entries, dict) or not all(isinstance(e.get("sha256"), str) for e in entries.values()):
            raise TypeError("files must map names to entries with a sha256")
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
        raise InputError(f"not a larev data lock file ({type(e).__name__}: {e}); move it away to start a new one",
                         file=str(path)) from None
    return entries


def _write_atomically(path: Path, text: str) -> None:
    fd, part = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(part, path)
    finally:
        if os.path.exists(part):
            os.unlink(part)


def write_lock(path: Path, entries: Mapping[str, dict]) -> None:
    """Write the lock file (sorted, one entry per source file), replacing the old one in one step."""
    body = {"about": "sha256 of every source file `larev data get` converted into this folder; a source that "
                     "differs is refused unless --accept-changed", "files": dict(sorted(entries.items()))}
    _write_atomically(path, json.dumps(body, indent=1) + "\n")


def check_locked(key: str, sha256: str, where: str, lock: Mapping[str, dict], lock_path: Path, *,
                 accept_changed: bool) -> bool:
    """Whether the file `key` (read from `where`) is new or changed against the lock; a changed one is a
    FetchError unless `accept_changed`."""
    entry = lock.get(key)
    if entry is None:
        return True
    if entry["sha256"] == sha256:
        return False
    if not accept_changed:
        raise FetchError(f"{where}: sha256 {sha256} differs from the one {lock_path} recorded for {key} "
                         f"({entry['sha256']}, {entry.get('recorded', 'earlier')}): the published file changed, or "
                         "the mirror serves another one. Nothing was written. Check the change, then rerun with "
                         "--accept-changed to convert it and record the new digest")
    log.warning("%s changed since %s; recording the new digest (--accept-changed)", key, entry.get("recorded"))
    return True


# ---- getting a dataset -----------------------------------------------------------------------------------------

def source_base(spec: Dataset, mirror: str | None) -> str:
    """Where a release's files are fetched from: `mirror`/NAME/ when a mirror is given (or LAREV_DATA_MIRROR is
    set), else the authors' URL."""
    mirror = mirror or os.environ.get(MIRROR_ENV, "").strip() or None
    return f"{mirror.rstrip('/')}/{spec.name}/" if mirror else spec.base


def _local_source(source_dir: Path, name: str, relative: str) -> Path:
    """A published file in a folder of downloaded files: at its published path, directly or under NAME/."""
    for candidate in (source_dir / relative, source_dir / name / relative):
        if candidate.is_file():
            return candidate
    raise InputError(f"not found; --from expects the published files under their published paths: {relative} "
                     f"(or {name}/{relative})", file=str(source_dir / relative))


def get_dataset(name: str, out: str | Path, *, form: str | None = None, only: list[str] | None = None,
                source_dir: str | Path | None = None, mirror: str | None = None, accept_changed: bool = False,
                progress: bool = True) -> GetResult:
    """Fetch release `name` (larev/data/published.py: esnli, cose, human), check every file against the lock file,
    convert it to `out/NAME/<output>.parquet`, and keep the downloads under `out/raw/NAME/`.

    form: the release's form (default: the one the committed results were computed on); only: these outputs
    (e.g. ['dev']); source_dir: convert files already downloaded instead of fetching; mirror: a URL base serving
    NAME/<published path> (default LAREV_DATA_MIRROR, else the authors' URLs); accept_changed: convert a source
    whose sha256 differs from the locked one and record the new digest.
    """
    spec = dataset(name)
    form = form or spec.default_form
    outputs = spec.outputs(form, only)
    out = Path(out)
    lock_path = out / LOCK_NAME
    lock = read_lock(lock_path)
    base = source_base(spec, mirror)
    result = GetResult(spec.name, form, out, lock=lock_path)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out, prefix=".larev-data-get-"))
    except OSError as e:
        raise ConfigError(f"cannot write to {out} ({type(e).__name__}: {e}); choose another --out") from None
    try:
        files, recorded, downloaded = {}, {}, []
        needed = list(dict.fromkeys(f for o in outputs for f in o.files))
        today = datetime.date.today().isoformat()
        for relative in needed:
            key = f"{spec.name}/{relative}"
            if source_dir is not None:
                local = _local_source(Path(source_dir), spec.name, relative)
                sha256, size, where = sha256_file(local), local.stat().st_size, str(local)
            else:
                where = base + relative
                local = staging / RAW_DIR / spec.name / relative
                sha256, size = download(where, local, progress=progress)
                downloaded.append(relative)
            if check_locked(key, sha256, where, lock, lock_path, accept_changed=accept_changed):
                recorded[key] = {"sha256": sha256, "bytes": size, "url": spec.base + relative, "recorded": today}
            files[relative] = local
            result.sources.append(where)
        converted = []
        for output in outputs:
            try:
                frame, notes = output.convert({f: files[f] for f in output.files})
            except InputError as e:  # name the file as the user knows it: its URL or its path, not a temporary one
                where = dict(zip(files, result.sources)) | {str(files[f]): w for f, w in zip(files, result.sources)}
                raise InputError(e.problem, file=where.get(e.file, e.file), row=e.row, column=e.column) from None
            result.notes.extend(notes)
            target = staging / spec.name / f"{output.name}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            frame.write_parquet(target)
            digest = content_digest(frame)
            committed = COMMITTED_DIGESTS.get(f"{spec.name}/{output.name}.parquet")
            matches = None if committed is None or form != spec.default_form else digest == committed
            converted.append((target, Written(out / spec.name / target.name, frame.height, digest, matches)))
        # every file is fetched, checked and converted: move them into place, then record the sources
        for relative in downloaded:
            final = out / RAW_DIR / spec.name / relative
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / RAW_DIR / spec.name / relative, final)
        for staged, written in converted:
            written.path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, written.path)
            result.written.append(written)
        if recorded:
            write_lock(lock_path, {**lock, **recorded})
        result.raw_dir = out / RAW_DIR / spec.name if downloaded else None
        return result
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not any(out.iterdir()):
            out.rmdir()  # a folder this call made and filled with nothing
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
