"""How a larev step is declared and cached: the content-keyed cache policy and the step's output folder.

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

import contextvars
import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from prefect import task
from prefect.cache_policies import CachePolicy
from pydantic import BaseModel

from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.results import RESULT_SERIALIZER


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
        identity = value.cache_identity() if hasattr(value, "cache_identity") else {}  # e.g. ModelConfig's weights
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
