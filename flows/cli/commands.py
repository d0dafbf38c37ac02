"""What each `larev` command does once its parameters are resolved: call a flow, print what it made.

`args.params` is the command's validated parameter model when the command is built from one (flows/cli/parser.py);
`args.api_boot` is the Prefect API being started in the background (joined before the first flow call).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from flows.cli.output import print_ftc, print_human, print_results, print_verdict


def _wait_for_api(args) -> None:
    if getattr(args, "api_boot", None) is not None:
        args.api_boot.join()


def run(args) -> int:
    from flows.pipeline import larev_pipeline

    _wait_for_api(args)
    started = time.perf_counter()
    result = larev_pipeline(args.params)
    print_verdict(result["run_dir"], result["steps"], time.perf_counter() - started, getattr(args, "steps", False))
    return 0


def score(args) -> int:
    from flows.score import score_rationales

    params = args.params
    _wait_for_api(args)
    started = time.perf_counter()
    result = score_rationales(params)
    print_verdict(result["run_dir"], result["steps"], time.perf_counter() - started, getattr(args, "steps", False))
    for line in result.get("leaderboard", []):
        print(f"leaderboard: {line}")
    out = Path(result["run_dir"])
    if params.ftc is not None and (out / "ftc.json").exists():
        print()
        print_ftc(out / "ftc.json")
    if params.addtext is not None and (out / "addtext.md").exists():
        print("\n" + (out / "addtext.md").read_text())
    if params.degradations and (out / "results.json").exists():
        from larev.generate.separations import sum_lines

        print("\n" + "\n".join(sum_lines(json.loads((out / "results.json").read_text()))))
        print(f"Each figure with its interval: report.md, results.json and degradations.png in {out}")
    return 0


def generate(args) -> int:
    from flows.cli.output import print_steps
    from flows.generate import generate_rationales

    _wait_for_api(args)
    started = time.perf_counter()
    result = generate_rationales(args.params)
    print(f"\nwrote {result['out']}: {result['rows']} rationales from {len(result['sources'])} generators "
          f"({', '.join(result['sources'])}); provenance in {result['provenance']}")
    print_steps(result["steps"], listed=getattr(args, "steps", False))
    print(f"Finished in {time.perf_counter() - started:.0f} s. Score it: larev score --run RUN --rationales "
          f"{result['out']} --name NAME")
    return 0


def compare(args) -> int:
    from flows.compare import compare_rationale_sources

    _wait_for_api(args)
    result = compare_rationale_sources(args.compare_params)  # built and checked by preflight.check_inputs
    for line in result.get("warnings", []):  # e.g. a score without a signature compared unchecked
        print(f"warning: {line}", file=sys.stderr)
    out = Path(result["out"])
    print((out / "compare.md").read_text())
    print(f"compare.json, compare.md and compare.png in {out}")
    return 0


def leaderboard(args) -> int:
    import polars as pl

    from larev.errors import ConfigError
    from larev.leaderboard import leaderboard_markdown
    from storage import ArtifactStore
    from tasks.export import read_run
    from tasks.leaderboard import write_snapshot

    run = read_run(args.run)
    board = write_snapshot(ArtifactStore(run["artifact_root"]), run, args.run, min_share=args.min_share)
    if args.metric is not None:
        if args.metric not in set(board["metric"]):
            raise ConfigError(f"the leaderboard of {args.run} has no metric {args.metric!r}; it has "
                              f"{', '.join(board['metric'].unique(maintain_order=True))}")
        board = board.filter(pl.col("metric") == args.metric)
    print(leaderboard_markdown(board, f"larev leaderboard: {run['params']['run_name']}"))
    return 0


def pack(args) -> int:
    from flows.packs import make_pack

    header = make_pack(args.run, args.out)
    size = Path(args.out).stat().st_size / 2**20
    print(f"wrote {args.out}: {len(header['files'])} files, {size:.1f} MiB, task {header['task']}, backbone "
          f"{header['backbone']}, digest {header['digest'][:16]}")
    for metric, signature in sorted(header["signatures"].items()):
        print(f"  {metric}: {signature}")
    print(f"score with it: larev score --pack {args.out} --rationales FILE")
    return 0


def data_get(args) -> int:
    from larev.data.fetch import get_dataset

    result = get_dataset(args.name, args.out, form=args.form, only=args.only, source_dir=args.source_dir,
                         mirror=args.mirror, accept_changed=args.accept_changed, progress=not args.no_progress)
    print(f"{result.name} ({result.form}): {len(result.sources)} source file(s), their sha256 in {result.lock}")
    checks = {True: "; the same rows as the committed results' file",
              False: "; NOT the rows of the committed results' file (docs/data.md, Real data)", None: ""}
    for written in result.written:
        print(f"  wrote {written.path}: {written.rows} rows, content sha256 {written.digest[:16]}"
              f"{checks[written.matches_committed]}")
    for note in result.notes:
        print(f"  note: {note}")
    if result.raw_dir is not None:
        print(f"downloads kept in {result.raw_dir} (`larev data get {result.name} --from {result.raw_dir}` converts "
              "them again)")
    print(f"the benchmarks read this folder with LAREV_DATA={result.out}, e.g. LAREV_DATA={result.out} make "
          "bench-quality")
    return 0


def ftc(args) -> int:
    from flows.stress import stress_test

    _wait_for_api(args)
    result = stress_test(args.params)
    print_ftc(Path(result["run_dir"]) / "ftc.json")
    print(f"\nPer-counterfactual rows in {Path(result['run_dir']) / 'ftc.parquet'}")
    return 0


def addtext(args) -> int:
    from flows.stress import stress_test

    _wait_for_api(args)
    result = stress_test(args.params)
    print((Path(result["run_dir"]) / "addtext.md").read_text())
    print(f"Shift table in {Path(result['run_dir']) / 'addtext_shift.parquet'}; plot: addtext.png")
    return 0


def rescore(args) -> int:
    """One scan of an inbox: what the scheduled `rescore-inbox` deployment does every hour."""
    from flows.rescore import rescore_inbox

    params = args.params
    _wait_for_api(args)
    result = rescore_inbox(params)
    print(f"\nScored: {', '.join(result['scored']) or 'nothing new'}; "
          f"quarantined: {', '.join(result['quarantined']) or 'none'}")
    if result["waiting"]:
        print(f"Held back (changed less than {params.settle_seconds:g} s ago; scored on the next scan): "
              + ", ".join(result["waiting"]))
    print(f"Results table of this inbox: {result['results']}")
    return 0


def show(args) -> int:
    from larev.errors import ConfigError

    if getattr(args, "write_figures", False):
        from flows.cards import write_figures

        changed = write_figures()
        print(f"rewrote the figures of {', '.join(changed)}" if changed else "every marked figure was up to date")
        if args.metric is None and args.write_cards is None:
            return 0
    if args.metric is not None or args.write_cards is not None:
        from flows.cards import metric_card, write_cards

        if args.run is not None or args.report:
            raise ConfigError("larev show: a run directory (with --report) or --metric / --write-cards, not both")
        if args.write_cards is not None:
            changed = write_cards(args.write_cards)
            note = f"rewrote {', '.join(changed)}" if changed else "every card was up to date"
            print(f"{args.write_cards}: {note}", file=sys.stderr if args.metric else sys.stdout)  # stdout: the card
        if args.metric is not None:
            print(metric_card(args.metric), end="")
        return 0
    if args.run is None:
        raise ConfigError("larev show: name a run directory, or --metric NAME for a metric's card")
    from flows.score import read_run

    read_run(args.run)  # a clear error when it is not a run directory
    print_results(args.run)
    report = Path(args.run) / "report.md"
    if args.report and report.exists():
        print("\n" + report.read_text())
    return 0


def cache_verify(args) -> int:
    from storage import ArtifactStore
    from tasks.runtime import cache_audit

    store = ArtifactStore(args.store)
    statuses = cache_audit.verify(store)
    print(cache_audit.as_json(statuses) if args.json else cache_audit.summary(store, statuses))
    if args.prune:
        gone = cache_audit.prune(store, statuses)
        print(f"pruned {gone['entries']} entries ({gone['output_folders']} output folders) and "
              f"{gone['orphan_records']} step records without a cache record")
    return 0


def service_setup(args) -> int:
    from flows import service

    _wait_for_api(args)
    done = service.setup(deploy=not args.no_deploy, crash_after=args.crash_after or service.CRASH_AFTER_SECONDS)
    print(f"Prefect API: {args.api}")
    created = ", ".join(done["work_pools_created"]) or "none"
    print(f"work pools: {', '.join(service.WORK_POOLS)} (created now: {created})")
    print(f"crash detection: automation {service.CRASH_AUTOMATION!r} ({done['crash_automation']})")
    if done["deployed"]:
        print(f"deployed every deployment of {service.PREFECT_FILE.relative_to(service.PROJECT_DIR)}; start a worker "
              "with: prefect worker start --pool larev-cpu")
    return 0


# ------------------------------------------------------------------------------------------------ benchmarks


def bench_quality(args) -> int:
    """The whole protocol on one train/test pair (flows/quality.py); with --from-run, only the outputs are rebuilt
    from a finished run."""
    from flows.cli.output import print_steps
    from flows.metrics import with_controls, with_metrics
    from flows.quality import QualityParams, quality_benchmark
    from tasks.runtime.runner import StepRecord

    pipeline = args.params
    if pipeline is not None and args.metrics is not None:
        pipeline = with_metrics(pipeline, args.metrics)
    if pipeline is not None and getattr(args, "controls", False):
        pipeline = with_controls(pipeline)
    rows = {name: f"{part.start if part.start is not None else ''}:{part.stop if part.stop is not None else ''}"
            for name, part in args.report_rows or []}
    params = QualityParams(**({"pipeline": pipeline} if pipeline is not None else {}), out=args.out,
                           seeds=args.seeds, first_seed=args.first_seed, bootstrap=args.bootstrap,
                           stress=not args.no_stress, report_rows=rows, human=args.human or [],
                           from_run=args.from_run, seed_deployment=getattr(args, "seed_deployment", None))
    _wait_for_api(args)
    result = quality_benchmark(params)
    for run in result["runs"]:
        steps = [StepRecord(**record) for record in run["steps"]]
        print_results(run["run_dir"], steps or None, run["seconds"] if steps else None)
    if result["human"] is not None:
        print_human(result["human"]["results"], Path(args.out), result["human"]["seconds"])
    if not result["single"]:
        print(f"\nBenchmark results in {args.out}: results.json and results.md over {result['n_seeds']} seeds; "
              "each seed's results in seed-<i>/")
    else:
        print(f"\nBenchmark results in {args.out}: results.json, results.csv, results.md, separations.png"
              + ("" if args.no_stress else ", addtext.png"))
    return 0


def _human_params(args, run_dir: str, annotations: list[str], out: Path):
    from flows.human import HumanParams

    params = getattr(args, "params", None)  # bench quality --human: the pipeline's own options
    return HumanParams(run=run_dir, annotations=annotations, out=str(out), bootstrap=args.bootstrap,
                       device=params.train.device if params is not None else args.device,
                       progress=params.progress if params is not None else not args.no_progress,
                       refresh=getattr(args, "refresh", False))


def _run_human(args, run_dir: str, annotations: list[str], out: Path) -> None:
    from flows.human import human_agreement

    started = time.perf_counter()
    result = human_agreement(_human_params(args, run_dir, annotations, out))
    print_human(result["results"], out, time.perf_counter() - started)


def bench_human(args) -> int:
    """`larev bench human`: a finished run's metrics against human judgements of rationales (the run and the
    files were checked before the server started: flows/cli/preflight.py)."""
    _wait_for_api(args)
    _run_human(args, args.run, args.annotations, Path(args.out))
    return 0


def bench_validity(args) -> int:
    """`larev bench validity`: the protocol's scorers on its task and split (flows/validity.py); its parameters
    were built and checked before the server started (flows/cli/preflight.py)."""
    from flows.validity import validity_benchmark

    params = args.validity_params
    _wait_for_api(args)
    started = time.perf_counter()
    result = validity_benchmark(params)
    from larev.validity.report import summary_lines

    for line in summary_lines(result["results"]):
        print(line)
    print(f"\nValidity results in {result['out']} ({time.perf_counter() - started:.0f} s): results.json, "
          "results.md, results.png")
    return 0


def _gpu_check_params(args):
    from flows.gpu_check import GpuCheckParams

    return GpuCheckParams(data=args.data, task=args.task, train_rows=args.train_rows, test_rows=args.test_rows,
                          backbone=args.backbone, device=args.device, precision=args.precision, epochs=args.epochs,
                          ig_steps=args.ig_steps, seed=args.seed)


def bench_gpu_run(args) -> int:
    """`larev bench gpu run` (flows/gpu_check.py)."""
    from flows.gpu_check import run_check

    record = run_check(_gpu_check_params(args), Path(args.out))
    print(json.dumps({k: record[k] for k in ("device", "precision", "seconds", "means", "total_seconds")}, indent=1))
    return 0


def bench_gpu_fixed(args) -> int:
    """`larev bench gpu fixed` (flows/gpu_check.py)."""
    from flows.gpu_check import fixed_check

    record = fixed_check(_gpu_check_params(args), Path(args.models), Path(args.out))
    print(json.dumps(record["seconds"], indent=1))
    return 0


def bench_gpu_compare(args) -> int:
    """`larev bench gpu compare` (flows/gpu_check.py)."""
    from flows.gpu_check import compare_check

    table, agreement = compare_check(Path(args.cpu), [Path(d) for d in args.gpu], args.fixed,
                                     Path(args.out) if args.out else None)
    print(table)
    print(json.dumps(agreement, indent=1))
    return 0


# Runs a command and reports its peak RSS. A child's ru_maxrss also counts the image it was forked from (Linux
# keeps the pre-exec high-water mark), so the demo is started from this small process, not from the benchmark's
# own, which holds the models it measured before (minilm: ~2.5 GiB).
_PEAK_RSS_WRAPPER = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(f"LAREV_PEAK_RSS_KIB={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
sys.exit(code)
"""


