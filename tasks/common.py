"""What every larev task shares: the content-keyed cache policy, output locations, and the step runner.

Cache key of a step = sha256 over
  - the step name and its code version (a hash of the source of the task and the core modules it calls),
  - each input artifact's content digest (ArtifactRef.digest), each config's values, each plain argument.
The same key names the step's output folder `<root>/<step>/<key>/...`, so outputs are content-addressed by
what produced them, and a second run with the same inputs is served from Prefect's cache (persisted as JSON in
`<root>/_prefect/results`). Changing one option changes the key of that step and of every step downstream of
it, and nothing else.

Where the store lives is not part of the key: the cache records travel with the store (they are inside it), so a
store that is moved, copied or synced to another bucket serves its steps from cache under its new root. Refs
read back from a cache record are rebased onto the store that read them (`rebased`): a step reads its inputs by
key, never by the absolute URI an earlier run recorded.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import io
import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import CachePolicy
from prefect.filesystems import LocalFileSystem, RemoteFileSystem
from prefect.serializers import JSONSerializer
from pydantic import BaseModel

from larev.errors import ConfigError, LarevError
from storage import ArtifactStore
from storage.ref import ArtifactRef
from storage.s3 import s3_filesystem_options

if TYPE_CHECKING:
    from tasks.sharding import ScaleOutConfig

logger = logging.getLogger("larev.steps")

# Arguments that never change a step's output.
NOT_IN_KEY = frozenset({"progress"})


def code_version(*objects: Callable | ModuleType) -> str:
    """A hash of the source code of the given functions and modules (the step's 'code version')."""
    h = hashlib.sha256()
    for obj in objects:
        try:
            h.update(inspect.getsource(obj).encode())
        except (OSError, TypeError):
            h.update(repr(obj).encode())
    return h.hexdigest()[:16]


def canonical(value: Any) -> Any:
    """A JSON-able stand-in for an argument, as it enters a cache key."""
    if isinstance(value, ArtifactRef):
        return {"ref": value.digest}
    if isinstance(value, ArtifactStore):
        return {"store": "artifact-store"}  # its location is not part of the key (module docstring)
    if isinstance(value, BaseModel):
        return {type(value).__name__: canonical(value.model_dump(mode="json"))}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot put a {type(value).__name__} into a cache key; pass an ArtifactRef, a config or a "
                    f"plain value")


def rebased(value: Any, store: ArtifactStore) -> Any:
    """`value` (a task result: refs inside dicts, lists and tuples) with every ArtifactRef's URI pointing into
    `store`: a cache record written when the store lived elsewhere names the old location."""
    if isinstance(value, ArtifactRef):
        uri = store.uri(value.key)
        return value if uri == value.uri else value.model_copy(update={"uri": uri})
    if isinstance(value, dict):
        return {k: rebased(v, store) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(rebased(v, store) for v in value)
    return value


def step_fingerprint(step: str, version: str, arguments: dict[str, Any]) -> str:
    payload = {"step": step, "code": version,
               "args": {k: canonical(v) for k, v in sorted(arguments.items()) if k not in NOT_IN_KEY}}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass
class ArtifactCachePolicy(CachePolicy):
    """Prefect cache policy: key on input artifacts' content + configs + code version (not the run)."""

    step: str = ""
    version: str = ""

    def compute_key(self, task_ctx, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs) -> str:
        return step_fingerprint(self.step, self.version, inputs)


@dataclass(frozen=True)
class StepContext:
    step: str
    fingerprint: str

    def key(self, name: str) -> str:
        return f"{self.step}/{self.fingerprint}/{name}"


_CURRENT: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar("larev_step", default=None)


def current_step() -> StepContext:
    ctx = _CURRENT.get()
    if ctx is None:
        raise RuntimeError("output helpers are only available inside a larev task")
    return ctx


class StepFunction:
    """What a larev task runs: the step function, called with the step's context (`current_step`) set.

    Pickled by reference (module and name of the task), so a Dask worker imports the task's code instead of
    receiving a copy of it (a closure over this module's context variable would not pickle at all).
    """

    def __init__(self, fn: Callable, step: str, version: str) -> None:
        functools.update_wrapper(self, fn)  # name, docs, __wrapped__: Prefect reads the signature through it
        self.step, self.version = step, version
        self._signature = inspect.signature(fn)

    def __call__(self, *args, **kwargs):
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        token = _CURRENT.set(StepContext(self.step, step_fingerprint(self.step, self.version, dict(bound.arguments))))
        try:
            return self.__wrapped__(*args, **kwargs)
        finally:
            _CURRENT.reset(token)

    def __reduce__(self):
        return _task_function, (self.__wrapped__.__module__, self.__wrapped__.__name__)


def _task_function(module: str, name: str) -> StepFunction:
    """The StepFunction of the larev task `module.name` (unpickling a StepFunction)."""
    import importlib

    return getattr(importlib.import_module(module), name).fn


def larev_task(step: str, *, code: Sequence[Callable | ModuleType] = (), gpu: bool = False, **task_options):
    """Declare a cached larev step: a Prefect task keyed by `ArtifactCachePolicy`, results persisted as JSON.

    `code`: the core modules whose source counts as this step's code version (the task's own source always does).
    `gpu`: a GPU stage (training, attribution, generation): sent to the GPU work pool when the flow has one.
    """

    def decorate(fn):
        version = code_version(fn, *code)
        run = StepFunction(fn, step, version)
        options = {"name": step, "persist_result": True, "result_serializer": RESULT_SERIALIZER,
                   "task_run_name": f"{step}", **task_options}
        task_obj = task(run, cache_policy=ArtifactCachePolicy(step=step, version=version), **options)
        task_obj.larev_step, task_obj.larev_gpu = step, gpu
        return task_obj

    return decorate


# ------------------------------------------------------------------------------------------ cache records

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
        if isinstance(policy, ArtifactCachePolicy) and base:
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
RESULT_SERIALIZER = JSONSerializer(object_decoder="tasks.common.safe_object_decoder")


# ----------------------------------------------------------------------------------------------- outputs


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


# ----------------------------------------------------------------------------------------------- running


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
                                   "decoded by tasks.common.safe_object_decoder): it is ignored and the step reruns. "
                                   "Check who can write to the artifact root")
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
    block.save("larev-results-" + hashlib.sha256(base.encode()).hexdigest()[:12], overwrite=True)  # Prefect needs
    return block  # a saved block for task result storage


