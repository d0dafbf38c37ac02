"""`larev bench quality`: the whole protocol on one train/test pair, over one or more seeds; results.json,
results.md, results.csv and separations.png in `out` (several seeds: each seed's in out/seed-<k>/ and their
combination in out/).

Each seed is a `benchmark-seed` flow run (flows/benchmark.py), the per-seed flow `larev bench validity` runs too:
here one after another, or all at once on a work pool (`seed_deployment`). QA runs also score the restating gold
rationales of the test split with their answer masked (a stored table: the natural-leakage table of results.json).
After the seeds: FTC and AddText on seed 0's gold rationales (`stress`), the results of named row ranges of the test
split (`report_rows`), and with one seed, agreement with human judgement files (`human`). With `from_run`, only the
outputs are rebuilt from a finished run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from flows.pipeline import PipelineParams
from storage.ref import ArtifactRef

#: a row range of the test split: START:STOP, either end may be empty
ROWS_PATTERN = r"^-?\d*:-?\d*$"


class QualityParams(BaseModel):
    """What `larev bench quality` runs (the UI's form of a `quality-benchmark` flow run)."""

    model_config = ConfigDict(extra="forbid")

    pipeline: PipelineParams = Field(default_factory=PipelineParams, description="the pipeline run of seed 0 (each "
                                                                                  "seed moves every seed field)")
    out: str = Field(..., description="directory for results.json, results.md, results.csv, separations.png")
    seeds: int = Field(1, ge=1, description="seeds to run (offsets first_seed, first_seed + 1, ...)")
    first_seed: int = Field(0, ge=0, description="the first seed offset (extend an earlier study)")
    bootstrap: int = Field(1000, ge=0, description="bootstrap resamples over test rows for the intervals (0: none)")
    stress: bool = Field(True, description="FTC and AddText on seed 0's gold rationales")
    report_rows: dict[str, str] = Field(default_factory=dict,
                                        description="NAME -> START:STOP: those test rows' results alone in out/NAME")
    human: list[str] = Field(default_factory=list, description="annotation files: one seed's run against human "
                                                               "judgements, into out (larev bench human)")
    from_run: str | None = Field(None, description="rebuild the outputs from this finished run directory instead")
    seed_deployment: str | None = Field(
        None, description="a deployment of the benchmark-seed flow on a work pool: every seed runs there at once; "
                          "empty: one after another, here (the workers must see the same artifact root)")


def _rows(text: str) -> slice:
    from larev.data.sources import parse_slice

    return parse_slice(text)


def run_leakage(run_dir: Path) -> dict:
    """results.json's "leakage" entry of a finished run directory: every metric's bench summary
    (flows/metrics.py `bench_summaries`), its diagnostic tables read from the run's artifact store; {} without a
    run.json."""
    from flows.metrics import bench_summaries
    from storage import ArtifactStore
    from tasks.export import RUN_FILE, read_run

    if not (run_dir / RUN_FILE).exists():
        return {}
    run = read_run(run_dir)
    return bench_summaries(run["artifacts"], ArtifactStore(run["artifact_root"]))


def answer_masked(pipeline: PipelineParams, out: Path) -> ArtifactRef | None:
    """QA runs: the stored table of the test split's restating gold rationales, answer masked (the pipeline's own
    examples step, then `answer-masked`), with a copy to read in OUT/answer_masked_rationales.parquet; None for
    other runs."""
    from flows.pipeline import source_digests
    from storage import ArtifactStore
    from tasks.bench import answer_masked_rationales
    from tasks.data import load_examples
    from tasks.runtime.runner import StepRunner

    if pipeline.data.source == "demo" and pipeline.data.demo.task != "qa":
        return None
    store = ArtifactStore(pipeline.artifact_root)
    with StepRunner(store, progress=pipeline.progress) as steps:
        examples = steps.run(load_examples, pipeline.data, source_digests(pipeline.data))
        masked = steps.run(answer_masked_rationales, examples)
    if masked is not None:
        out.mkdir(parents=True, exist_ok=True)
        copy = out / "answer_masked_rationales.parquet"
        store.read_parquet(masked.key).write_parquet(copy)
        print(f"natural leakage: the restating gold rationales of the test split, answer masked, scored too "
              f"({copy})", flush=True)
    return masked


def stress_dir(params: QualityParams, run_dir: Path) -> Path | None:
    """FTC and AddText on the run's gold rationales (unless `stress` is off); their directory. The stress flow skips
    FTC, with a warning, on runs it does not apply to (QA, or no theta)."""
    if not params.stress:
        return None
    from flows.stress import StressParams, stress_test

    print("stress tests on the gold rationales: FTC (NLI runs) and AddText ...", flush=True)
    result = stress_test(StressParams(run=str(run_dir), name="stress", sources=["gold"],
                                      progress=params.pipeline.progress))
    return Path(result["run_dir"])


def outputs(params: QualityParams, run_dir: Path, out: Path, *, title: str, seconds: float | None,
            stress: Path | None, seed: int | None = None) -> None:
    """A run's results in `out` (and each of `report_rows` in OUT/NAME, or OUT/NAME/seed-<k> for a seed)."""
    from flows.metrics import bench_lines
    from larev.bench.quality import write_quality_outputs

    leakage = run_leakage(run_dir)
    write_quality_outputs(run_dir, out if seed is None else out / f"seed-{seed}", title=f"larev bench quality: {title}",
                          seconds=seconds, n_boot=params.bootstrap, stress_dir=stress, leakage=leakage,
                          lines_of=bench_lines)
    for name, rows in params.report_rows.items():
        part = _rows(rows)
        dest = out / name if seed is None else out / name / f"seed-{seed}"
        write_quality_outputs(run_dir, dest, title=f"larev bench quality: {title}, {name} rows "
                              f"({part.start or ''}:{part.stop or ''} of the test split)", seconds=seconds,
                              n_boot=params.bootstrap, rows=part, leakage=leakage, lines_of=bench_lines)


@flow(name="quality-benchmark", flow_run_name="bench-quality-{params.pipeline.run_name}", log_prints=True)
def quality_benchmark(params: QualityParams) -> dict:
    """Every metric on one train/test pair over the seeds: results with bootstrap intervals, the stress tests and
    the natural-leakage table; returns {"out", "runs": [{"seed", "run_dir", "seconds", "steps"}], "n_seeds",
    "human"}."""
    from flows.benchmark import SeedParams, SeedRun, run_seeds
    from flows.inputs import flow_input_check, pipeline_inputs
    from flows.metrics import bench_lines
    from larev.bench.quality import reseeded, write_seed_summary

    out = Path(params.out)
    name = params.pipeline.run_name
    if params.from_run:
        run_dir = Path(params.from_run)
        previous = out / "results.json"
        seconds = json.loads(previous.read_text()).get("seconds") if previous.exists() else None
        outputs(params, run_dir, out, title=run_dir.name, seconds=seconds, stress=stress_dir(params, run_dir))
        return {"out": str(out), "runs": [{"seed": None, "run_dir": str(run_dir), "seconds": seconds, "steps": []}],
                "n_seeds": 1, "human": None, "single": True}
    if (failed := flow_input_check(pipeline_inputs, params.pipeline)) is not None:
        return failed
    single = params.seeds == 1 and params.first_seed == 0  # outputs in OUT itself, the run under its own name
    seeds = list(range(params.first_seed, params.first_seed + params.seeds))
    masked = answer_masked(params.pipeline, out)
    seed_params = []
    for seed in seeds:
        pipeline = reseeded(params.pipeline, seed)
        if not single:
            pipeline = pipeline.model_copy(update={"run_name": f"{name}-seed{seed}"})
        seed_params.append(SeedParams(benchmark=f"bench-quality-{name}", seed=seed,
                                      runs=[SeedRun(pipeline=pipeline)], rationales=masked,
                                      device=params.pipeline.train.device, progress=params.pipeline.progress))
    results, remote = run_seeds(seed_params, params.seed_deployment)
    runs = []
    for seed in seeds:
        run = results[seed]["runs"][""]
        run_dir = Path(run["run_dir"])
        seconds = remote.get(seed, run["seconds"]["pipeline"])
        stress = stress_dir(params, run_dir) if single or seed == 0 else None
        outputs(params, run_dir, out, title=run_dir.name, seconds=seconds, stress=stress,
                seed=None if single else seed)
        runs.append({"seed": seed, "run_dir": str(run_dir), "seconds": seconds, "steps": run["steps"]})
    human = None
    if single and params.human:
        from flows.human import HumanParams, human_agreement

        started = time.perf_counter()
        agreement = human_agreement(HumanParams(run=runs[0]["run_dir"], annotations=params.human, out=str(out),
                                                bootstrap=params.bootstrap, device=params.pipeline.train.device,
                                                progress=params.pipeline.progress))
        human = {"results": agreement["results"], "seconds": time.perf_counter() - started}
    n_seeds = len(seeds)
    if not single:  # over every seed in OUT, those of earlier runs (--first-seed) included
        for part in params.report_rows:
            write_seed_summary(out / part, title=f"larev bench quality: {name}, {part} rows", lines_of=bench_lines)
        n_seeds = len(write_seed_summary(out, title=f"larev bench quality: {name}", lines_of=bench_lines)["seeds"])
    return {"out": str(out), "runs": runs, "n_seeds": n_seeds, "human": human, "single": single}