def _timed_run(argv: list[str], log: Path | None = None) -> tuple[float, float]:
    """Wall seconds of `larev <argv>` in a child process and its peak RSS (GiB, Linux KiB counts); its output
    (the step table included) goes to `log`."""
    import re
    import subprocess
    import sys

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _PEAK_RSS_WRAPPER, sys.executable, "-m", "flows.cli", *argv],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    peak = re.search(r"^LAREV_PEAK_RSS_KIB=(\d+)$", done.stderr, flags=re.MULTILINE)
    stderr = done.stderr if peak is None else done.stderr.replace(peak.group(0) + "\n", "")
    if log is not None:
        log.write_text(done.stdout + stderr)
    if done.returncode != 0:
        raise SystemExit(f"error: `larev {' '.join(argv)}` failed:\n{stderr[-2000:]}")
    return seconds, int(peak.group(1)) / 1024**2


def seed_minutes(path: Path, dataset: str = "esnli") -> dict:
    """Wall minutes per seed of a `larev bench quality` results.json: DATASET_seed_minutes when it ran every metric,
    DATASET_rev_larev_seed_minutes when it ran REV and LAREV alone (`--metrics rev,larev`); dataset esnli or cose
    (the option it came from)."""
    from flows.metrics import all_score_names

    if not path.is_file():
        raise SystemExit(f"error: --{dataset}-results {path}: no such file (run `larev bench quality` first)")
    quality = json.loads(path.read_text())
    metrics = set(quality.get("scores", {}))
    seeds = len(quality.get("seeds") or [0])
    if quality.get("seconds") is None:
        raise SystemExit(f"error: {path} records no wall time ('seconds')")
    if metrics >= all_score_names():
        key = f"{dataset}_seed_minutes"
    elif metrics == {"rev", "larev"}:
        key = f"{dataset}_rev_larev_seed_minutes"
    else:
        raise SystemExit(f"error: {path} scored {sorted(metrics)}: expected every metric or rev and larev alone")
    return {key: quality["seconds"] / seeds / 60, f"{key}_source": str(path)}


