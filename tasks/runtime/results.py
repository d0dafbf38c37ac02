"""Where Prefect keeps larev's cache records, and why a planted record cannot run code.

Records live inside the artifact store (`<root>/_prefect/results`), so they travel with the artifacts. They are
JSON written by larev's serializer and decoded by `safe_object_decoder`, which knows only the classes larev tasks
return and imports nothing; the result storage blocks check every record's serializer before Prefect reads it,
and carry no credentials.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from prefect.filesystems import LocalFileSystem, RemoteFileSystem
from prefect.serializers import JSONSerializer
from pydantic import BaseModel

from larev.errors import LarevError
from storage import ArtifactStore
from storage.ref import ArtifactRef
from storage.s3 import s3_filesystem_options

logger = logging.getLogger("larev.steps")


#: The classes larev tasks return (inside dicts, lists and None): the only ones a cache record may name.
RESULT_CLASSES: dict[str, type[BaseModel]] = {"storage.ref.ArtifactRef": ArtifactRef}


class UntrustedResultError(LarevError):
    """A cache record names a class larev tasks never return: it was not written by larev."""


def _record_being_read() -> str:
    """Which cache record the running task is reading (best effort: its step and path), for error messages."""
    try:
        from prefect.context import TaskRunContext

        ctx = TaskRunContext.get()
        if ctx is None:
            return "a cache record"
        where = "a cache record"
        policy = getattr(ctx.task, "cache_policy", None)
        storage = getattr(ctx.result_store, "result_storage", None)
        base = getattr(storage, "basepath", None)
        if getattr(policy, "step", None) and base:  # a larev step's policy (tasks/runtime/cache.py ArtifactCachePolicy)
            where = f"cache record {str(base).rstrip('/')}/{policy.compute_key(None, ctx.parameters or {}, {})}"
        return f"{where} of step {ctx.task.name!r}"
    except Exception:  # noqa: BLE001 - only for the message
        return "a cache record"


def safe_object_decoder(obj: dict[str, Any]) -> Any:
    """`object_hook` of larev's result serializer: decodes only the classes in RESULT_CLASSES, imports nothing.

    Prefect's default decoder imports whatever dotted path a record's `__class__` names, so a record planted
    under `<root>/_prefect/results` could make a run import any module. A record naming another class raises
    UntrustedResultError (Prefect's cache lookup then counts the record as missing: the step reruns and
    overwrites it). An `__exc_type__` (a failed run's exception) is rebuilt only from a module already imported,
    else as a RuntimeError carrying the name.
    """
    if "__class__" in obj:
        name = obj["__class__"]
        cls = RESULT_CLASSES.get(name) if isinstance(name, str) else None
        if cls is None:
            where = _record_being_read()
            logger.warning("ignoring %s: it names the class %r, which larev tasks never return; the step reruns",
                           where, name)
            raise UntrustedResultError(
                f"{where} names the class {name!r}; larev cache records only hold {sorted(RESULT_CLASSES)}, so it was "
                "not written by larev: it is ignored (the step reruns and overwrites it). Check who can write to the "
                "artifact root")
        return cls.model_validate(obj.get("data"))
    if "__exc_type__" in obj:
        import sys

        module, _, attr = str(obj["__exc_type__"]).rpartition(".")
        exc_cls = getattr(sys.modules.get(module), attr, None) if module else None
        message = str(obj.get("message", ""))
        if isinstance(exc_cls, type) and issubclass(exc_cls, Exception):
            try:
                return exc_cls(message)
            except Exception:  # noqa: BLE001 - an exception type with another signature
                pass
        return RuntimeError(f"{obj['__exc_type__']}: {message}")
    return obj


#: How larev tasks persist results: JSON, decoded by `safe_object_decoder` (the record names its serializer, so
#: records written with this one are read back with it).
RESULT_SERIALIZER = JSONSerializer(object_decoder="tasks.runtime.results.safe_object_decoder")


def check_result_record(data: bytes, path: str) -> bytes:
    """`data` when it is a cache record written with larev's result serializer (JSON decoded by
    `safe_object_decoder`); UntrustedResultError otherwise.

    Prefect deserialises a record with the serializer the record itself names, whatever the task's own: a record
    planted under `<root>/_prefect/results` naming the pickle serializer would run code on the next cache lookup.
    The result storage below checks the raw bytes (json.loads only) before Prefect sees them; Prefect counts a
    record it cannot read as missing, so the step reruns and overwrites it.
    """
    expected = RESULT_SERIALIZER.model_dump(mode="json")
    try:
        named = json.loads(data)["metadata"]["serializer"]
        trusted = all(named.get(k) == expected[k] for k in ("type", "object_decoder"))
    except (ValueError, KeyError, TypeError, AttributeError):
        trusted = False
    if not trusted:
        logger.warning("ignoring the cache record %s: it was not written with larev's result serializer; the step "
                       "reruns", path)
        raise UntrustedResultError(f"cache record {path} was not written with larev's result serializer (JSON "
                                   "decoded by tasks.runtime.results.safe_object_decoder): it is ignored and the "
                                   "step reruns. Check who can write to the artifact root")
    return data


class _CheckedRecords:
    """Mixin for a Prefect file-system block: every record read goes through `check_result_record`."""

    async def aread_path(self, path: str) -> bytes:
        return check_result_record(await super().aread_path(path), path)

    def read_path(self, path: str, _sync: bool = True) -> bytes:  # Prefect's sync callers pass _sync=True
        return check_result_record(super().read_path(path, _sync=True), path)


class CheckedLocalResults(_CheckedRecords, LocalFileSystem):
    """Local result storage that reads only larev's own cache records."""

    _block_type_name = "larev checked local results"


