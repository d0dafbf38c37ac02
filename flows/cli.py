"""`larev`: the command line over the flows.

larev run                                   the pipeline on the embedded demo data
larev run --task nli --train F --test F     on your own files (.parquet, .jsonl, .csv)
larev score --run runs/demo --rationales F  score a rationale file with a finished run's evaluators
larev show runs/demo                        print a run's results
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

EXIT_BAD_INPUT = 2


def _common_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-name", default=None, help="run directory / artifact name (default: demo-<task> or files)")
    p.add_argument("--store", default=".larev/store", help="artifact root: local path or s3://bucket/prefix")
    p.add_argument("--run-dir", default="runs", help="headline outputs go to <run-dir>/<run-name>")
    p.add_argument("--task", choices=["nli", "qa"], default=None, help="the task (demo default: nli)")
    p.add_argument("--train", help="training examples file")
    p.add_argument("--test", help="test examples file")
    p.add_argument("--validation", help="validation examples file (default: 10%% of train held out)")
    p.add_argument("--train-rows", help="row slice of the train file, e.g. ':8000'")
    p.add_argument("--test-rows", help="row slice of the test file, e.g. '8000:'")
    p.add_argument("--column-map", default=None, help='JSON object: file column -> canonical column')
    p.add_argument("--rationales", help="also score this rationale file (id, source, rationale[, label])")
    p.add_argument("--n-train", type=int, help="demo: training examples")
    p.add_argument("--n-test", type=int, help="demo: test examples")
    p.add_argument("--seed", type=int, help="demo data seed")
    p.add_argument("--rationale-leakage", type=float, help="demo: share of gold rationales stating the label")
    p.add_argument("--input-cue-rate", type=float, help="demo: share of inputs carrying a label cue word")
    p.add_argument("--backbone", default=None, help="'embedded' or an HF seq2seq name / local path")
    p.add_argument("--paraphrase", choices=["none", "offline", "hf", "llm"], help="NLI baseline paraphraser")
    p.add_argument("--epochs", type=int, help="training epochs per evaluator")
    p.add_argument("--batch-size", type=int, help="training batch size")
    p.add_argument("--learning-rate", type=float, help="peak learning rate")
    p.add_argument("--train-seed", type=int, help="model initialisation / data order seed")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="where to train and score")
    p.add_argument("--normalisation", choices=["label_set", "sum", "mean"], help="log-probability normalisation")
    p.add_argument("--no-larev", action="store_true", help="REV only: skip LAREV's steps")
    p.add_argument("--lambda-irm", type=float,
                   help="LAREV: IRM weight (default: 1 on the embedded backbone; the thesis's 25 NLI / 5 QA on "
                        "pretrained checkpoints)")
    p.add_argument("--lambda-probe", type=float, help="LAREV: probe weight (default: 0.005 NLI / 0.0005 QA)")
    p.add_argument("--irm-on", choices=["tokens", "label_set"], help="LAREV: what the IRM scale multiplies")
    p.add_argument("--ablations", default=None,
                   help="LAREV: comma-separated extra phi_LA variants: no_irm, no_probe, erm_envs")
    p.add_argument("--antonyms", choices=["offline", "llm"], help="LAREV: how E3 is built (llm = Gemini)")
    p.add_argument("--ig-steps", type=int, help="LAREV: Integrated Gradients steps (default 32)")
    p.add_argument("--la-epochs", type=int, help="LAREV: phi_LA epochs (default 2)")
    p.add_argument("--no-rora", action="store_true", help="skip RORA, RQ and LAS")
    p.add_argument("--rora-train-on", choices=["each_source", "gold"],
                   help="RORA: models per rationale source (the paper's protocol, default) or from gold only")
    p.add_argument("--rora-lambda", type=float, help="RORA: IRM weight of Phi (default 1)")
    p.add_argument("--rora-threshold", type=float, help="RORA: leaky-word attribution threshold (default 0.05)")
    p.add_argument("--gpu-deployment", default=None,
                   help="send the GPU stages (training, IG, generation) to this deployment of the larev-step flow, "
                        "e.g. larev-step/larev-step-gpu (default: run everything in this process)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    _scale_out_options(p)
    _server_option(p)


def _scale_out_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard-rows", type=int, default=None,
                   help="read and score rationales in shards of this many rows: memory bounded by a shard (default: "
                        "one step over the whole file)")
    p.add_argument("--dask-workers", type=int, default=None,
                   help="with --shard-rows: score the shards on a LocalCluster of this many workers (default 0: one "
                        "after another in this process)")
    p.add_argument("--dask-address", default=None,
                   help="with --shard-rows: score the shards on an existing Dask cluster (tcp://host:8786)")


def scale_out_params(args: argparse.Namespace):
    from tasks.sharding import ScaleOutConfig

    values: dict = {}
    _set(values, shard_rows=args.shard_rows, dask_address=args.dask_address, dask_workers=args.dask_workers)
    return ScaleOutConfig(**values)


def _server_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default="auto",
                   help="Prefect API: auto (PREFECT_API_URL, else a temporary server), local (a background server "
                        "with the UI on 127.0.0.1:4200, started if down), or an API URL")


def _set(section: dict, **values) -> None:
    section.update(_given(**values))


def pipeline_params(args: argparse.Namespace):
    """Build PipelineParams from CLI options (pydantic validates every value up front)."""
    from flows.pipeline import PipelineParams

    data: dict = {}
    demo: dict = {}
    if args.train or args.test:
        if not (args.train and args.test):
            raise SystemExit("error: --train and --test go together")
        data.update(source="files", train=args.train, test=args.test)
        _set(data, validation=args.validation, train_rows=args.train_rows, test_rows=args.test_rows, task=args.task)
        if args.column_map:
            data["column_map"] = json.loads(args.column_map)
    else:
        _set(demo, task=args.task, n_train=args.n_train, n_test=args.n_test, seed=args.seed,
             rationale_leakage=args.rationale_leakage, input_cue_rate=args.input_cue_rate)
        data["demo"] = demo
    model, train, score, baselines = {}, {}, {}, {}
    _set(model, backbone=args.backbone)
    _set(train, epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
         seed=args.train_seed, device=args.device)
    _set(score, normalisation=args.normalisation)
    _set(baselines, paraphrase=args.paraphrase)
    larev: dict = {"enabled": not args.no_larev}
    objective: dict = {}
    _set(objective, lambda_irm=args.lambda_irm, lambda_probe=args.lambda_probe, irm_on=args.irm_on)
    if objective:
        larev["objective"] = objective
    if args.ablations:
        larev["ablations"] = [a.strip() for a in args.ablations.split(",") if a.strip()]
    if args.antonyms:
        larev["antonyms"] = {"backend": args.antonyms}
    if args.ig_steps:
        larev["attribution"] = {"n_steps": args.ig_steps}
    if args.la_epochs:
        from larev.leakage_aware import LarevConfig

        larev["la_train"] = LarevConfig().la_train.model_copy(update={"epochs": args.la_epochs})
    rora: dict = {"enabled": not args.no_rora}
    _set(rora, train_on=args.rora_train_on)
    if args.rora_lambda is not None:
        from larev.rora import RoraConfig

        rora["objective"] = RoraConfig().objective.model_copy(update={"lambda_irm": args.rora_lambda})
    if args.rora_threshold is not None:
        rora["detection"] = {"threshold": args.rora_threshold}
    default_name = f"demo-{args.task or 'nli'}" if data.get("source") != "files" else "files"
    return PipelineParams(run_name=args.run_name or default_name, artifact_root=args.store, run_dir=args.run_dir,
                          data=data, model=model, train=train, score=score, baselines=baselines, larev=larev, rora=rora,
                          rationales=args.rationales, progress=not args.no_progress,
                          gpu_deployment=args.gpu_deployment, scale_out=scale_out_params(args))


def print_results(run_dir: str, steps=None, seconds: float | None = None) -> None:
    import polars as pl

    from larev.reports import diagnose, separation_table

    summary = pl.read_parquet(Path(run_dir) / "summary.parquet")
    with pl.Config(tbl_rows=50, tbl_hide_dataframe_shape=True, float_precision=3, tbl_hide_column_data_types=True):
        print("\nScores (nats for REV, LAREV, RORA; accuracy differences for RQ, LAS; accuracy of the evaluator with "
              "/ without the rationale):")
        print(summary)
        seps = separation_table(summary)
        if seps.width > 1:
            print("\nSeparations (gold minus degraded; all positive is what a good metric shows):")
            print(seps)
    for note in diagnose(summary):
        print(f"\nNote: {note}")
    if steps:
        from tasks.common import StepRecord

        ran = sum(not s.cached for s in steps if isinstance(s, StepRecord))
        print(f"\nSteps ({len(steps) - ran} cached, {ran} ran):")
        for s in steps:
            where = f"  on {s.where}" if getattr(s, "where", "local") != "local" else ""
            print(f"  {s.step:<20} {'cached' if s.cached else 'ran':<7} {s.seconds:7.1f}s{where}")
    print(f"\nOutputs in {run_dir}: scores.parquet, summary.parquet, report.md, separations.png, run.json")
    if seconds is not None:
        print(f"Finished in {seconds:.1f}s")


def _wait_for_api(args) -> None:
    if getattr(args, "api_boot", None) is not None:
        args.api_boot.join()


def cmd_run(args) -> int:
    from flows.pipeline import larev_pipeline

    params = pipeline_params(args)
    _wait_for_api(args)
    started = time.perf_counter()
    result = larev_pipeline(params)
    print_results(result["run_dir"], result["steps"], time.perf_counter() - started)
    return 0


def write_quality_outputs(run_dir: Path, out: Path, *, title: str, seconds: float | None, n_boot: int,
                          stress_dir: Path | None = None) -> None:
    """results.json / results.md / results.csv (bootstrap intervals) and separations.png from a finished run, with
    the FTC and AddText results of `stress_dir` (a `stress-test` flow's output) when given."""
    import polars as pl

    from larev.bench import quality_markdown, quality_results, stress_results
    from larev.metrics.bootstrap import bootstrap_intervals
    from larev.reports import separation_plot

    summary = pl.read_parquet(run_dir / "summary.parquet")
    scores = pl.read_parquet(run_dir / "scores.parquet")
    n_test = scores.filter(pl.col("source") == "gold")["id"].n_unique()
    intervals = bootstrap_intervals(scores, n_boot=n_boot, seed=0) if n_boot > 0 else None
    results = quality_results(summary, n_test=n_test, seconds=seconds, intervals=intervals)
    markdown = quality_markdown(summary, results, title=title)
    if stress_dir is not None:
        ftc, shift = stress_dir / "ftc.json", stress_dir / "addtext_shift.parquet"
        results |= stress_results(json.loads(ftc.read_text()) if ftc.exists() else None,
                                  pl.read_parquet(shift) if shift.exists() else None)
        if (stress_dir / "addtext.md").exists():
            markdown += "\n\n" + (stress_dir / "addtext.md").read_text().replace("# AddText", "## AddText", 1)
        if "ftc" in results:
            f = results["ftc"]
            markdown += (f"\n\n## FTC of the gold explanations\n\nTask model {f['task_model']}, {f['extractor']} "
                         f"extractor: counterfactuals for {f['n_extracted']} of {f['n']} (example, case) rows; "
                         + ", ".join(f"{k} {f[k]:.3f}" for k in ("ftc_delta", "ftc_kl", "ftc_wasserstein")
                                     if f[k] is not None) + ".\n")
        for name in ("addtext.png",):
            if (stress_dir / name).exists():
                out.mkdir(parents=True, exist_ok=True)
                (out / name).write_bytes((stress_dir / name).read_bytes())
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "results.md").write_text(markdown)
    if intervals is not None:
        intervals.write_csv(out / "results.csv")
    (out / "separations.png").write_bytes(separation_plot(summary, intervals))


