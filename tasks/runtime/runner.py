"""StepRunner: how flows run larev steps against one artifact store: cached, optionally on a GPU work pool or
sharded over a Dask cluster, with a record of what ran and what came from the cache."""

from __future__ import annotations

import contextvars
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from larev.errors import ConfigError, LarevError
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import rebased
from tasks.runtime.results import result_storage_for

if TYPE_CHECKING:
    from tasks.runtime.sharding import ScaleOutConfig

logger = logging.getLogger("larev.steps")
T = TypeVar("T")
R = TypeVar("R")
_chain_index: contextvars.ContextVar[int] = contextvars.ContextVar("larev_chain_index", default=-1)


class StepError(LarevError):
    """A step that failed where it was sent to run (another work pool)."""


@dataclass
class StepRecord:
    step: str
    cached: bool
    seconds: float
    where: str = "local"  # 'local', or the deployment that ran the step
    chain: int = -1  # the index of the `map_chains` item it belongs to (-1: outside any chain)


@dataclass
class StepRunner:
    """Runs larev tasks against one artifact store and records which were served from cache.

    Flows call `run(task, ...)` instead of `task(...)`: it passes the runner's store and progress option to every
    task that takes them (callers give the other arguments), binds the store's result storage (so cache records
    travel with the artifacts, local or S3) and returns the task's result.

    gpu_deployment: a deployment of the `larev-step` flow on a GPU work pool ('larev-step/larev-step-gpu').
    When set, GPU stages run there (tasks/runtime/remote.py) and the local call is then served from the cache; when
    None, every step runs in this process.
    """

    store: ArtifactStore
    records: list[StepRecord] = field(default_factory=list)
    gpu_deployment: str | None = None
    scale_out: ScaleOutConfig | None = None  # score steps sharded over a Dask cluster when enabled
    refresh: bool = False  # recompute every step (and overwrite its cache record) instead of reading the cache
    progress: bool = True  # progress bars on long steps (passed to every task that has the option)
    concurrent_chains: int = 1  # independent chains (`map_chains`) at once; > 1 only pays when steps run elsewhere

    def __post_init__(self):
        if self.concurrent_chains < 1:
            raise ConfigError(f"concurrent_chains must be at least 1, got {self.concurrent_chains}")
        if self.refresh and self.gpu_deployment:
            raise ConfigError("refresh cannot be combined with a gpu_deployment: the GPU pool's worker would "
                              "still serve its steps from the cache")
        self._storage = result_storage_for(self.store)
        self._sharding = None  # tasks.runtime.sharding.ShardedScoring, opened by the first sharded score step
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

    def bind(self, task_obj, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """`task_obj`'s arguments with the runner's store first and its progress option (where the task has them
        and the caller did not give them)."""
        parameters = inspect.signature(task_obj.fn).parameters
        if "store" in parameters and "store" not in kwargs and not (args and isinstance(args[0], ArtifactStore)):
            args = (self.store, *args)
        if "progress" in parameters and "progress" not in kwargs:
            kwargs = {**kwargs, "progress": self.progress}
        return args, kwargs

    def run(self, task_obj, *args, step_label: str | None = None, **kwargs):
        """Run `task_obj(*args, **kwargs)` (store and progress bound); `step_label` names it in the summary
        (default: the task's name)."""
        args, kwargs = self.bind(task_obj, args, kwargs)
        started = time.perf_counter()
        label = step_label or task_obj.name
        remote = bool(self.gpu_deployment and getattr(task_obj, "larev_gpu", False))
        if remote:
            bound = inspect.signature(task_obj.fn).bind(*args, **kwargs)
            bound.apply_defaults()  # as Prefect keys the call: a default left out would give another cache key
            arguments = dict(bound.arguments)
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
                                       where=self.gpu_deployment if remote and cached else "local",
                                       chain=_chain_index.get()))
        return result

    def map_chains(self, chain: Callable[[T], R], items: Sequence[T], *, name: str) -> list[R]:
        """`[chain(item) for item in items]`: independent chains of steps (RORA's per-source models, RQ / LAS's
        proxies), one after another, or `concurrent_chains` at once as Prefect tasks on a ThreadPoolTaskRunner
        (each chain's own steps still run in order; on a GPU pool the threads only wait for remote runs). The step
        records come out grouped by item, in item order, however the chains interleaved."""
        if self.concurrent_chains == 1 or len(items) < 2:
            return [self._in_chain(chain, i, item) for i, item in enumerate(items)]
        from prefect import task
        from prefect.cache_policies import NO_CACHE
        from prefect.task_runners import ThreadPoolTaskRunner

        first = len(self.records)
        chain_task = task(self._in_chain, name=name, cache_policy=NO_CACHE, persist_result=False,
                          task_run_name=f"{name}-{{index}}")
        with ThreadPoolTaskRunner(max_workers=self.concurrent_chains) as runner:
            futures = [runner.submit(chain_task, parameters={"chain": chain, "index": i, "item": item})
                       for i, item in enumerate(items)]
            for future in futures:
                future.wait()
        states = [future.state for future in futures]
        grouped = sorted(self.records[first:], key=lambda r: r.chain)  # stable: each chain's own order kept
        self.records[first:] = grouped
        return [state.result() for state in states]  # raises the first failed chain's exception

    @staticmethod
    def _in_chain(chain: Callable[[T], R], index: int, item: T) -> R:
        """Run one chain. Its steps commit their cache records as each finishes (an eager transaction), not when
        the chain ends: inside the chain's Prefect task they would otherwise inherit its lazy transaction, and a
        step a GPU worker just computed would not be found in the cache by the next call."""
        from prefect.transactions import CommitMode, transaction

        token = _chain_index.set(index)
        try:
            with transaction(commit_mode=CommitMode.EAGER):
                return chain(item)
        finally:
            _chain_index.reset(token)

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
        args, kwargs = self.bind(task_obj, args, kwargs)
        from tasks.runtime.sharding import ScaleOutConfig, ShardedScoring, concat_scores, split_rationales

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
            self._shards[rationales.digest] = self.run(split_task, rationales,
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
        from tasks.runtime import remote

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