def bench_speed(args) -> int:
    """Speed ratios measured side by side in this run; speed.json in --out (larev/bench/speed.py says what each is)."""
    import tempfile

    from larev.bench import speed

    figures: dict = {}
    for path in args.esnli_results or []:  # read first: a wrong path fails now, not after the measurements
        figures |= seed_minutes(Path(path))
    for path in args.cose_results or []:
        figures |= seed_minutes(Path(path), dataset="cose")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print("scoring: batched vs one example and one label at a time ...", flush=True)
    figures |= speed.measure_scoring()
    print("integrated gradients vs its forward + backward floor ...", flush=True)
    figures |= speed.measure_ig_bound()
    print("phi_LA training step vs ERM steps on the same rows ...", flush=True)
    figures |= speed.measure_irm_step()
    print("a training step on the pretrained minilm backbone vs the embedded model ...", flush=True)
    figures |= speed.measure_backbone_step()
    print("a training step on minilm-frozen (cold and warm encoder cache) vs the embedded model ...", flush=True)
    figures |= speed.measure_frozen_step()
    print("a training step on minilm-reader (1 and 2 trained layers) vs the embedded model ...", flush=True)
    figures |= speed.measure_reader_step()
    if not args.skip_demo:
        with tempfile.TemporaryDirectory() as tmp:
            # as `make demo` runs it: on the local background server (started once, then reused)
            demo = ["run", "--store", f"{tmp}/store", "--run-dir", f"{tmp}/runs", "--no-progress",
                    "--server", "local" if args.server == "auto" else args.server]
            print("the demo, cold (fresh store) ...", flush=True)
            cold, peak = _timed_run(demo, out / "demo-cold.log")
            print(f"  {cold:.1f}s; the demo again, from cache ...", flush=True)
            warm, peak_rerun = _timed_run(demo, out / "demo-rerun.log")
            peak = max(peak, peak_rerun)
        figures |= {"demo_cold_seconds": cold, "demo_rerun_seconds": warm, "cached_rerun_vs_cold": warm / cold,
                    "demo_peak_rss_gib": peak}
    report = {"figures": figures, "targets": speed.verdicts(figures)}
    (out / "speed.json").write_text(json.dumps(report, indent=2))
    print(f"\n{'figure':<26} {'value':>10}  {'target':<8} meets")
    for name, v in report["targets"].items():
        value = "-" if v["value"] is None else f"{v['value']:.3f}"
        meets = "-" if v["meets"] is None else ("yes" if v["meets"] else "NO")
        print(f"{name:<26} {value:>10}  {v['target']:<8} {meets}")
    print(f"\nAll figures in {out / 'speed.json'}")
    return 0


