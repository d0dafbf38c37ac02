"""`larev bench validity`: one set of scorers on three kinds of evidence no scorer is tuned on, as the protocol
file (protocols/validity.yaml) fixes them: human judgements (each file's half of the split), perturbations of the
gold rationale, and the built-in variants.

Before the first seed, the benchmark's own steps store what every seed reads: the perturbations of the split's
gold rationales, the task's generators' rationales (`larev generate`, trained once on the train rows with their own
seeds) and the halves of the human files. Each seed is a `benchmark-seed` flow run (flows/benchmark.py): a
pipeline run trains every scorer on the protocol's train rows and scores the split's test rows with the stored
rationale table, then scores each human half with the same evaluators (on the tune split, each decision candidate
in a run of its own too). Seeds run here one after another, or all at once on a work pool (`seed_deployment`).
The scores go to OUT/seed-<k>/; larev/validity/evidence.py turns them into results.json, results.md and
results.png. A reading of the report split writes a ledger line as it begins and another as it ends or fails
(larev/validity/ledger.py). Every step is cached: a rerun reads what it already computed.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import polars as pl
from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from larev.config import Device
from larev.digests import file_digest
from larev.errors import ConfigError
from larev.data.sources import parse_slice
from larev.validity.protocol import Protocol, check_inputs, load_protocol, protocol_digest, read_beside
from storage import ArtifactStore
from storage.ref import ArtifactRef

DEFAULT_PROTOCOL = "protocols/validity.yaml"
DEFAULT_LEDGER = "protocols/ledger.jsonl"


class ValidityParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    protocol: str = Field(DEFAULT_PROTOCOL, description="the protocol file: data, splits, seeds, scorers, criteria")
    task: Literal["nli", "qa"] = Field("nli", description="which of the protocol's tasks")
    split: Literal["tune", "report"] = Field("tune", description="tune: choices are made on it; report: read "
                                                                 "once per decision, recorded in the ledger")
    out: str = Field(..., description="directory for results.json, results.md, results.png and one folder per seed")
    seeds: list[int] | None = Field(None, description="a subset of the protocol's seeds (results say which ran); "
                                                      "default: all of them")
    metrics: list[str] | None = Field(None, description="a subset of the protocol's metrics; default: all")
    human: list[str] = Field(default_factory=list, description="more annotation files of the task's layout")
    test_limit: int | None = Field(None, ge=5, description="at most this many of the split's rows (a quick look; "
                                                           "results are marked partial)")
    overrides: dict[str, Any] = Field(default_factory=dict, description="pipeline settings by dotted path "
                                                                        "(marked in results; not the protocol's)")
    artifact_root: str = Field(".larev/store", description="artifact store: a local path or s3://bucket/prefix")
    run_dir: str = Field("runs", description="each seed's pipeline run goes to RUN_DIR/validity-...")
    ledger: str = Field(DEFAULT_LEDGER, description="the report split's ledger (one JSON line per run)")
    beside: str | None = Field(None, description="report split: the tune run's results.json, set beside this run's "
                                                  "in results.md")
    device: Device = Field("auto", description="auto (CUDA when present), cpu or cuda")
    progress: bool = Field(True, description="progress bars on long steps")
    candidates: list[str] | None = Field(
        None, description="the decision candidates to run (tune split), a subset of the protocol's: the others were "
                          "screened out on fewer seeds (results.json says which); default: every one")
    seed_deployment: str | None = Field(
        None, description="a deployment of the benchmark-seed flow on a work pool (e.g. 'benchmark-seed/"
                          "benchmark-seed'): every seed runs there at once; empty: one after another, here. The "
                          "workers must see the same artifact root (S3 or a shared disk)")


def pipeline_params(protocol: Protocol, params: ValidityParams, seed: int, test_rows: str,
                    candidate: str | None = None):
    """The pipeline parameters of one seed: the protocol's data, backbone and task settings, its scorers switched on
    (metrics, LAREV's controls and ablations), the caller's overrides, every seed moved by `seed`. With `candidate`
    (a decision candidate's or an arm's run, METRIC@LABEL): that metric alone, with its settings after every
    other."""
    from flows.metrics import with_metrics
    from flows.pipeline import PipelineParams
    from flows.settings import assigned
    from larev.bench.quality import reseeded

    task = protocol.tasks[params.task]
    metric, candidate_settings = own_runs(protocol, params.task)[candidate] if candidate else (None, {})
    metrics = [metric] if metric else params.metrics or protocol.scorers.metrics
    suffix = f"-{candidate.replace('@', '-at-')}" if candidate else ""
    tree = PipelineParams(
        run_name=f"validity-{params.task}-{params.split}-seed{seed}{suffix}", artifact_root=params.artifact_root,
        run_dir=params.run_dir, progress=params.progress,
        data={"source": "files", "task": params.task, "train": task.data, "test": task.data,
              "train_rows": task.train_rows, "test_rows": test_rows},
        model={"backbone": protocol.backbone}, train={"device": params.device}).model_dump(mode="json")
    tree = with_metrics(PipelineParams.model_validate(tree), metrics).model_dump(mode="json")
    if tree["larev"]["enabled"] and not candidate:
        tree["larev"]["controls"] = list(protocol.scorers.controls)
        tree["larev"]["ablations"] = list(protocol.scorers.ablations)
    # the protocol's, the caller's, then the candidate's (an unknown path is named)
    assigned(PipelineParams, tree, {**task.settings, **params.overrides, **candidate_settings}, "validity setting")
    return reseeded(PipelineParams.model_validate(tree), seed)


def own_runs(protocol: Protocol, task: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The scorers the protocol scores in runs of their own (METRIC@LABEL -> (metric, settings)): the decision
    candidates (tune split) and the arms (every split)."""
    return {**protocol.candidate_runs(task), **protocol.arm_runs(task)}


def check_decisions(protocol: Protocol, params: ValidityParams, rows: str) -> None:
    """Before the first step: every decision candidate's settings name pipeline settings (a candidate run's are
    applied as they will be, values checked too), so a typo fails now, not after hours of training."""
    from flows.pipeline import PipelineParams
    from flows.settings import field_at

    for metric, candidates in protocol.tasks[params.task].decisions.items():
        for name, settings in candidates.items():
            for path in settings:
                field_at(PipelineParams, path, origin=f"{params.protocol}: tasks.{params.task}.decisions.{metric}."
                                                      f"{name}: {path}")
    for name in own_runs(protocol, params.task):
        pipeline_params(protocol, params, 0, rows, name)


def _as_candidate(scores, metric: str, candidate: str):
    """A candidate run's scores of its metric (a frame, or a dict of frames), named as the candidate."""
    if isinstance(scores, dict):
        return {name: _as_candidate(frame, metric, candidate) for name, frame in scores.items()}
    return scores.filter(pl.col("metric") == metric).with_columns(metric=pl.lit(candidate))


def decided_runs(protocol: Protocol, task: str, beside: dict | None) -> dict[str, str]:
    """The report split's decided defaults: {metric: the candidate its tune decision chose}, for each metric whose
    tune run (`beside`) chose a candidate scored in a run of its own (METRIC@LABEL). The report split reads such a
    metric with that candidate's settings, in a run of its own under the metric's own name."""
    runs = protocol.candidate_runs(task)
    return {metric: decision["chosen"] for metric, decision in ((beside or {}).get("decisions") or {}).items()
            if decision.get("chosen") in runs}


def seed_runs(protocol: Protocol, params: ValidityParams, seed: int, rows: str, candidates: list[str],
              decided: dict[str, str] | None = None) -> list:
    """The seed's pipeline runs: the protocol's, then each of `candidates` (decision candidates and arms,
    METRIC@LABEL, each its own run), then each decided metric's run (`decided_runs`, labelled by the metric)."""
    from flows.benchmark import SeedRun

    runs = [SeedRun(label=candidate or "", pipeline=pipeline_params(protocol, params, seed, rows, candidate))
            for candidate in [None, *candidates]]
    return runs + [SeedRun(label=metric, pipeline=pipeline_params(protocol, params, seed, rows, chosen))
                   for metric, chosen in (decided or {}).items()]


def seed_scores(protocol: Protocol, params: ValidityParams, store: ArtifactStore, result: dict) -> dict:
    """One seed's `benchmark_seed` result as the evidence reads it: {"test", "human": {file: scores},
    "signatures"} (scores: metric, id, source, score); a candidate run's are its metric's, under the candidate's
    name; a decided metric's run (labelled by the metric) replaces the protocol's run's rows of that metric."""
    columns = ("metric", "id", "source", "score")
    tests, humans, signatures = [], {}, {}
    decided = [label for label in result["runs"] if label in protocol.scorers.metrics]
    for label, run in result["runs"].items():
        test = store.read_parquet(ArtifactRef.model_validate(run["scores"]).key)
        human = {name.removesuffix(f"-{params.split}"): pl.concat(
                     [store.read_parquet(ArtifactRef.model_validate(t).key) for t in tables], how="diagonal_relaxed")
                 for name, tables in run["human"].items()}
        run_signatures = run["signatures"]
        if not label and decided:  # the protocol's run: a decided metric's rows come from its own run
            test = test.filter(~pl.col("metric").is_in(decided))
            human = {name: frame.filter(~pl.col("metric").is_in(decided)) for name, frame in human.items()}
            run_signatures = {k: v for k, v in run_signatures.items() if k not in decided}
        elif label in decided:  # a decided metric's run: its own scores under its own name
            test, human = _as_candidate(test, label, label), _as_candidate(human, label, label)
            run_signatures = {label: run_signatures[label]} if label in run_signatures else {}
        elif label:  # a candidate's run: its metric's scores, under the candidate's name
            metric = own_runs(protocol, params.task)[label][0]
            test, human = _as_candidate(test, metric, label), _as_candidate(human, metric, label)
            run_signatures = {label: run_signatures[metric]} if metric in run_signatures else {}
        tests.append(test.select(*columns))
        for name, frame in human.items():
            humans.setdefault(name, []).append(frame.select(*columns))
        signatures.update(run_signatures)
    return {"test": pl.concat(tests), "human": {name: pl.concat(frames) for name, frames in humans.items()},
            "signatures": signatures}


def split_rows(protocol: Protocol, params: ValidityParams) -> str:
    """The split's row slice, cut to `test_limit` rows when given."""
    rows = protocol.tasks[params.task].splits[params.split]
    if params.test_limit is None:
        return rows
    part = parse_slice(rows)
    start = part.start or 0
    stop = start + params.test_limit if part.stop is None else min(part.stop, start + params.test_limit)
    return f"{start}:{stop}"


def generated_rationales(protocol: Protocol, params: ValidityParams, rows: str, out: Path) -> tuple[ArtifactRef, list]:
    """The task's generators' rationales for the split's rows (id, source, rationale, label; source = the
    generator's name), by `larev generate` on the protocol's data: its stored table (a copy in OUT/generated.parquet)
    and the generate flow's step records. The generators are embedded T5s whatever the scorers' backbone."""
    from flows.generate import GenerateParams, generate_rationales

    task = protocol.tasks[params.task]
    result = generate_rationales(GenerateParams(
        data={"source": "files", "task": params.task, "train": task.data, "test": task.data,
              "train_rows": task.train_rows, "test_rows": rows},
        artifact_root=params.artifact_root, generators=task.generator_configs(),
        out=str(out / "generated.parquet"), device=params.device, progress=params.progress))
    if not isinstance(result, dict) or "refs" not in result:
        raise RuntimeError(f"generating the protocol's rationales failed: {result}")
    return result["refs"]["rationales"], result["steps"]


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def is_partial(protocol: Protocol, params: ValidityParams) -> bool:
    """Whether a run is not the protocol's whole: a subset of its seeds or metrics, fewer rows, settings overridden
    or more human files (then it is not a result of the protocol)."""
    return bool((params.seeds and sorted(params.seeds) != sorted(protocol.seeds))
                or (params.metrics and sorted(params.metrics) != sorted(protocol.scorers.metrics))
                or params.test_limit or params.overrides or params.human)


@flow(name="validity-benchmark", flow_run_name="validity-{params.task}-{params.split}", log_prints=True)
def validity_benchmark(params: ValidityParams) -> dict:
    """Train the protocol's scorers once per seed and judge them on human judgements, perturbations and variants;
    on the tune split, score each decision candidate and decide the protocol's defaults. A reading of the report
    split is recorded in the ledger as it begins, and again when it ends or fails (larev/validity/ledger.py)."""
    from flows.inputs import flow_input_check, validity_inputs
    from larev.validity.ledger import begin_reading, end_reading, read_ledger, readings

    if (failed := flow_input_check(validity_inputs, params)) is not None:
        return failed
    protocol, digest = load_protocol(params.protocol), protocol_digest(params.protocol)  # read once, at the start
    commit = _commit()  # the code that runs, as it is when the run starts
    check_decisions(protocol, params, split_rows(protocol, params))  # a typo fails here, before any reading
    if params.split != "report":
        return run_validity(params, protocol, digest, commit)
    beside = read_beside(params.beside, digest, params.task, params.split) if params.beside else None
    report_decisions(protocol, params, beside)  # a refused combination fails here, before a reading begins
    earlier = readings(read_ledger(params.ledger), protocol=digest, task=params.task)
    print(f"the report split, read {len(earlier.readings)} time(s) before under this protocol (ledger "
          f"{params.ledger}; {earlier.count('unfinished')} began and never ended, {earlier.count('failed')} failed)"
          + "".join(f"\n  {line}" for line in earlier.lines()), flush=True)
    began = begin_reading(params.ledger, protocol=digest, protocol_name=protocol.name, task=params.task,
                          split=params.split, seeds=params.seeds or protocol.seeds, backbone=protocol.backbone,
                          partial=is_partial(protocol, params), commit=commit, out=params.out)
    try:
        result = run_validity(params, protocol, digest, commit, beside=beside, earlier=earlier)
    except BaseException as error:
        end_reading(params.ledger, began, error=error)
        raise
    end_reading(params.ledger, began)
    return result


def report_decisions(protocol: Protocol, params: ValidityParams, beside: dict | None) -> dict[str, str]:
    """{metric: candidate} the report split reads in runs of their own, as the tune run `beside` decided ({} on
    the tune split); ConfigError when larev is decided but the protocol also scores LAREV's controls and
    ablations, which would keep the undecided settings."""
    if params.split != "report":
        return {}
    metrics = params.metrics or protocol.scorers.metrics
    decided = {m: c for m, c in decided_runs(protocol, params.task, beside).items() if m in metrics}
    if "larev" in decided and (protocol.scorers.controls or protocol.scorers.ablations):
        raise ConfigError(f"the tune run chose {decided['larev']} for larev, but the protocol also scores LAREV's "
                          "controls and ablations, which would keep the undecided settings: a protocol that decides "
                          "larev in runs of their own leaves them out")
    return decided


def run_validity(params: ValidityParams, protocol: Protocol, digest: str, commit: str | None,
                 beside: dict | None = None, earlier=None) -> dict:
    """The benchmark's steps (`validity_benchmark`): inputs, every seed, the evidence and its outputs; `beside`:
    the report split's tune run (its results.json, as `read_beside` checked it); `earlier`: the report split's
    earlier readings (larev/validity/ledger.py `Readings`), shown in the results."""
    from flows.benchmark import SeedParams, human_name, run_seeds
    from tasks.bench import human_half_table, perturbed_rationales, read_stored_annotations, stacked_rationales
    from tasks.runtime.runner import StepRunner

    task = protocol.tasks[params.task]
    files = check_inputs(protocol, params.protocol, params.task, params.human, params.seeds, params.metrics)
    out = Path(params.out)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    rows = split_rows(protocol, params)
    started = time.perf_counter()
    store = ArtifactStore(params.artifact_root)
    with StepRunner(store, progress=params.progress) as steps:
        # one set of perturbations for every training seed (their draws: seed 0 and each instance's id)
        perturbed = steps.run(perturbed_rationales, task.data, file_digest(task.data), rows, params.task, 0)
        tables, generating_steps = [perturbed["rationales"]], []
        if task.generators:
            generating = time.perf_counter()
            generated, generating_steps = generated_rationales(protocol, params, rows, out)
            tables.append(generated)
            seconds["generators"] = time.perf_counter() - generating
        # what every seed's runs score beside the split's own variants
        rationales = steps.run(stacked_rationales, tables)
        halves = [steps.run(human_half_table, path, file_digest(path), params.split,
                            step_label=f"human-half-{Path(path).stem}") for path in files]
    for name, ref in (("perturbations", perturbed["rationales"]), ("rationales", rationales)):  # to read
        store.read_parquet(ref.key).write_parquet(out / f"{name}.parquet")
    annotations = {human_name(half).removesuffix(f"-{params.split}"): read_stored_annotations(store, half)
                   for half in halves}
    seconds["inputs"] = time.perf_counter() - started - seconds.get("generators", 0.0)
    seeds = params.seeds or protocol.seeds
    metrics = params.metrics or protocol.scorers.metrics  # a candidate of a metric the run leaves out is not run
    runnable = [name for name, (metric, _) in protocol.candidate_runs(params.task).items() if metric in metrics] \
        if params.split == "tune" else []
    candidates = [name for name in runnable if params.candidates is None or name in params.candidates]
    screened_out = sorted(set(runnable) - set(candidates))
    candidates += [name for name, (metric, _) in protocol.arm_runs(params.task).items() if metric in metrics]
    decided = report_decisions(protocol, params, beside)
    if decided:
        print("the report split reads with the tune split's decisions: "
              + ", ".join(f"{m} as {c}" for m, c in decided.items()), flush=True)
    benchmark = f"validity-{params.task}-{params.split}"
    seed_results, remote = run_seeds([SeedParams(benchmark=benchmark, seed=seed,
                                                 runs=seed_runs(protocol, params, seed, rows, candidates,
                                                                decided),
                                                 rationales=rationales, human=halves, device=params.device,
                                                 progress=params.progress) for seed in seeds],
                                     params.seed_deployment)
    per_seed: dict[int, dict] = {}
    runs_of = {seed: seed_results[seed]["runs"] for seed in seeds}
    for seed in seeds:
        runs = runs_of[seed]
        for label, run in runs.items():
            name = f"seed-{seed}" + (f"-{label}" if label else "")
            for part, value in run["seconds"].items():
                seconds[f"{name}-{part}"] = value
        if seed in remote:
            seconds[f"seed-{seed}-work-pool"] = remote[seed]
        per_seed[seed] = seed_scores(protocol, params, store, seed_results[seed])
        seed_dir = out / f"seed-{seed}"
        seed_dir.mkdir(exist_ok=True)
        per_seed[seed]["test"].write_parquet(seed_dir / "scores.parquet")
        for name, frame in per_seed[seed]["human"].items():
            frame.write_parquet(seed_dir / f"human-{name}.parquet")
    # the rationales the first seed's run scored (their length is a baseline scorer)
    first = runs_of[seeds[0]][""]
    texts = store.read_parquet(ArtifactRef.model_validate(first["rationales"]).key).select("id", "source",
                                                                                          "rationale")
    from larev.validity.evidence import SeedScores, evaluate
    from larev.validity.report import write_results

    started = time.perf_counter()
    per_seed = {seed: SeedScores(**scores) for seed, scores in per_seed.items()}
    judged = protocol
    if decided:  # a decided metric trains on what its candidate trains on: those cells are not its evidence either
        trained = {**protocol.trained_on, **{m: sorted(set(protocol.trained_on_kinds(m)) |
                                                       set(protocol.trained_on_kinds(c))) for m, c in decided.items()}}
        judged = protocol.model_copy(update={"trained_on": trained})
    results = evaluate(judged, params.task, per_seed, annotations, texts=texts, decide=params.split == "tune")
    seconds["evidence"] = time.perf_counter() - started
    skipped = store.read_json(perturbed["skipped"].key)
    partial = is_partial(protocol, params)
    results = {"protocol": digest, "protocol_name": protocol.name, "task": params.task,
               "split": params.split, "seeds": list(seeds), "level": protocol.level, "bootstrap": protocol.bootstrap,
               "backbone": protocol.backbone, "test_rows": rows,
               "partial": partial, "overrides": params.overrides, "commit": commit,
               "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "perturbations_skipped": skipped, "screened_out": screened_out, "decided": decided,
               "signatures": {str(seed): scores.signatures for seed, scores in per_seed.items()},
               "seconds": {k: round(v, 1) for k, v in seconds.items()},
               **({"earlier_readings": {status: earlier.count(status) for status in ("ended", "failed", "unfinished")}
                   | {"lines": earlier.lines()}} if earlier is not None else {}),
               **results}
    results = write_results(out, results, beside)
    print(f"validity results in {out}: results.json, results.md, results.png", flush=True)
    # every step the benchmark ran or read from cache: its own, then each seed's (flows/benchmark.py)
    records = [asdict(r) for r in [*steps.records, *generating_steps]]
    records += [record for seed in seeds for run in runs_of[seed].values() for record in run["steps"]]
    return {"out": str(out), "results": results, "steps": records}
