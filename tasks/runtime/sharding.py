"""Scale-out scoring: a large rationale file is cut into shards, each score step is mapped over the shards on a
Dask cluster (prefect-dask), and the shard scores are stacked.

Every score task (REV / LAREV `score_metric`, `score_rora`, `score_rq_las`) scores each rationale row on its own:
a row's score depends on that row and the trained models only. So scoring the shards separately and stacking
the results gives the unsharded step's rows. What can differ is float round-off: a forward pass over a
different batch or with another number of intra-op threads can round differently in the last bits
(tests/test_sharding.py and `larev bench scale` measure the gap), and the row order: the shards are cut from the
table sorted by example id (file order kept within an id), so that the rows of one example share a shard and
its baseline term (log g[b](y), log p_theta(y | x)) is computed once rather than once per shard.

Each shard is a content-addressed artifact and each shard's score is a cached step, so a rerun, or a run that
died half-way through the shards, recomputes only the shards that have no result yet.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

import larev.metrics.scores as scores_mod
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_file, put_table, stacked_parquet

log = logging.getLogger("larev.steps")


class ScaleOutConfig(BaseModel):
    """How score steps run: one step over the whole table (shard_rows 0, the default), or mapped over shards of
    it, one after another in the flow's process (bounded memory) or on a Dask cluster."""

    model_config = ConfigDict(extra="forbid")

    shard_rows: int = Field(0, ge=0, description="rationale rows per shard; 0 scores every file in one step. A "
                                                 "rationale file is then also read and validated a shard at a "
                                                 "time, so memory is bounded by the shard, not the file")
    dask_workers: int = Field(0, ge=0, description="worker processes of a LocalCluster for the shards; 0 scores "
                                                   "them one after another in the flow's own process")
    dask_address: str | None = Field(None, description="scheduler address of an existing Dask cluster "
                                                       "(tcp://host:8786) for the shards, instead of a LocalCluster")
    threads_per_worker: int = Field(1, ge=1, description="tasks at a time per LocalCluster worker")
    torch_threads: int | None = Field(None, ge=1, description="torch threads per LocalCluster worker; empty: the "
                                                              "machine's cores split among the workers")

    @model_validator(mode="after")
    def _dask_needs_shards(self):
        if (self.dask_address or self.dask_workers) and not self.shard_rows:
            raise ValueError("scale_out: a Dask cluster (dask_address or dask_workers) is set but shard_rows is 0: "
                             "set shard_rows (e.g. 5000) to send the score steps to it, or drop the cluster")
        return self

    @property
    def enabled(self) -> bool:
        return self.shard_rows > 0

    @property
    def uses_dask(self) -> bool:
        return bool(self.dask_address or self.dask_workers)

    def where(self) -> str:
        """How the step summary names this place."""
        if self.dask_address:
            return f"dask:{self.dask_address}"
        return f"dask:local x{self.dask_workers}" if self.dask_workers else "local, sharded"

    def worker_torch_threads(self) -> int:
        return self.torch_threads or max(1, (os.cpu_count() or 1) // max(1, self.dask_workers))

    def task_runner(self):
        """A prefect-dask task runner: connected to the cluster at `dask_address`, or owning a LocalCluster whose
        workers report to this process's Prefect API."""
        from prefect_dask import DaskTaskRunner

        if self.dask_address:  # its workers bring their own settings (PREFECT_API_URL: docker/compose.yaml)
            return DaskTaskRunner(address=self.dask_address)
        env = {"HF_HUB_DISABLE_PROGRESS_BARS": "1"}  # no weight-loading bar per shard in the flow's output
        api_url = prefect_api_url()
        if api_url:
            env["PREFECT_API_URL"] = api_url
        # processes, not threads: torch holds the GIL for parts of a forward pass and each shard loads its models
        return DaskTaskRunner(cluster_kwargs={"n_workers": self.dask_workers,
                                              "threads_per_worker": self.threads_per_worker,
                                              "processes": True, "dashboard_address": None, "env": env})

    def worker_start_environment(self) -> dict[str, str]:
        """Variables a LocalCluster worker process must have from its start (Dask's `pre-spawn-environ`): torch's
        threads, read once when the worker's OpenMP runtime starts (torch.set_num_threads would reach only the
        thread that calls it, not the one running the tasks). Dask's default also sets MALLOC_TRIM_THRESHOLD_,
        which turns off glibc's adaptive allocator thresholds and slows a score step: it is left out."""
        threads = str(self.worker_torch_threads())
        return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}