def bench_scale(args) -> int:
    """Score throughput in-process vs sharded over 1, 2, ... Dask workers; scale.json in --out."""
    import tempfile

    from flows.scale_bench import measure_scale_out, print_report, quick_run

    workers = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    _wait_for_api(args)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run
        if run_dir is None:
            print("training a REV + LAREV run on the demo data (embedded backbone, one epoch per model) ...",
                  flush=True)
            run_dir = quick_run(Path(tmp))
        report = measure_scale_out(run_dir, Path(args.out), n_rows=args.rows, shard_rows=args.shard_rows,
                                   workers=workers)
    print_report(report)
    print(f"\nAll figures in {Path(args.out) / 'scale.json'}")
    return 0


def bench_memory(args) -> int:
    """Peak memory of `larev score`, whole file vs shards, on growing files; memory.json in --out."""
    import tempfile

    from flows.scale_bench import measure_memory, print_memory_report, tiny_run
    from tasks.runtime.sharding import prefect_api_url

    sizes = [int(n) for n in args.rows.split(",") if n.strip()]
    _wait_for_api(args)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run
        if run_dir is None:
            print("training a small REV-only run on the demo data ...", flush=True)
            run_dir = tiny_run(Path(tmp))
        report = measure_memory(run_dir, Path(args.out), sizes=sizes, shard_rows=args.shard_rows,
                                api_url=prefect_api_url())
    print_memory_report(report)
    print(f"\nAll figures in {Path(args.out) / 'memory.json'}")
    return 0
