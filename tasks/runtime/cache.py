"""How a larev step is declared and cached: the content-keyed cache policy and the step's output folder.

Cache key of a step = sha256 over
  - the step name and its code version: a digest of the source of the step's module and of every project module it
    imports, transitively (tasks/runtime/source_graph.py), and of larev's version,
  - each input artifact's content digest (ArtifactRef.digest), each config's values, each plain argument.
The same key names the step's output folder `<root>/<step>/<key>/...`, so outputs are content-addressed by
what produced them, and a second run with the same inputs is served from Prefect's cache (persisted as JSON in
`<root>/_prefect/results`). Changing one option changes the key of that step and of every step downstream of
it, and nothing else.

Where the store lives is not part of the key: the cache records travel with the store (they are inside it), so a
store that is moved, copied or synced to another bucket serves its steps from cache under its new root. Refs
read back from a cache record are rebased onto the store that read them (`rebased`): a step reads its inputs by
key, never by the absolute URI an earlier run recorded.

Beside each cache record a step writes its step record (`<root>/_prefect/steps/<key>.json`: the step, its task,
the code version with the digest of every module in it, and its arguments as they entered the key), which lets
`larev cache verify` tell which entries today's code can still reach (tasks/runtime/cache_audit.py).
"""

from __future__ import annotations

import contextvars
import datetime
import functools
import hashlib
import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prefect import task
from prefect.cache_policies import CachePolicy
from pydantic import BaseModel

from larev.config import ModelConfig
from larev.models.pretrained import cache_identity
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.results import RESULT_SERIALIZER
from tasks.runtime.source_graph import StepCode, step_code

logger = logging.getLogger("larev.steps")

# Arguments that never change a step's output.
NOT_IN_KEY = frozenset({"progress"})
#: Where a step's record lives beside its cache record (`<STEP_RECORDS>/<key>.json`).
STEP_RECORDS = "_prefect/steps"


def code_of(fn: Callable) -> StepCode:
    """The code a step function runs: its module's source and every project module that module imports,
    transitively."""
    return step_code(fn.__module__)


def canonical(value: Any) -> Any:
    """A JSON-able stand-in for an argument, as it enters a cache key."""
    if isinstance(value, ArtifactRef):
        return {"ref": value.digest}
    if isinstance(value, ArtifactStore):
        return {"store": "artifact-store"}  # its location is not part of the key (module docstring)
    if isinstance(value, BaseModel):
        identity = cache_identity(value) if isinstance(value, ModelConfig) else {}  # a backbone's weights' record
        return {type(value).__name__: canonical(value.model_dump(mode="json")), **canonical(identity)}
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


def key_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as they enter a cache key: canonical, without those that never change the output."""
    return {k: canonical(v) for k, v in sorted(arguments.items()) if k not in NOT_IN_KEY}


def step_fingerprint(step: str, version: str, arguments: dict[str, Any]) -> str:
    """The cache key of `step` at code `version` on `arguments` (canonical ones give the same key: a step
    record's arguments re-key the entry under another code version)."""
    payload = {"step": step, "code": version, "args": key_arguments(arguments)}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass
class ArtifactCachePolicy(CachePolicy):
    """Prefect cache policy: key on input artifacts' content + configs + code version (not the run).

    The code version is looked up when a key is computed (the source is read once per process), not when the
    step is declared, so importing the tasks reads no source."""

    step: str = ""
    module: str = ""

    @property
    def version(self) -> str:
        return step_code(self.module).version

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
    """What a larev task runs: the step function, called with the step's context (`current_step`) set; when it
    returns, its step record is written beside the cache record Prefect writes next (`write_step_record`).

    Pickled by reference (module and name of the task), so a Dask worker imports the task's code instead of
    receiving a copy of it (a closure over this module's context variable would not pickle at all).
    """

    def __init__(self, fn: Callable, step: str) -> None:
        functools.update_wrapper(self, fn)  # name, docs, __wrapped__: Prefect reads the signature through it
        self.step = step
        self._signature = inspect.signature(fn)

    @property
    def code(self) -> StepCode:
        return code_of(self.__wrapped__)

    def __call__(self, *args, **kwargs):
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        code = self.code
        fingerprint = step_fingerprint(self.step, code.version, arguments)
        token = _CURRENT.set(StepContext(self.step, fingerprint))
        try:
            result = self.__wrapped__(*args, **kwargs)
        finally:
            _CURRENT.reset(token)
        store = next((v for v in arguments.values() if isinstance(v, ArtifactStore)), None)
        if store is not None:
            write_step_record(store, self.step, f"{self.__wrapped__.__module__}:{self.__wrapped__.__name__}",
                              fingerprint, code, arguments, result)
        return result

    def __reduce__(self):
        return _task_function, (self.__wrapped__.__module__, self.__wrapped__.__name__)


def _task_function(module: str, name: str) -> StepFunction:
    """The StepFunction of the larev task `module.name` (unpickling a StepFunction)."""
    import importlib

    return getattr(importlib.import_module(module), name).fn


def output_digests(result: Any) -> list[str]:
    """The content digests of the artifacts in a step's result (refs inside dicts, lists and tuples)."""
    if isinstance(result, ArtifactRef):
        return [result.digest]
    if isinstance(result, dict):
        result = list(result.values())
    if isinstance(result, (list, tuple)):
        return sorted({d for item in result for d in output_digests(item)})
    return []


def write_step_record(store: ArtifactStore, step: str, task_name: str, fingerprint: str, code: StepCode,
                      arguments: dict[str, Any], result: Any = None) -> None:
    """`<root>/_prefect/steps/<key>.json`: what made the cache entry `key` (step, task, code version with each
    module's digest, the arguments as they entered the key) and the digests of what it wrote, for `larev cache
    verify`. A record that cannot be written costs only that check (the entry then counts as unverifiable), not the
    step."""
    from tasks.runtime.source_graph import larev_version

    record = {"step": step, "key": fingerprint, "task": task_name, "code": code.version,
              "larev_version": larev_version(), "modules": code.modules, "args": key_arguments(arguments),
              "outputs": output_digests(result),
              "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        store.write_json(f"{STEP_RECORDS}/{fingerprint}.json", record)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        logger.warning("%s: could not write its step record (larev cache verify will not know this entry): %s",
                       step, exc)


def larev_task(step: str, *, gpu: bool = False, **task_options):
    """Declare a cached larev step: a Prefect task keyed by `ArtifactCachePolicy`, results persisted as JSON.

    The step's code version is found from its module's imports (tasks/runtime/source_graph.py): nothing to list by hand.
    `gpu`: a GPU stage (training, attribution, generation): sent to the GPU work pool when the flow has one.
    """

    def decorate(fn):
        run = StepFunction(fn, step)
        options = {"name": step, "persist_result": True, "result_serializer": RESULT_SERIALIZER,
                   "task_run_name": f"{step}", **task_options}
        task_obj = task(run, cache_policy=ArtifactCachePolicy(step=step, module=fn.__module__), **options)
        task_obj.larev_step, task_obj.larev_gpu = step, gpu
        return task_obj

    return decorate