def _bench_stress(args, run_dir: Path) -> Path | None:
    """FTC and AddText on the run's gold rationales, unless --no-stress; their directory. The stress flow skips
    FTC, with a warning, on runs it does not apply to (QA, or no theta)."""
    if args.no_stress:
        return None
    from flows.stress import StressParams, stress_test
    from larev.addtext.config import AddTextConfig
    from larev.ftc.config import FtcConfig

    _wait_for_api(args)  # --from-run has not needed the API before this flow
    print("stress tests on the gold rationales: FTC (NLI runs) and AddText ...", flush=True)
    result = stress_test(StressParams(run=str(run_dir), name="stress", sources=["gold"], ftc=FtcConfig(),
                                      addtext=AddTextConfig(), progress=not getattr(args, "no_progress", False)))
    return Path(result["run_dir"])


def cmd_bench_quality(args) -> int:
    """The whole protocol on one train/test pair; results.json, results.md, results.csv and separations.png in
    --out. With --from-run, only the outputs are rebuilt from a finished run."""
    out = Path(args.out)
    if args.from_run:
        run_dir = Path(args.from_run)
        previous = out / "results.json"
        seconds = json.loads(previous.read_text()).get("seconds") if previous.exists() else None
        write_quality_outputs(run_dir, out, title=f"larev bench quality: {run_dir.name}", seconds=seconds,
                              n_boot=args.bootstrap, stress_dir=_bench_stress(args, run_dir))
        print_results(str(run_dir))
    else:
        from flows.pipeline import larev_pipeline

        params = pipeline_params(args)
        _wait_for_api(args)
        started = time.perf_counter()
        result = larev_pipeline(params)
        seconds = time.perf_counter() - started
        run_dir = Path(result["run_dir"])
        write_quality_outputs(run_dir, out, title=f"larev bench quality: {params.run_name}", seconds=seconds,
                              n_boot=args.bootstrap, stress_dir=_bench_stress(args, run_dir))
        print_results(str(run_dir), result["steps"], seconds)
    print(f"\nBenchmark results in {out}: results.json, results.md, results.csv, separations.png"
          + ("" if args.no_stress else ", addtext.png"))
    return 0