def prefect_api_url() -> str | None:
    """The Prefect API this process reports to, for worker processes to report to the same one: the configured
    URL, or the temporary server Prefect started for this process. Without it each LocalCluster worker would
    boot a temporary server of its own (about 20 s each) and its task runs would not show in this run."""
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return PREFECT_API_URL.value()
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the per-process singleton of Prefect's ephemeral mode
    return server.api_url if server.running else None


@contextmanager
def worker_start_environment(env: dict[str, str]) -> Iterator[None]:
    """Dask's `distributed.nanny.pre-spawn-environ` set to `env` while workers start. The nanny writes those
    variables into this process's own os.environ before it spawns a worker; they are put back afterwards so
    that this process and its later children keep their own settings."""
    import dask

    saved = dict(os.environ)
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def shard_bounds(n_rows: int, shard_rows: int) -> list[tuple[int, int]]:
    """Consecutive [start, stop) row ranges of at most `shard_rows` rows covering 0..n_rows (one empty range for
    an empty table, so an empty file still yields one, empty, score table)."""
    if shard_rows < 1:
        raise ValueError(f"shard_rows must be at least 1, got {shard_rows}")
    if n_rows <= 0:
        return [(0, 0)]
    return [(start, min(start + shard_rows, n_rows)) for start in range(0, n_rows, shard_rows)]


@larev_task("shards")
def split_rationales(store: ArtifactStore, rationales: ArtifactRef, shard_rows: int) -> list[ArtifactRef]:
    """The rationale table, sorted by example id (file order kept within an id), cut into consecutive shards of
    at most `shard_rows` rows."""
    table = store.read_parquet(rationales.key).sort("id", maintain_order=True)
    return [put_table(store, f"shard-{i:05d}.parquet", table.slice(start, stop - start))
            for i, (start, stop) in enumerate(shard_bounds(table.height, shard_rows))]


@larev_task("merge-scores")
def concat_scores(store: ArtifactStore, parts: list[ArtifactRef]) -> ArtifactRef:
    """The shards' score tables stacked in shard order, streamed: the rows one unsharded score step would write."""
    with stacked_parquet(store, parts, scores_mod.SCORE_SCHEMA) as stacked:
        return put_file(store, "scores.parquet", stacked)


@dataclass
class ShardedScoring:
    """Runs a score step's shard calls where `config` says; a Dask task runner is opened on first use and kept for
    every score step of the flow run."""

    config: ScaleOutConfig

    def __post_init__(self):
        self._stack = ExitStack()
        self._runner = None

    def map(self, task_obj, calls: list[dict], label: str) -> list:
        """Final states of `task_obj(**arguments)` for each shard's arguments, task runs named `label[i]`."""
        named = [task_obj.with_options(task_run_name=f"{label}[{i}]") for i in range(len(calls))]
        if not self.config.uses_dask:  # one shard after another, here: memory bounded by a shard
            return [t(**arguments, return_state=True) for t, arguments in zip(named, calls)]
        futures = [self.runner.submit(t, arguments) for t, arguments in zip(named, calls)]
        for future in futures:
            future.wait()
        return [future.state for future in futures]

    @property
    def runner(self):
        if self._runner is None:
            from tasks.runtime.dask_worker import ProjectImports

            runner = self._stack.enter_context(self.config.task_runner())
            with worker_start_environment(self.config.worker_start_environment()):
                client = runner.client  # starts the LocalCluster's workers (or connects to the given cluster)
            client.register_plugin(ProjectImports())  # before any task reaches a worker
            self._runner = runner
            log.info("score steps run sharded (%d rows per shard) on %s", self.config.shard_rows,
                     self.config.where())
        return self._runner

    def close(self) -> None:
        self._stack.close()
        self._runner = None
