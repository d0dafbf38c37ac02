"""One seed of a benchmark, and how a benchmark runs its seeds.

`benchmark_seed` is the per-seed flow of both benchmarks (`larev bench quality`, flows/quality.py; `larev bench
validity`, flows/validity.py). A seed is one or more pipeline runs (the benchmark's own; on the validity tune split
also each decision candidate's), each trained and scored by the pipeline's own steps (flows/pipeline.py's
`run_pipeline`), with a rationale table from the store scored beside the built-in variants (the perturbations and
generated rationales, QA's answer-masked copies) and annotation tables from the store scored with each run's
evaluators (the human files' halves). Every table the benchmark builds and every output is an artifact of the store:
a seed is cached and resumable like a pipeline run, and its steps show in the UI under its own flow run. The data
files themselves are read by path, as a pipeline run reads them: a worker needs them at the same path.

`run_seeds` runs a benchmark's seeds. By default one after another, each a subflow of the benchmark's flow run.
With a `seed_deployment` (a deployment of `benchmark_seed` on a work pool, deployments/prefect.yaml) every seed is
a flow run of that deployment, all started at once, so N workers finish N seeds in about the time of one. The
workers write each step's output and cache record into the shared artifact store (S3, or one disk); once they are
done, the benchmark runs each seed here too, where every step is a cache hit: what it reads is exactly what the
workers computed, and the seeds' run directories are written where the benchmark runs. Steps every seed shares (the
examples, the baselines) may be written by several workers at once: a step's output is a function of its key, and
each write is atomic, so the last one written is the same as the first. A seed no worker has started after
`START_TIMEOUT_SECONDS` fails the benchmark, naming the pool it waits on.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from larev.config import Device
from flows.pipeline import PipelineParams, run_pipeline
from storage import ArtifactStore
from storage.ref import ArtifactRef

#: seconds between two looks at the state of the seeds' flow runs on a work pool
POLL_SECONDS = 5.0
#: seconds a seed's flow run may wait for a worker before the benchmark stops waiting
START_TIMEOUT_SECONDS = 3600.0


class SeedRun(BaseModel):
    """One pipeline run of a seed."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field("", description="'' for the benchmark's own run; a decision candidate's name")
    pipeline: PipelineParams = Field(..., description="the run's parameters, seeds already moved to the seed")


class SeedParams(BaseModel):
    """What one seed of a benchmark runs (the UI's form of a `benchmark-seed` flow run)."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                           description="the benchmark this seed belongs to (names the flow run)")
    seed: int = Field(..., ge=0, description="the seed offset the runs' parameters were moved by")
    runs: list[SeedRun] = Field(..., min_length=1, description="the seed's pipeline runs, the benchmark's own first")
    rationales: ArtifactRef | None = Field(None, description="a stored rationale table every run scores beside "
                                                             "its variants")
    human: list[ArtifactRef] = Field(default_factory=list, description="stored annotation tables scored with each "
                                                                       "run's evaluators (named by their stem)")
    device: Device = Field("auto", description="auto (CUDA when present), cpu or cuda")
    progress: bool = Field(True, description="progress bars on long steps")


def human_name(table: ArtifactRef) -> str:
    """An annotation table's name: its stored file's stem (`snli_acceptability-tune`)."""
    return table.key.rsplit("/", 1)[-1].removesuffix(".parquet")


@flow(name="benchmark-seed", flow_run_name="{params.benchmark}-seed{params.seed}", log_prints=True)
def benchmark_seed(params: SeedParams) -> dict:
    """Train and score each of the seed's pipeline runs, then score the annotation tables with its evaluators.
    Returns {"seed", "runs": {label: {"run_dir", "scores", "rationales", "human": {name: [score tables]},
    "signatures", "seconds", "steps"}}} (tables as artifact refs)."""
    from flows.human import score_annotations
    from flows.score import finished_run
    from tasks.export import read_run
    from tasks.runtime.runner import StepRunner

    out: dict[str, dict] = {}
    for run in params.runs:
        started = time.perf_counter()
        result = run_pipeline(run.pipeline, params.rationales)
        seconds = {"pipeline": time.perf_counter() - started}
        records = [asdict(r) for r in result["steps"]]
        human: dict[str, list[ArtifactRef]] = {}
        if params.human:
            started = time.perf_counter()
            record = read_run(result["run_dir"])
            refs = {k: ArtifactRef(**v) for k, v in record["artifacts"].items()}
            with StepRunner(ArtifactStore(record["artifact_root"]), progress=params.progress) as steps:
                base = finished_run(steps, record, refs, device=params.device)
                for table in params.human:
                    human[human_name(table)] = score_annotations(steps, base, refs, table, human_name(table))
            seconds["human"] = time.perf_counter() - started
            records += [asdict(r) for r in steps.records]
        out[run.label] = {"run_dir": result["run_dir"], "scores": result["refs"]["scores"],
                          "rationales": result["refs"]["rationales"], "human": human,
                          "signatures": result["signatures"], "seconds": seconds, "steps": records}
    return {"seed": params.seed, "runs": out}


def run_seeds(seeds: list[SeedParams], seed_deployment: str | None = None) -> tuple[dict[int, dict], dict]:
    """Every seed's `benchmark_seed` result by seed, and {seed: wall seconds on the work pool} (empty when the
    seeds ran here). With `seed_deployment`, the seeds first run as flow runs of it, all at once (module
    docstring); a seed whose flow run does not complete fails the benchmark, naming it."""
    remote = remote_seeds(seeds, seed_deployment) if seed_deployment else {}
    results = {}
    for n, params in enumerate(seeds, 1):
        print(f"seed {params.seed} ({n} of {len(seeds)})" + (": reading the work pool's results" if remote else ""),
              flush=True)
        results[params.seed] = benchmark_seed(params)
    return results, remote


def remote_seeds(seeds: list[SeedParams], deployment: str) -> dict[int, float]:
    """Start a flow run of `deployment` per seed, wait until all have finished; {seed: wall seconds}."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    from tasks.runtime.runner import StepError

    started = {}
    for params in seeds:
        run = run_deployment(name=deployment, parameters={"params": params.model_dump(mode="json")}, timeout=0,
                             as_subflow=True)
        started[params.seed] = run.id
        print(f"seed {params.seed}: flow run {run.name} of {deployment}", flush=True)
    finished: dict[int, object] = {}
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    with get_client(sync_client=True) as client:
        while len(finished) < len(started):
            time.sleep(POLL_SECONDS)
            waiting = []
            for seed, run_id in started.items():
                if seed in finished:
                    continue
                run = client.read_flow_run(run_id)
                if run.state and run.state.is_final():
                    finished[seed] = run
                    print(f"seed {seed}: {run.state.name} on the work pool", flush=True)
                elif run.state is None or run.state.is_scheduled() or run.state.is_pending():
                    waiting.append(seed)
            if waiting and time.monotonic() > deadline:
                raise StepError(f"seed(s) {waiting} not started by any worker of {deployment}'s work pool within "
                                f"{START_TIMEOUT_SECONDS:.0f} s: start one (prefect worker start --pool POOL)")
    failed = {seed: run for seed, run in finished.items() if not run.state.is_completed()}
    if failed:
        raise StepError("seed flow run(s) on the work pool did not complete: " + "; ".join(
            f"seed {seed} ({run.name}): {run.state.name}: {run.state.message}" for seed, run in failed.items()))
    return {seed: (run.end_time - run.start_time).total_seconds() for seed, run in finished.items()
            if run.start_time and run.end_time}