def _timed_run(argv: list[str]) -> tuple[float, float]:
    """Wall seconds of `larev <argv>` in a child process, and the peak RSS (GiB) of the children so far."""
    import resource
    import subprocess
    import sys

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flows.cli", *argv], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"error: `larev {' '.join(argv)}` failed:\n{done.stderr[-2000:]}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: KiB
    return seconds, peak_kib / 1024**2


def cmd_bench_speed(args) -> int:
    """Speed ratios measured side by side in this run; speed.json in --out (larev/speed.py says what each is)."""
    import tempfile

    from larev import speed

    figures: dict = {}
    print("scoring: batched vs one example and one label at a time ...", flush=True)
    figures |= speed.measure_scoring()
    print("integrated gradients: batched vs one captum call per example ...", flush=True)
    figures |= speed.measure_ig()
    print("phi_LA training step vs ERM step ...", flush=True)
    figures |= speed.measure_irm_step()
    if not args.skip_demo:
        with tempfile.TemporaryDirectory() as tmp:
            demo = ["run", "--store", f"{tmp}/store", "--run-dir", f"{tmp}/runs", "--no-progress",
                    "--server", args.server]
            print("the demo, cold (fresh store) ...", flush=True)
            cold, peak = _timed_run(demo)
            print(f"  {cold:.1f}s; the demo again, from cache ...", flush=True)
            warm, peak = _timed_run(demo)
        figures |= {"demo_cold_seconds": cold, "demo_cached_seconds": warm, "cached_rerun_vs_cold": warm / cold,
                    "demo_peak_rss_gib": peak}
    if args.esnli_results:
        quality = json.loads(Path(args.esnli_results).read_text())
        if quality.get("seconds") is not None:
            figures["esnli_full_minutes"] = quality["seconds"] / 60
            figures["esnli_full_source"] = str(args.esnli_results)
    report = {"figures": figures, "targets": speed.verdicts(figures)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "speed.json").write_text(json.dumps(report, indent=2))
    print(f"\n{'figure':<26} {'value':>10}  {'target':<8} meets")
    for name, v in report["targets"].items():
        value = "-" if v["value"] is None else f"{v['value']:.3f}"
        meets = "-" if v["meets"] is None else ("yes" if v["meets"] else "NO")
        print(f"{name:<26} {value:>10}  {v['target']:<8} {meets}")
    print(f"\nAll figures in {out / 'speed.json'}")
    return 0