class CheckedRemoteResults(_CheckedRecords, RemoteFileSystem):
    """Remote (S3) result storage that reads only larev's own cache records."""

    _block_type_name = "larev checked remote results"


def result_storage_for(store: ArtifactStore):
    """Prefect result storage (where cache records live) inside the artifact store: `<root>/_prefect/results`,
    reading only records larev's serializer wrote (`check_result_record`).

    The block is saved (Prefect requires it) under a name derived from the root; it carries no credentials (s3fs
    reads those from the environment), only non-secret options such as the endpoint.
    """
    base = store.uri("_prefect/results")
    if base.startswith("s3://"):
        # the store's own S3 options (endpoint, retries, no shared client instance), credentials left out
        settings = _without_secrets(s3_filesystem_options(store.storage_options))
        block = CheckedRemoteResults(basepath=base, settings=settings)
    else:
        Path(base).mkdir(parents=True, exist_ok=True)
        block = CheckedLocalResults(basepath=base)
    return saved_block(block, "larev-results-" + hashlib.sha256(base.encode()).hexdigest()[:12])


def saved_block(block, name: str):
    """`block` as saved on the Prefect server under `name` (a result record names its storage by the saved block's
    id, so a flow run's results can be read back from the server). A document already saved with the same data is
    only read: every pipeline run asks for its storage, and a write each time would queue behind the server's other
    writes (on SQLite a locked database answers a write with a retry seconds later)."""
    try:
        saved = type(block).load(name, _sync=True)  # sync even where an event loop runs (Prefect's dispatch)
    except (ValueError, RuntimeError):  # no such document (or block type) yet; or one an earlier form of the
        saved = None  # block's class saved, which no longer validates
    if saved is not None and _block_data(saved) == _block_data(block):
        return saved
    block.save(name, overwrite=True, _sync=True)
    return block


def _block_data(block) -> dict[str, Any]:
    """A block's own fields as saved: not the document's id and name (unset on a block not yet saved), nor a key
    an earlier form of the class left in the document."""
    return block.model_dump(mode="json", include=set(type(block).model_fields))


SECRET_OPTIONS = frozenset({"key", "secret", "token", "aws_access_key_id", "aws_secret_access_key",
                            "aws_session_token"})


def _without_secrets(options: dict[str, Any]) -> dict[str, Any]:
    """Storage options minus credentials, at any depth (client_kwargs may carry aws_secret_access_key too)."""
    return {k: _without_secrets(v) if isinstance(v, dict) else v for k, v in options.items()
            if k not in SECRET_OPTIONS}
