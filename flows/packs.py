"""Evaluator packs: a finished run's trained evaluators, tokenizer, configs and run.json in one file, so a lab can
score rationales without training (`larev pack`, `larev score --pack`).

A pack is a tar file:

  pack.json            format, run name, task, backbone, created_at, and the sha256 of every other file
                       (`files`) with their combined digest (`digest`: sha256 of the canonical JSON of `files`)
  run.json             the run's run.json, its store named "store" (relative)
  store/<key>...       every artifact run.json names, laid out as an artifact store (directory artifacts keep their
                       _MANIFEST.json, files their .sha256 sidecar)

Nothing pickled: only the file types in ALLOWED_SUFFIXES are packed (weights are safetensors), and a run holding
anything else is refused. `unpack` checks every file against pack.json before anything reads it (and the file types
and run.json's store again), and refuses a pack that does not match with one line naming the first file that
differs. pack.json travels inside the pack, so its digest catches damage and a file edited on its own; against a
pack re-made whole, pin the digest `larev pack` printed (`larev score --pack-digest`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

from larev.data.logged import RationaleReading
from larev.digests import sha256_file
from larev.errors import ConfigError, InputError
from larev.run_files import RUN_FILE
from storage import ArtifactStore
from storage.ref import ArtifactRef
from storage.store import TMP_PREFIX
from tasks.data import examples_task
from tasks.export import read_run

PACK_FORMAT = "larev-pack/1"
PACK_FILE = "pack.json"
STORE_DIR = "store"
ALLOWED_SUFFIXES = (".safetensors", ".json", ".parquet", ".txt", ".md", ".png", ".jsonl", ".sha256", ".model",
                    ".csv")
DEFAULT_UNPACK_DIR = Path(".larev") / "packs"


def files_digest(files: dict[str, str]) -> str:
    """The pack's digest: sha256 of the canonical JSON of {path: sha256}."""
    return hashlib.sha256(json.dumps(files, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _stage_run(run: dict, staging: Path) -> None:
    """Copy every artifact of `run` into staging/store and write staging/run.json naming it."""
    source = ArtifactStore(run["artifact_root"])
    target = ArtifactStore(str(staging / STORE_DIR))
    artifacts = {}
    for name, ref in run["artifacts"].items():
        if ref.get("kind") in ("model", "dir"):
            target.put_dir(source.get_dir(ref["key"]), ref["key"])
        else:
            target.write_bytes(ref["key"], source.read_bytes(ref["key"]))
        artifacts[name] = {"key": ref["key"], "digest": ref["digest"], "kind": ref.get("kind", "table"),
                           "uri": ref["key"]}
    (staging / RUN_FILE).write_text(json.dumps({**run, "artifact_root": STORE_DIR, "artifacts": artifacts},
                                               indent=2) + "\n")


def make_pack(run_dir: str | Path, out: str | Path) -> dict:
    """Write the pack of the run in `run_dir` to `out` (atomically); return its pack.json."""
    run = read_run(run_dir)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="larev-pack-") as tmp:
        staging = Path(tmp) / "pack"
        staging.mkdir()
        _stage_run(run, staging)
        files = {}
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            rel = path.relative_to(staging).as_posix()
            if not rel.endswith(ALLOWED_SUFFIXES):
                raise ConfigError(f"{run_dir}: artifact file {rel} is not one a pack may hold "
                                  f"({', '.join(ALLOWED_SUFFIXES)}); packs carry safetensors weights and data, "
                                  "nothing pickled")
            files[rel] = sha256_file(path)
        params = run["params"]
        header = {"format": PACK_FORMAT, "run_name": params.get("run_name"), "task": _task(run),
                  "backbone": params.get("model", {}).get("backbone"),
                  "signatures": run.get("signatures", {}),  # what computed each metric's scores (larev/signature.py)
                  "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "files": files, "digest": files_digest(files)}
        (staging / PACK_FILE).write_text(json.dumps(header, indent=1) + "\n")
        partial = out.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}-{out.name}")
        try:
            with tarfile.open(partial, "w") as tar:
                tar.add(staging / PACK_FILE, arcname=PACK_FILE)
                for rel in files:
                    tar.add(staging / rel, arcname=rel)
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
    return header


def _task(run: dict) -> str:
    return examples_task(ArtifactStore(run["artifact_root"]), ArtifactRef(**run["artifacts"]["examples"]))


def read_header(pack: str | Path) -> dict:
    """pack.json of a pack file, checked for its format; InputError naming the file otherwise."""
    pack = Path(pack)
    if not pack.is_file():
        raise InputError("no such pack file", file=str(pack))
    try:
        with tarfile.open(pack, "r") as tar:
            member = tar.extractfile(PACK_FILE)
            header = json.loads(member.read()) if member is not None else None
    except (tarfile.TarError, KeyError, json.JSONDecodeError) as exc:
        raise InputError(f"not a larev pack ({type(exc).__name__}: {exc})", file=str(pack)) from None
    if not isinstance(header, dict) or header.get("format") != PACK_FORMAT:
        raise InputError(f"not a larev pack of format {PACK_FORMAT}", file=str(pack))
    files = header.get("files")
    if not isinstance(files, dict) or not isinstance(header.get("digest"), str) or RUN_FILE not in files:
        raise InputError("pack.json lacks its file list, its digest or run.json: the pack was altered",
                         file=str(pack))
    for rel in files:
        if not isinstance(rel, str) or rel.startswith("/") or ".." in rel.split("/") or \
                not rel.endswith(ALLOWED_SUFFIXES):
            raise InputError(f"pack.json lists {rel!r}, which a pack may not hold (an absolute or parent path, or "
                             f"a type other than {', '.join(ALLOWED_SUFFIXES)})", file=str(pack))
    return header


_UNPACKED: dict[tuple, Path] = {}  # (pack file, size, mtime, root, digest pin) -> its checked extraction


def unpack(pack: str | Path, root: str | Path | None = None, expected_digest: str | None = None) -> Path:
    """The run directory of a pack, extracted under `root` (default .larev/packs) in a folder named by its digest
    and checked file by file against pack.json; an earlier extraction of the same pack is reused after the same
    check (once per process). InputError with one line when a file is missing, extra or altered, when run.json names
    another store than the pack's, or when the digest differs from `expected_digest`."""
    path = Path(pack)
    stat = path.stat() if path.is_file() else None
    memo = (str(path.resolve()), stat and stat.st_size, stat and stat.st_mtime_ns, str(root), expected_digest)
    if stat is not None and memo in _UNPACKED and _UNPACKED[memo].is_dir():
        return _UNPACKED[memo]
    header = read_header(pack)
    files: dict[str, str] = header["files"]
    if files_digest(files) != header["digest"]:
        raise InputError("pack.json's file list does not match its digest: the pack was altered", file=str(pack))
    if expected_digest is not None and not header["digest"].startswith(expected_digest.lower()):
        raise InputError(f"the pack's digest {header['digest'][:16]} is not the expected {expected_digest[:16]}: "
                         "another or a re-made pack", file=str(pack))
    target = _extract(pack, files, header["digest"], root)
    _check_run_file(target, files, pack)
    _UNPACKED[memo] = target
    return target


def _check_run_file(folder: Path, files: dict[str, str], pack: str | Path) -> None:
    """run.json must name the pack's own store and only artifacts the pack holds."""
    run = json.loads((folder / RUN_FILE).read_text())
    if run.get("artifact_root") != STORE_DIR:
        raise InputError(f"run.json names the store {run.get('artifact_root')!r}, not the pack's own: the pack was "
                         "altered", file=str(pack))
    for name, ref in run.get("artifacts", {}).items():
        key = f"{STORE_DIR}/{ref.get('key', '')}"
        if not (key in files or any(rel.startswith(key + "/") for rel in files)):
            raise InputError(f"run.json's artifact {name!r} ({ref.get('key')}) is not in the pack: the pack was "
                             "altered", file=str(pack))


def _extract(pack: str | Path, files: dict[str, str], digest: str, root: str | Path | None) -> Path:
    """Extract into root/<digest[:16]> (atomically), or check the extraction already there."""
    target = Path(root or DEFAULT_UNPACK_DIR) / digest[:16]
    if target.is_dir():
        _check_files(target, files, pack)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    try:
        with tarfile.open(pack, "r") as tar:
            names = set(tar.getnames()) - {PACK_FILE}
            if names != set(files):
                extra, missing = sorted(names - set(files)), sorted(set(files) - names)
                raise InputError(f"the pack's files differ from pack.json (extra: {extra[:3]}, missing: "
                                 f"{missing[:3]}): the pack was altered", file=str(pack))
            tar.extractall(partial, filter="data")
        _check_files(partial, files, pack)
        os.replace(partial, target)
    except tarfile.TarError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise InputError(f"the pack cannot be extracted ({type(exc).__name__}: {exc}): the pack was altered",
                         file=str(pack)) from None
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if not target.is_dir():
            raise
        _check_files(target, files, pack)  # another process extracted it meanwhile
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target


def _check_files(folder: Path, files: dict[str, str], pack: str | Path) -> None:
    where = "the pack was altered" if folder.name.startswith(TMP_PREFIX) else \
        f"the pack or its extraction was altered (delete {folder} to extract it again)"
    for rel, digest in files.items():
        path = folder / rel
        if not path.is_file():
            raise InputError(f"{rel} is missing: {where}", file=str(pack))
        if sha256_file(path) != digest:
            raise InputError(f"{rel} does not match its sha256 in pack.json: {where}", file=str(pack))


def check_pack_fits(pack: str | Path, examples, rationales: str, column_map: dict[str, str] | None,
                    reading: RationaleReading | None = None) -> None:
    """Refuse a rationale file made for another task or data set than the pack's, in one line: none of its ids is
    among the pack's test examples. The file is read as the scoring reads it (`reading`)."""
    from larev.data.files import read_rationale_rows

    header = read_header(pack)
    frame = read_rationale_rows(rationales, column_map=column_map, reading=reading)
    if "id" not in frame.columns:
        return  # the file check names the missing column
    ids = set(frame["id"].cast(str).to_list())
    known = set(examples["id"].to_list())
    if ids and not ids & known:
        sample = ", ".join(sorted(known)[:2])
        raise InputError(f"none of the file's {len(ids)} ids is among the pack's {len(known)} test examples (task "
                         f"{header['task']}, run {header['run_name']}, ids like {sample}): the file is for another "
                         "task or data set", file=rationales)