def cmd_bench_scale(args) -> int:
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


def cmd_bench_memory(args) -> int:
    """Peak memory of `larev score`, whole file vs shards, on growing files; memory.json in --out."""
    import tempfile

    from flows.scale_bench import measure_memory, print_memory_report, tiny_run
    from tasks.sharding import prefect_api_url

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


def cmd_score(args) -> int:
    from flows.score import ScoreParams, score_rationales

    from larev.addtext.config import AddTextConfig
    from larev.ftc.config import FtcConfig

    params = ScoreParams(run=args.run, rationales=args.rationales, name=args.name, device=args.device,
                         column_map=json.loads(args.column_map) if args.column_map else {},
                         progress=not args.no_progress, scale_out=scale_out_params(args), refresh=args.refresh,
                         ftc=FtcConfig() if args.ftc else None, addtext=AddTextConfig() if args.addtext else None)
    _wait_for_api(args)
    started = time.perf_counter()
    result = score_rationales(params)
    print_results(result["run_dir"], result["steps"], time.perf_counter() - started)
    out = Path(result["run_dir"])
    if (out / "ftc.json").exists() and args.ftc:
        print()
        print_ftc(out / "ftc.json")
    if (out / "addtext.md").exists() and args.addtext:
        print("\n" + (out / "addtext.md").read_text())
    return 0


