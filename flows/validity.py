"""`larev bench validity`: one set of scorers on three kinds of evidence no scorer is tuned on, as the protocol
file (protocols/validity.yaml) fixes them: human judgements (each file's half of the split), perturbations of the
gold rationale, and the built-in variants.

Per seed, a pipeline run trains every scorer on the protocol's train rows and scores the split's test rows with
their perturbations (a rationale file), then scores each human file's half with the same evaluators. Where the
task names generators of known quality, `larev generate` writes their rationales for the split's rows once, before
the first seed (trained on the train rows with their own seeds), and they join the rationale file. The scores go
to OUT/seed-<k>/; larev/validity/evidence.py turns them into results.json, results.md and results.png. A run on
the report split appends its line to the ledger. Every step is cached: a rerun reads what it already computed.
"""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import polars as pl
from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from larev.config import Device
from larev.data.files import read_table
from larev.data.sources import parse_slice
from larev.human.annotations import read_annotations
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
    out: str = Field(..., description="directory for results.json, results.md, results.png and seed-<k>/")
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


def pipeline_params(protocol: Protocol, params: ValidityParams, seed: int, rationales: str, test_rows: str,
                    candidate: str | None = None):
    """The pipeline parameters of one seed: the protocol's data, backbone and task settings, its scorers switched on
    (metrics, LAREV's controls and ablations), the perturbations (and generated rationales) as the rationale file
    it scores, the caller's overrides, every seed moved by `seed`. With `candidate` (a decision candidate's run,
    METRIC@LABEL): that metric alone, with the candidate's settings after every other."""
    from flows.metrics import with_metrics
    from flows.pipeline import PipelineParams
    from flows.settings import assigned
    from larev.bench.quality import reseeded

    task = protocol.tasks[params.task]
    metric, candidate_settings = protocol.candidate_runs(params.task)[candidate] if candidate else (None, {})
    metrics = [metric] if metric else params.metrics or protocol.scorers.metrics
    suffix = f"-{candidate.replace('@', '-at-')}" if candidate else ""
    tree = PipelineParams(
        run_name=f"validity-{params.task}-{params.split}-seed{seed}{suffix}", artifact_root=params.artifact_root,
        run_dir=params.run_dir, rationales=rationales, progress=params.progress,
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
    for name in protocol.candidate_runs(params.task):
        pipeline_params(protocol, params, 0, str(Path(params.out) / "rationales.parquet"), rows, name)


def _as_candidate(scores, metric: str, candidate: str):
    """A candidate run's scores of its metric (a frame, or a dict of frames), named as the candidate."""
    if isinstance(scores, dict):
        return {name: _as_candidate(frame, metric, candidate) for name, frame in scores.items()}
    return scores.filter(pl.col("metric") == metric).with_columns(metric=pl.lit(candidate))


def scored_run(protocol: Protocol, params: ValidityParams, seed: int, rationales: str, rows: str,
               halves: dict[str, str], candidate: str | None, seconds: dict[str, float], *,
               with_texts: bool = False) -> dict:
    """One pipeline run of a seed (the protocol's, or a decision candidate's) and its scores of the human halves:
    {"test", "human": {file: scores}, "signatures"} (scores: metric, id, source, score; a candidate's are its
    metric's, under the candidate's name), and with `with_texts` "texts": the rationales it scored. Adds the
    run's times to `seconds`."""
    from flows.human import score_annotations
    from flows.pipeline import larev_pipeline
    from flows.score import finished_run
    from tasks.export import read_run
    from tasks.runtime.runner import StepRunner

    label = f"seed-{seed}" + (f"-{candidate}" if candidate else "")
    started = time.perf_counter()
    result = larev_pipeline(pipeline_params(protocol, params, seed, rationales, rows, candidate))
    seconds[f"{label}-pipeline"] = time.perf_counter() - started
    run = read_run(result["run_dir"])
    refs = {k: ArtifactRef(**v) for k, v in run["artifacts"].items()}
    store = ArtifactStore(run["artifact_root"])
    started = time.perf_counter()
    human = {}
    with StepRunner(store, progress=params.progress) as steps:
        base = finished_run(steps, run, refs, device=params.device)
        for name, path in halves.items():
            tables = score_annotations(steps, base, refs, path, f"{name}-{params.split}")
            human[name] = pl.concat([store.read_parquet(t.key) for t in tables], how="diagonal_relaxed")
    seconds[f"{label}-human"] = time.perf_counter() - started
    test, signatures = store.read_parquet(refs["scores"].key), run.get("signatures", {})
    if candidate:  # its metric's scores, under the candidate's name
        metric = protocol.candidate_runs(params.task)[candidate][0]
        test, human = _as_candidate(test, metric, candidate), _as_candidate(human, metric, candidate)
        signatures = {candidate: signatures[metric]} if metric in signatures else {}
    columns = ("metric", "id", "source", "score")
    out = {"test": test.select(*columns), "human": {k: v.select(*columns) for k, v in human.items()},
           "signatures": signatures}
    if with_texts:
        out["texts"] = store.read_parquet(refs["rationales"].key).select("id", "source", "rationale")
    return out


def split_rows(protocol: Protocol, params: ValidityParams) -> str:
    """The split's row slice, cut to `test_limit` rows when given."""
    rows = protocol.tasks[params.task].splits[params.split]
    if params.test_limit is None:
        return rows
    part = parse_slice(rows)
    start = part.start or 0
    stop = start + params.test_limit if part.stop is None else min(part.stop, start + params.test_limit)
    return f"{start}:{stop}"


def test_examples(protocol: Protocol, params: ValidityParams, rows: str) -> pl.DataFrame:
    data = read_table(protocol.tasks[params.task].data)
    return data[parse_slice(rows)]


def generated_rationales(protocol: Protocol, params: ValidityParams, rows: str, out: Path) -> pl.DataFrame:
    """The task's generators' rationales for the split's rows (id, source, rationale, label; source = the
    generator's name), by `larev generate` on the protocol's data (cached steps; written to OUT/generated.parquet).
    The generators are embedded T5s whatever the scorers' backbone."""
    from flows.generate import GenerateParams, generate_rationales

    task = protocol.tasks[params.task]
    result = generate_rationales(GenerateParams(
        data={"source": "files", "task": params.task, "train": task.data, "test": task.data,
              "train_rows": task.train_rows, "test_rows": rows},
        artifact_root=params.artifact_root, generators=task.generator_configs(),
        out=str(out / "generated.parquet"), device=params.device, progress=params.progress))
    if not isinstance(result, dict) or "out" not in result:
        raise RuntimeError(f"generating the protocol's rationales failed: {result}")
    return read_table(result["out"]).select("id", "source", "rationale", "label")


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


@flow(name="validity-benchmark", flow_run_name="validity-{params.task}-{params.split}", log_prints=True)
def validity_benchmark(params: ValidityParams) -> dict:
    """Train the protocol's scorers once per seed and judge them on human judgements, perturbations and variants;
    on the tune split, score each decision candidate and decide the protocol's defaults."""
    from larev.validity.human_split import human_half
    from larev.validity.ledger import append_ledger
    from larev.validity.perturb import perturbations

    protocol, digest = load_protocol(params.protocol), protocol_digest(params.protocol)  # read once, at the start
    commit = _commit()  # the code that runs, as it is when the run starts
    files = check_inputs(protocol, params.protocol, params.task, params.human, params.seeds, params.metrics)
    beside = read_beside(params.beside, digest, params.task, params.split) if params.beside else None
    out = Path(params.out)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    rows = split_rows(protocol, params)
    check_decisions(protocol, params, rows)
    started = time.perf_counter()
    if params.split == "report":
        from larev.validity.ledger import read_ledger

        before = [line for line in read_ledger(params.ledger)
                  if line.get("protocol") == digest and line.get("task") == params.task]
        print(f"the report split, read {len(before)} time(s) before under this protocol (ledger {params.ledger})"
              + "".join(f"\n  {line['date']} commit {line['commit']} -> {line['out']}" for line in before),
              flush=True)
    # one set of perturbations for every training seed (their draws: seed 0 and each instance's id)
    perturbed = perturbations(test_examples(protocol, params, rows), params.task, seed=0)
    perturbed.rows.write_parquet(out / "perturbations.parquet")
    scored = perturbed.rows
    if protocol.tasks[params.task].generators:
        generating = time.perf_counter()
        scored = pl.concat([scored, generated_rationales(protocol, params, rows, out)], how="diagonal_relaxed")
        seconds["generators"] = time.perf_counter() - generating
    rationale_file = out / "rationales.parquet"  # what every seed's run scores beside the split's own variants
    scored.write_parquet(rationale_file)
    halves = {}
    for path in files:
        half = out / "human" / f"{Path(path).stem}-{params.split}.parquet"
        half.parent.mkdir(exist_ok=True)
        human_half(read_table(path), params.split).write_parquet(half)
        halves[Path(path).stem] = str(half)
    annotations = {name: read_annotations(path) for name, path in halves.items()}
    seconds["inputs"] = time.perf_counter() - started - seconds.get("generators", 0.0)
    seeds = params.seeds or protocol.seeds
    per_seed: dict[int, dict] = {}
    metrics = params.metrics or protocol.scorers.metrics  # a candidate of a metric the run leaves out is not run
    candidates = [name for name, (metric, _) in protocol.candidate_runs(params.task).items()
                  if metric in metrics] if params.split == "tune" else []
    texts = None
    for n, seed in enumerate(seeds, 1):
        print(f"seed {seed} ({n} of {len(seeds)})", flush=True)
        runs = []
        for candidate in [None, *candidates]:  # the protocol's run, then each decision candidate's own run
            if candidate:
                print(f"seed {seed}: decision candidate {candidate}", flush=True)
            runs.append(scored_run(protocol, params, seed, str(rationale_file), rows, halves, candidate, seconds,
                                   with_texts=texts is None and candidate is None))
        texts = runs[0]["texts"] if texts is None else texts  # the rationales the first run scored (length)
        seed_dir = out / f"seed-{seed}"
        seed_dir.mkdir(exist_ok=True)
        per_seed[seed] = {"test": pl.concat([r["test"] for r in runs]), "human": {},
                          "signatures": {k: v for r in runs for k, v in r["signatures"].items()}}
        per_seed[seed]["test"].write_parquet(seed_dir / "scores.parquet")
        for name in halves:
            per_seed[seed]["human"][name] = pl.concat([r["human"][name] for r in runs])
            per_seed[seed]["human"][name].write_parquet(seed_dir / f"human-{name}.parquet")
    from larev.validity.evidence import SeedScores, evaluate
    from larev.validity.report import write_results

    started = time.perf_counter()
    per_seed = {seed: SeedScores(**scores) for seed, scores in per_seed.items()}
    results = evaluate(protocol, params.task, per_seed, annotations, texts=texts, decide=params.split == "tune")
    seconds["evidence"] = time.perf_counter() - started
    # anything but the protocol's seeds, metrics, rows, settings and human files is not a result of the protocol
    partial = bool((params.seeds and sorted(params.seeds) != sorted(protocol.seeds))
                   or (params.metrics and sorted(params.metrics) != sorted(protocol.scorers.metrics))
                   or params.test_limit or params.overrides or params.human)
    results = {"protocol": digest, "protocol_name": protocol.name, "task": params.task,
               "split": params.split, "seeds": list(seeds), "level": protocol.level, "bootstrap": protocol.bootstrap,
               "backbone": protocol.backbone, "test_rows": rows,
               "partial": partial, "overrides": params.overrides, "commit": commit,
               "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "perturbations_skipped": perturbed.skipped,
               "signatures": {str(seed): scores.signatures for seed, scores in per_seed.items()},
               "seconds": {k: round(v, 1) for k, v in seconds.items()},
               **results}
    results = write_results(out, results, beside)
    if params.split == "report":
        append_ledger(params.ledger, results, out=str(out))
    print(f"validity results in {out}: results.json, results.md, results.png", flush=True)
    return {"out": str(out), "results": results}
