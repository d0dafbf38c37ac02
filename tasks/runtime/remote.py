"""Sending one larev step to another work pool (the GPU pool) and running it there.

A step's arguments cross as JSON: artifact refs and configs by value, the artifact store by its root. Storage
credentials never travel as parameters: the worker reads its own (environment or Prefect blocks). The worker
runs the step in the `larev-step` flow (flows/step.py) against the same artifact store, so its output and its
cache record land where the calling flow looks for them: the caller then runs the same step locally, which is
a cache hit that returns the worker's result. Both sides must see the same artifact root (S3, or one shared
disk) and run the same larev code (the step's code version is part of its cache key).

Only tasks declared with `larev_task` in a module of the `tasks` package can be named (a new metric's module
included, with nothing to list): the worker imports nothing outside that package by a name given in a parameter.
"""

from __future__ import annotations

import importlib
import re
import typing
from typing import Any

from pydantic import TypeAdapter

from larev.errors import ConfigError
from storage import ArtifactStore

#: the modules whose larev tasks may be run remotely: the steps' modules and the runtime's
TASK_MODULE = re.compile(r"tasks(\.runtime)?\.[a-z_][a-z0-9_]*")


def task_ref(task_obj) -> str:
    """The name a worker resolves a task by: '<module>:<function>'."""
    fn = task_obj.fn.__wrapped__
    return f"{fn.__module__}:{fn.__name__}"


def resolve_task(ref: str):
    """The larev task named `ref` ('tasks.training:train_model'); ConfigError for anything else."""
    module_name, _, name = ref.partition(":")
    if not TASK_MODULE.fullmatch(module_name) or not name.isidentifier():
        raise ConfigError(f"unknown larev step {ref!r}: expected '<module>:<task>' with a module of the tasks "
                          f"package (tasks.<name> or tasks.runtime.<name>)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        raise ConfigError(f"unknown larev step {ref!r}: no module {module_name}") from None
    task_obj = getattr(module, name, None)
    if task_obj is None or not getattr(task_obj, "larev_step", None):
        raise ConfigError(f"{ref!r} is not a larev task")
    return task_obj


def _hints(task_obj) -> dict[str, Any]:
    return typing.get_type_hints(task_obj.fn.__wrapped__)


def encode_arguments(task_obj, arguments: dict[str, Any]) -> dict[str, Any]:
    """JSON-able arguments of a call to `task_obj` (by name)."""
    hints = _hints(task_obj)
    out = {}
    for name, value in arguments.items():
        if isinstance(value, ArtifactStore):
            out[name] = value.root
        else:
            out[name] = TypeAdapter(hints.get(name, Any)).dump_python(value, mode="json")
    return out


def decode_arguments(task_obj, payload: dict[str, Any]) -> dict[str, Any]:
    """The inverse of `encode_arguments`: each value validated against the task's type hints."""
    hints = _hints(task_obj)
    unknown = set(payload) - set(hints)
    if unknown:
        raise ConfigError(f"step {task_ref(task_obj)} has no argument(s) {sorted(unknown)}")
    out = {}
    for name, value in payload.items():
        if hints[name] is ArtifactStore:
            out[name] = ArtifactStore(value)
        else:
            out[name] = TypeAdapter(hints[name]).validate_python(value)
    return out


def run_deployment(name: str, parameters: dict[str, Any]):
    """Start the deployment and wait for its flow run to finish (a subflow of the calling flow in the UI)."""
    from prefect.deployments import run_deployment as prefect_run_deployment

    return prefect_run_deployment(name=name, parameters=parameters, timeout=None, as_subflow=True)