def print_ftc(path: Path) -> None:
    """The FTC summary of ftc.json, one block per rationale source."""
    payload = json.loads(path.read_text())
    print(f"FTC (task model: {payload['task_model']}, extractor: {payload['config']['extractor']}, "
          f"alpha {payload['config']['alpha']})")
    for source, s in payload["by_source"].items():
        def fig(x):
            return "   n/a" if x is None else f"{x:6.3f}"
        print(f"\n{source}: {s['n_examples']} explanations, counterfactuals built for {s['n_extracted']} of "
              f"{s['n']} (example, case) rows")
        print(f"  {'case':<6} {'n':>6} {'built':>6} {'delta':>6} {'K':>6} {'W':>6}")
        for case, c in {**s["by_case"], "all": {"n": s["n"], "n_extracted": s["n_extracted"],
                                                **{f: s[f] for f in ("ftc_delta", "ftc_kl", "ftc_wasserstein")}}}.items():
            print(f"  {case:<6} {c['n']:>6} {c['n_extracted']:>6} {fig(c['ftc_delta'])} {fig(c['ftc_kl'])} "
                  f"{fig(c['ftc_wasserstein'])}")
        reasons = list(s["unextracted_reasons"].items())[:4]
        if reasons:
            print("  no counterfactual: " + "; ".join(f"{reason} ({n})" for reason, n in reasons))


def _stress_params(args, *, ftc: bool, addtext: bool):
    from flows.stress import StressParams
    from larev.addtext.config import AddTextConfig
    from larev.ftc.config import FtcConfig

    ftc_config = addtext_config = None
    if ftc:
        ftc_config = FtcConfig(**_given(extractor=args.extractor, task_model=args.task_model, alpha=args.alpha,
                                        llm_model=args.llm_model))
    if addtext:
        addtext_config = AddTextConfig(**_given(kinds=_listed(args.kinds), positions=_listed(args.positions),
                                                seed=args.seed, n_rand_tokens=args.rand_tokens,
                                                wiki_corpus=args.corpus))
    return StressParams(**_given(run=args.run, rationales=args.rationales, name=args.name, device=args.device,
                                 sources=_listed(args.sources), progress=not args.no_progress,
                                 column_map=json.loads(args.column_map) if args.column_map else None),
                        ftc=ftc_config, addtext=addtext_config)