SECRET_OPTIONS = frozenset({"key", "secret", "token", "aws_access_key_id", "aws_secret_access_key",
                            "aws_session_token"})


def _without_secrets(options: dict[str, Any]) -> dict[str, Any]:
    """Storage options minus credentials, at any depth (client_kwargs may carry aws_secret_access_key too)."""
    return {k: _without_secrets(v) if isinstance(v, dict) else v for k, v in options.items()
            if k not in SECRET_OPTIONS}


class StepError(LarevError):
    """A step that failed where it was sent to run (another work pool)."""


@dataclass
class StepRecord:
    step: str
    cached: bool
    seconds: float
    where: str = "local"  # 'local', or the deployment that ran the step


@dataclass
class StepRunner:
    """Runs larev tasks against one artifact store and records which were served from cache.

    Flows call `run(task, ...)` instead of `task(...)`: it binds the store's result storage (so cache records
    travel with the artifacts, local or S3) and returns the task's result.

    gpu_deployment: a deployment of the `larev-step` flow on a GPU work pool ('larev-step/larev-step-gpu').
    When set, GPU stages run there (tasks/remote.py) and the local call is then served from the cache; when
    None, every step runs in this process.
    """

    store: ArtifactStore
    records: list[StepRecord] = field(default_factory=list)
    gpu_deployment: str | None = None
    scale_out: ScaleOutConfig | None = None  # score steps sharded over a Dask cluster when enabled
    refresh: bool = False  # recompute every step (and overwrite its cache record) instead of reading the cache

    def __post_init__(self):
        if self.refresh and self.gpu_deployment:
            raise ConfigError("refresh cannot be combined with a gpu_deployment: the GPU pool's worker would "
                              "still serve its steps from the cache")
        self._storage = result_storage_for(self.store)
        self._sharding = None  # tasks.sharding.ShardedScoring, opened by the first sharded score step
        self._shards: dict[str, list[ArtifactRef]] = {}  # rationale table digest -> its shards

    def __enter__(self) -> "StepRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Shut down what the runner started (the Dask cluster of sharded scoring)."""
        if self._sharding is not None:
            self._sharding.close()
            self._sharding = None

    def run(self, task_obj, *args, step_label: str | None = None, **kwargs):
        """Run `task_obj(*args, **kwargs)`; `step_label` names it in the summary (default: the task's name)."""
        started = time.perf_counter()
        label = step_label or task_obj.name
        remote = bool(self.gpu_deployment and getattr(task_obj, "larev_gpu", False))
        if remote:
            arguments = dict(inspect.signature(task_obj.fn).bind(*args, **kwargs).arguments)
            remote = not self._has_cache_record(task_obj, arguments)  # a cached step is not sent anywhere
        if remote:
            self._run_on_gpu_pool(task_obj, label, arguments)
        result, cached = self._call(task_obj, *args, **kwargs)
        if remote and not cached:
            logger.warning("%s ran on the GPU pool, but its cache record is not visible here, so it ran again "
                           "in-process: do the worker and this flow share the artifact root %s?", label,
                           self.store.root)
        # a step the GPU pool computed counts as run (there), not as served from cache
        self.records.append(StepRecord(label, cached and not remote, time.perf_counter() - started,
                                       where=self.gpu_deployment if remote and cached else "local"))
        return result

    def _bound(self, task_obj):
        """The task as this runner runs it: cache records in the store, recomputed when refreshing."""
        refresh = {"refresh_cache": True} if self.refresh else {}
        return task_obj.with_options(result_storage=self._storage, **refresh)

    def _call(self, task_obj, *args, **kwargs) -> tuple[Any, bool]:
        """Run the task in this process against the store's result storage: (result, served from cache)."""
        state = self._bound(task_obj)(*args, return_state=True, **kwargs)
        # result() raises the task's exception when it failed
        return rebased(state.result(), self.store), state.name == "Cached"

    def score(self, task_obj, *args, rationales: ArtifactRef | list[ArtifactRef], step_label: str | None = None,
              **kwargs):
        """Run a score step over a rationale table: as one step (`run`), or mapped over shards of it (when
        `rationales` is already a list of shards, or `scale_out` is enabled), in this process or on a Dask
        cluster, the shard scores then stacked into one table."""
        if not isinstance(rationales, list) and not (self.scale_out and self.scale_out.enabled):
            return self.run(task_obj, *args, rationales=rationales, step_label=step_label, **kwargs)
        from tasks.sharding import ScaleOutConfig, ShardedScoring, concat_scores, split_rationales

        started = time.perf_counter()
        label = step_label or task_obj.name
        shards = rationales if isinstance(rationales, list) else self._split(rationales, split_rationales)
        if self._sharding is None:
            self._sharding = ShardedScoring(self.scale_out or ScaleOutConfig())
        signature = inspect.signature(task_obj.fn)
        calls = []
        for shard in shards:
            arguments = dict(signature.bind(*args, rationales=shard, **kwargs).arguments)
            if "progress" in arguments:  # one bar per shard helps nobody
                arguments["progress"] = False
            calls.append(arguments)
        states = self._sharding.map(self._bound(task_obj), calls, label)
        failed = [(i, s) for i, s in enumerate(states) if not s.is_completed()]
        if failed:
            i, state = failed[0]
            raise StepError(f"{label}: {len(failed)} of {len(shards)} shard(s) failed on "
                            f"{self._sharding.config.where()}; shard {i}: {state.name}: {state.message or ''}".rstrip(": "))
        merged, merge_cached = self._call(concat_scores, self.store,
                                          [rebased(state.result(), self.store) for state in states])
        cached = merge_cached and all(state.name == "Cached" for state in states)
        self.records.append(StepRecord(label, cached, time.perf_counter() - started,
                                       where=self._sharding.config.where()))
        return merged

    def _split(self, rationales: ArtifactRef, split_task) -> list[ArtifactRef]:
        """The shards of a rationale table (split once per table and flow run)."""
        if rationales.digest not in self._shards:
            self._shards[rationales.digest] = self.run(split_task, self.store, rationales,
                                                       self.scale_out.shard_rows, step_label="shards")
        return self._shards[rationales.digest]

    def _has_cache_record(self, task_obj, arguments: dict[str, Any]) -> bool:
        from prefect.results import ResultStore, resolve_result_storage

        try:
            key = task_obj.cache_policy.compute_key(None, arguments, {})
            return ResultStore(result_storage=resolve_result_storage(self._storage)).exists(key)
        except Exception as exc:  # cannot tell: send the step (the worker's own cache check still applies)
            logger.debug("cache lookup for %s failed: %s", task_obj.name, exc)
            return False

    def _run_on_gpu_pool(self, task_obj, label: str, arguments: dict[str, Any]) -> None:
        from tasks import remote

        parameters = {"params": {"task": remote.task_ref(task_obj), "label": label,
                                 "arguments": remote.encode_arguments(task_obj, arguments)}}
        logger.info("%s: sent to deployment %s", label, self.gpu_deployment)
        flow_run = remote.run_deployment(self.gpu_deployment, parameters)
        state = flow_run.state
        if state is None or not state.is_completed():
            status = "no state" if state is None else f"{state.name}: {state.message or ''}".strip()
            raise StepError(f"{label} failed on deployment {self.gpu_deployment} (flow run {flow_run.id}, "
                            f"{status}); see that flow run's logs")

    def summary(self) -> str:
        lines = [f"{'step':<24} {'status':<8} {'seconds':>8}  where"]
        lines += [f"{r.step:<24} {'cached' if r.cached else 'ran':<8} {r.seconds:>8.1f}  {r.where}"
                  for r in self.records]
        return "\n".join(lines)