def _given(**values) -> dict:
    """The options the user gave (the configs' own defaults stand for the rest)."""
    return {k: v for k, v in values.items() if v is not None}


def _listed(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def cmd_ftc(args) -> int:
    from flows.stress import stress_test

    params = _stress_params(args, ftc=True, addtext=False)
    _wait_for_api(args)
    result = stress_test(params)
    print_ftc(Path(result["run_dir"]) / "ftc.json")
    print(f"\nPer-counterfactual rows in {Path(result['run_dir']) / 'ftc.parquet'}")
    return 0


def cmd_addtext(args) -> int:
    from flows.stress import stress_test

    params = _stress_params(args, ftc=False, addtext=True)
    _wait_for_api(args)
    result = stress_test(params)
    print((Path(result["run_dir"]) / "addtext.md").read_text())
    print(f"Shift table in {Path(result['run_dir']) / 'addtext_shift.parquet'}; plot: addtext.png")
    return 0


def cmd_show(args) -> int:
    from flows.score import read_run

    read_run(args.run)  # a clear error when it is not a run directory
    print_results(args.run)
    report = Path(args.run) / "report.md"
    if args.report and report.exists():
        print("\n" + report.read_text())
    return 0


def cmd_service_setup(args) -> int:
    from flows import service

    _wait_for_api(args)
    done = service.setup(deploy=not args.no_deploy, crash_after=args.crash_after or service.CRASH_AFTER_SECONDS)
    print(f"Prefect API: {args.api}")
    print(f"work pools: {', '.join(service.WORK_POOLS)} (created now: {', '.join(done['work_pools_created']) or 'none'})")
    print(f"crash detection: automation {service.CRASH_AUTOMATION!r} ({done['crash_automation']})")
    if done["deployed"]:
        print(f"deployed every deployment of {service.PREFECT_FILE.relative_to(service.PROJECT_DIR)}; start a worker "
              "with: prefect worker start --pool larev-cpu")
    return 0


def cmd_rescore(args) -> int:
    """One scan of an inbox: what the scheduled `rescore-inbox` deployment does every hour."""
    from flows.rescore import RescoreParams, rescore_inbox

    params = RescoreParams(run=args.run, inbox=args.inbox, settle_seconds=args.settle_seconds, device=args.device,
                           column_map=json.loads(args.column_map) if args.column_map else {},
                           scale_out=scale_out_params(args))
    _wait_for_api(args)
    result = rescore_inbox(params)
    print(f"\nScored: {', '.join(result['scored']) or 'nothing new'}; "
          f"quarantined: {', '.join(result['quarantined']) or 'none'}")
    if result["waiting"]:
        print(f"Held back (changed less than {params.settle_seconds:g} s ago; scored on the next scan): "
              + ", ".join(result["waiting"]))
    print(f"Results table of this inbox: {result['results']}")
    return 0


def _stress_common_options(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument("--run", required=True, help="the run directory whose evaluators are used")
    p.add_argument("--rationales", default=None, help="rationale file (default: the run's own rationale variants)")
    p.add_argument("--sources", default=None, help="comma-separated rationale sources, '*' for all (default: gold of "
                                                   "the run's variants; every source of a --rationales file)")
    p.add_argument("--name", default=name, help=f"outputs go to <run>/<name>/ (default {name})")
    p.add_argument("--column-map", default=None, help="JSON object: file column -> canonical column")
    p.add_argument("--device", default=None, choices=["auto", "cpu", "cuda"])
    p.add_argument("--no-progress", action="store_true")
    _server_option(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="larev", description="Leakage-robust evaluation of free-text rationales")
    parser.add_argument("-v", "--verbose", action="store_true", help="Prefect's own INFO logs too")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the pipeline (demo data by default)")
    _common_run_options(run)
    run.set_defaults(func=cmd_run)
    score = sub.add_parser("score", help="score a rationale file with a finished run's evaluators")
    score.add_argument("--run", required=True, help="the run directory (e.g. runs/demo-nli)")
    score.add_argument("--rationales", required=True, help="id, source, rationale[, label]")
    score.add_argument("--name", default="scored", help="outputs go to <run>/<name>/")
    score.add_argument("--column-map", default=None, help="JSON object: file column -> canonical column")
    score.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    score.add_argument("--no-progress", action="store_true")
    score.add_argument("--refresh", action="store_true", help="recompute every step even where a cached result exists")
    score.add_argument("--ftc", action="store_true", help="also compute FTC of every source's explanations (NLI; "
                                                          "defaults of `larev ftc`)")
    score.add_argument("--addtext", action="store_true", help="also run the AddText stress test of every metric on "
                                                              "every source (defaults of `larev addtext`)")
    _scale_out_options(score)
    _server_option(score)
    score.set_defaults(func=cmd_score)
    ftc = sub.add_parser("ftc", help="FTC faithfulness of NLI explanations: counterfactual hypotheses from each "
                                     "explanation's relation, judged by a task model; ftc.json, ftc.parquet")
    _stress_common_options(ftc, "ftc")
    ftc.add_argument("--extractor", choices=["rules", "llm"], default=None,
                     help="rules (default): regular expressions over the common templates; llm: few-shot Gemini, "
                          "the rules as fallback (GEMINI_API_KEY)")
    ftc.add_argument("--llm-model", default=None, help="Gemini model for --extractor llm (gemini-2.5-flash-lite)")
    ftc.add_argument("--task-model", default=None,
                     help="the NLI model judged: an HF sequence-classification checkpoint (name or local path); "
                          "default: the run's no-rationale evaluator theta")
    ftc.add_argument("--alpha", type=float, default=None, help="FTC-W distance between neutral and the others (0.7)")
    ftc.set_defaults(func=cmd_ftc)
    addtext = sub.add_parser("addtext", help="AddText stress test: irrelevant text added to each rationale, "
                                             "scored with every metric; how far scores move and how often they rise")
    _stress_common_options(addtext, "addtext")
    addtext.add_argument("--kinds", default=None, help="comma-separated: rand, wiki, adv (default: all three)")
    addtext.add_argument("--positions", default=None, help="comma-separated: start, end, random (default: all)")
    addtext.add_argument("--seed", type=int, default=None, help="seed of every draw (default 0)")
    addtext.add_argument("--rand-tokens", type=int, default=None, help="AddText-Rand length in tokens (10)")
    addtext.add_argument("--corpus", default=None, help="UTF-8 file of unrelated sentences, one per line, for "
                                                        "AddText-Wiki (default: a generated corpus)")
    addtext.set_defaults(func=cmd_addtext)
    rescore = sub.add_parser("rescore", help="score the new rationale files of an inbox (folder or s3://), once")
    rescore.add_argument("--run", required=True, help="the run directory whose evaluators score the files")
    rescore.add_argument("--inbox", required=True, help="a local folder or s3://bucket/prefix")
    rescore.add_argument("--settle-seconds", type=float, default=30.0,
                         help="skip files modified more recently than this (default 30)")
    rescore.add_argument("--column-map", default=None, help="JSON object: file column -> canonical column")
    rescore.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    _scale_out_options(rescore)
    _server_option(rescore)
    rescore.set_defaults(func=cmd_rescore)
    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    quality = bench.add_parser("quality",
                               help="every metric (REV, LAREV, RORA, RQ, LAS) on one train/test pair; results.json")
    _common_run_options(quality)
    quality.add_argument("--out", required=True,
                         help="directory for results.json, results.md, results.csv (intervals), separations.png")
    quality.add_argument("--bootstrap", type=int, default=1000,
                         help="bootstrap resamples for the 95%% intervals (0 = none)")
    quality.add_argument("--from-run", default=None,
                         help="rebuild the outputs from this finished run directory instead of running")
    quality.add_argument("--no-stress", action="store_true",
                         help="skip FTC and the AddText stress test on the gold rationales (results.json 'ftc' and "
                              "'addtext')")
    quality.set_defaults(func=cmd_bench_quality)
    speed_p = bench.add_parser("speed", help="speed ratios measured side by side in one run; speed.json")
    speed_p.add_argument("--out", required=True, help="directory for speed.json")
    speed_p.add_argument("--skip-demo", action="store_true", help="skip the cold / cached demo runs")
    speed_p.add_argument("--esnli-results", default=None,
                         help="a `larev bench quality` results.json on e-SNLI: its wall time is esnli_full_minutes")
    speed_p.add_argument("--server", default="auto", help="Prefect API for the demo runs (see larev run --help)")
    speed_p.set_defaults(func=cmd_bench_speed)
    scale_p = bench.add_parser("scale", help="score throughput in-process vs sharded on 1, 2, ... Dask workers; "
                                             "scale.json")
    scale_p.add_argument("--run", default=None,
                         help="a finished run whose evaluators score (default: train a quick REV + LAREV demo run)")
    scale_p.add_argument("--rows", type=int, default=20_000, help="rationale rows to score (default 20,000)")
    scale_p.add_argument("--shard-rows", type=int, default=2_500, help="rows per shard (default 2,500)")
    scale_p.add_argument("--workers", default="1,2", help="comma-separated LocalCluster sizes (default 1,2)")
    scale_p.add_argument("--out", default="bench/scale", help="where scale.json and the rationale file go")
    _server_option(scale_p)
    scale_p.set_defaults(func=cmd_bench_scale)
    memory_p = bench.add_parser("memory", help="peak memory of larev score, whole file vs shards, on growing files; "
                                               "memory.json")
    memory_p.add_argument("--run", default=None, help="a finished run (default: train a small REV-only demo run)")
    memory_p.add_argument("--rows", default="50000,200000", help="comma-separated file sizes (default 50000,200000)")
    memory_p.add_argument("--shard-rows", type=int, default=10_000, help="rows per shard (default 10,000)")
    memory_p.add_argument("--out", default="bench/memory", help="where memory.json goes")
    _server_option(memory_p)
    memory_p.set_defaults(func=cmd_bench_memory)
    service = sub.add_parser("service", help="run larev as a Prefect service").add_subparsers(dest="service",
                                                                                             required=True)
    setup = service.add_parser("setup", help="on the Prefect API (PREFECT_API_URL, or --server): create the work "
                                             "pools, the crash-detection automation, and every deployment")
    setup.add_argument("--no-deploy", action="store_true", help="pools and crash detection only")
    setup.add_argument("--crash-after", type=int, default=None,
                       help="seconds without a heartbeat before a running flow run is marked Crashed (default 90)")
    _server_option(setup)
    setup.set_defaults(func=cmd_service_setup)
    show = sub.add_parser("show", help="print a run's results")
    show.add_argument("run", help="the run directory")
    show.add_argument("--report", action="store_true", help="also print report.md")
    show.set_defaults(func=cmd_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.verbose:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no telemetry calls from an offline box
    if args.command in ("run", "score", "rescore", "bench", "ftc", "addtext", "service"):
        from flows.server import choose_api
        from flows.service import heartbeat_environment

        heartbeat_environment()  # a run whose process dies is then marked Crashed (flows/service.py)
        os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "larev")  # larev's log lines in the run's Logs tab
        args.api, args.api_boot = choose_api(args.server)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight loading/saving bars; larev's own bars stay
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("httpx", "httpcore", "transformers", "urllib3", "botocore", "s3fs", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from pydantic import ValidationError

    from larev.errors import LarevError

    try:
        return args.func(args)
    except (LarevError, ValidationError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
