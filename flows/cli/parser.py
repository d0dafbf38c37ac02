"""The `larev` argument parser: which option sets which parameter (tables of `Option`s), the rest from the models.

To expose another parameter as an option, add one `Option(flag, path)` line to a table below; its type, choices
and help come from the field. A metric's own switches are not listed here: they are its `cli_options`
(tasks/metric.py), read from the registry (flows/metrics.py). Every parameter is reachable without a line here
through `--set PATH=VALUE` or a `--params` file.

The parser is built from a snapshot of those options (each command's option specs and the registry's metric
names), so that `larev --help` and a bad option answer before torch, Prefect or the parameter models are imported;
the models validate the parameters once the arguments parse. The snapshot is made from the models the first time
the project's source is seen and kept in the user's cache, named by a digest of that source
(`$LAREV_CACHE_DIR`, else `$XDG_CACHE_HOME/larev` or `~/.cache/larev`): a changed source (a new metric, a new
option) is a new snapshot, so it is never stale.
"""

from __future__ import annotations

import argparse
import json
import os
from functools import cache
from pathlib import Path

from flows.cli.options import Command, Option, _comma_list, add_options, option_specs
from flows.settings import UNSET, Assignment, given

SCALE_OUT = [
    Option("--shard-rows", "scale_out.shard_rows"),
    Option("--dask-workers", "scale_out.dask_workers"),
    Option("--dask-address", "scale_out.dask_address"),
]

PIPELINE = [
    Option("--run-name", "run_name", default="demo-<task>, or 'files'"),
    Option("--store", "artifact_root"),
    Option("--run-dir", "run_dir"),
    Option("--task", "data.task", help="the task: of the demo data (default nli), or checked against your files"),
    Option("--train", "data.train", help="training examples file (.parquet, .jsonl, .csv); with --test: your data"),
    Option("--test", "data.test"),
    Option("--validation", "data.validation"),
    Option("--train-rows", "data.train_rows"),
    Option("--test-rows", "data.test_rows"),
    Option("--column-map", "data.column_map"),
    Option("--n-train", "data.demo.n_train", help="demo: training examples"),
    Option("--n-test", "data.demo.n_test", help="demo: test examples"),
    Option("--seed", "data.demo.seed", help="demo: data seed"),
    Option("--rationale-leakage", "data.demo.rationale_leakage"),
    Option("--input-cue-rate", "data.demo.input_cue_rate"),
    Option("--rationales", "rationales"),
    Option("--backbone", "model.backbone"),
    Option("--paraphrase", "baselines.paraphrase", help="NLI baseline paraphraser"),
    Option("--epochs", "train.epochs", help="training epochs per evaluator"),
    Option("--batch-size", "train.batch_size"),
    Option("--learning-rate", "train.learning_rate"),
    Option("--train-seed", "train.seed"),
    Option("--device", "train.device"),
    Option("--normalisation", "score.normalisation"),
]
# after the metrics' own switches (`metric_options`)
PIPELINE_RUNTIME = [
    Option("--gpu-deployment", "gpu_deployment"),
    Option("--no-progress", "progress", const=False, help="no progress bars"),
    *SCALE_OUT,
]


def pipeline_assignments(items: list[Assignment]) -> list[Assignment]:
    """`--train`/`--test` mean source=files; on demo data the task names the demo task; the default run name
    is demo-<task> (or 'files')."""
    source = given(items, "data.source")
    if source is UNSET and any(a.path in ("data.train", "data.test") for a in items):
        source = "files"
        items = [Assignment("data.source", "files", "--train/--test"), *items]
    if source in (UNSET, "demo"):
        # a null task (a --params file written by --print-params) leaves the demo's task as it is
        items = [Assignment("data.demo.task", a.value, a.origin) if a.path == "data.task" and a.value is not None
                 else a for a in items]
    if given(items, "run_name") is UNSET:
        task = given(items, "data.demo.task")
        demo_name = f"demo-{'nli' if task is UNSET else task}"
        name = source if source in ("files", "hub") else demo_name
        items = [Assignment("run_name", name, "default"), *items]
    return items


# `score`, `ftc` and `addtext`: a finished run's evaluators on a rationale file (same field names in ScoreParams
# and StressParams; each model's own descriptions and defaults show in --help)
# how a rationale file in another format than the canonical table is read (larev/data/logged.py)
READING = [
    Option("--rationale-field", "reading.rationale_field"),
    Option("--id-field", "reading.id_field"),
    Option("--source", "reading.source"),
    Option("--think", "reading.think"),
]
WITH_RUN = [
    Option("--run", "run"),
    Option("--rationales", "rationales"),
    Option("--name", "name"),
    Option("--column-map", "column_map"),
    *READING,
    Option("--device", "device"),
    Option("--no-progress", "progress", const=False, help="no progress bars"),
]
STRESS_COMMON = [*WITH_RUN, Option("--sources", "sources")]
def generate_options() -> list[Option]:
    """`generate`: a rationale file for a run's test split (or for the examples of `data`), one source per
    generator."""
    from larev.generate.config import DEFAULT_GENERATOR_SPECS

    return [
        Option("--run", "run"),
        Option("--generators", "generators", default=",".join(DEFAULT_GENERATOR_SPECS)),
        Option("--out", "out"),
        Option("--task", "data.task", help="with --train/--test: the task, checked against the files"),
        Option("--train", "data.train", help="instead of --run: training examples file (with --test)"),
        Option("--test", "data.test", help="instead of --run: test examples file (with --train)"),
        Option("--store", "artifact_root"),
        Option("--device", "device"),
        Option("--no-progress", "progress", const=False, help="no progress bars"),
        Option("--refresh", "refresh", const=True),
    ]


def generate_assignments(items: list[Assignment]) -> list[Assignment]:
    """`--train`/`--test` mean data.source=files (as for `larev run`)."""
    if given(items, "data.source") is UNSET and any(a.path in ("data.train", "data.test") for a in items):
        items = [Assignment("data.source", "files", "--train/--test"), *items]
    return items


@cache
def commands() -> dict[str, Command]:
    """Each config-built command's parameter model and options (imported on first use: --help stays fast)."""
    from flows.generate import GenerateParams
    from flows.metrics import METRICS
    from flows.pipeline import PipelineParams
    from flows.rescore import RescoreParams
    from flows.score import ScoreParams
    from flows.stress import StressParams

    pipeline = Command(PipelineParams, [*PIPELINE, *metric_options(METRICS), *PIPELINE_RUNTIME],
                       adjust=pipeline_assignments)
    return {
        "run": pipeline,
        "bench quality": pipeline,
        "score": Command(ScoreParams, [
            *WITH_RUN,
            Option("--pack", "pack"),
            Option("--pack-digest", "pack_digest"),
            Option("--no-leaderboard", "leaderboard", const=False, help="do not record this scoring on the run's "
                                                                        "leaderboard"),
            Option("--refresh", "refresh", const=True),
            Option("--ftc", "ftc", const={}, help="also compute FTC of every source's explanations (NLI; the "
                                                  "defaults of `larev ftc`)"),
            Option("--addtext", "addtext", const={}, help="also run the AddText stress test of every metric on "
                                                          "every source (the defaults of `larev addtext`)"),
            Option("--degradations", "degradations", const=True),
            *SCALE_OUT]),
        "generate": Command(GenerateParams, generate_options(), adjust=generate_assignments),
        "rescore": Command(RescoreParams, [
            Option("--run", "run"), Option("--inbox", "inbox"), Option("--settle-seconds", "settle_seconds"),
            Option("--column-map", "column_map"), *READING, Option("--device", "device"), *SCALE_OUT]),
        "ftc": Command(StressParams, [
            *STRESS_COMMON,
            Option("--extractor", "ftc.extractor"), Option("--llm-model", "ftc.llm_model"),
            Option("--task-model", "ftc.task_model"), Option("--alpha", "ftc.alpha")],
            presets={"name": "ftc", "addtext": None}),
        "addtext": Command(StressParams, [
            *STRESS_COMMON,
            Option("--kinds", "addtext.kinds"), Option("--positions", "addtext.positions"),
            Option("--seed", "addtext.seed"), Option("--rand-tokens", "addtext.n_rand_tokens"),
            Option("--corpus", "addtext.wiki_corpus")],
            presets={"name": "addtext", "ftc": None}),
    }


def _server_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default="auto",
                   help="Prefect API (default: %(default)s): auto (PREFECT_API_URL when set, else local), local (the "
                        "background server with the UI on 127.0.0.1:4200, or the port LAREV_SERVER_PORT names, started "
                        "if down: every run shows up in the UI), temporary (a throwaway server that lives as long as "
                        "the command), or an API URL")


def _seed_deployment_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed-deployment", default=None, metavar="FLOW/DEPLOYMENT",
                   help="run every seed at once as a flow run of this deployment of the benchmark-seed flow on its "
                        "work pool (e.g. benchmark-seed/benchmark-seed; its workers must see the same artifact "
                        "store); default: the seeds one after another, here")


CACHE_ENV = "LAREV_CACHE_DIR"


#: the project's packages whose source the options are made from
SOURCE_PACKAGES = ("larev", "tasks", "flows", "storage")


def source_digest() -> str:
    """sha256 over the project's Python sources (path and bytes of every module of SOURCE_PACKAGES)."""
    import hashlib

    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for package in SOURCE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def snapshot_path(digest: str) -> Path:
    """Where the snapshot of the source with `digest` is kept (module docstring)."""
    root = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "larev"
    return Path(root) / f"cli-options-{digest[:16]}.json"


@cache
def snapshot() -> dict:
    """{"commands": {key: option specs}, "metric_names": [...], "source": digest}: the kept one of today's source,
    else made now from the models and kept (a cache that cannot be written costs only the next call's speed)."""
    digest = source_digest()
    path = snapshot_path(digest)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("source") == digest:
            return saved
    except (OSError, ValueError):
        pass
    made = live_snapshot()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(made, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    return made


def live_snapshot() -> dict:
    """The snapshot as the parameter models and the registry give it now (imports them)."""
    from flows.metrics import METRICS

    return {"commands": {key: option_specs(command) for key, command in commands().items()},
            "metric_names": [name for m in METRICS for name in m.names()], "source": source_digest()}


def _config_command(sub, name: str, key: str, **kwargs) -> argparse.ArgumentParser:
    p = sub.add_parser(name, **kwargs)
    add_options(p, snapshot()["commands"][key])
    p.set_defaults(params_command=key)
    return p


def metric_options(metrics) -> list[Option]:
    """Each metric's own switches (its `cli_options`), bound to its section of the pipeline parameters."""
    return [Option(o.flag, f"{m.section}.{o.field}", help=o.help, **({"const": o.const} if o.is_switch else {}))
            for m in metrics for o in m.cli_options]


def metric_names() -> list[str]:
    """What `--metrics` accepts: the score names of every registered metric (flows/metrics.py), in order, as the
    snapshot holds them."""
    return list(snapshot()["metric_names"])


def _metric_list(text: str) -> list[str]:
    """An argparse type: comma-separated metric names, each one of `metric_names()`."""
    known = metric_names()
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown metric(s) {unknown or [text]}; choose from {', '.join(known)}")
    return names


def _report_rows(text: str) -> tuple[str, slice]:
    """An argparse type: NAME=START:STOP, a named slice of positions in the run's test split."""
    from larev.data.sources import parse_slice
    from larev.errors import ConfigError

    name, sep, rows = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=START:STOP (e.g. tune=:2000), got {text!r}")
    try:
        return name, parse_slice(rows)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int_list(text: str) -> list[int]:
    """An argparse type: comma-separated integers."""
    try:
        return [int(part) for part in _comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


def _at_least(minimum: int):
    """An argparse type: an integer >= minimum (checked while parsing, before any server starts)."""
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return check


def _share(text: str) -> float:
    """An argparse type: a share between 0 and 1 (`larev leaderboard --min-share`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _steps_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--steps", action="store_true",
                         help="after the verdict, list every step with its time and whether it ran or came from cache")


def build_parser() -> argparse.ArgumentParser:
    import flows.cli.commands as cmd

    parser = argparse.ArgumentParser(prog="larev", description="Leakage-robust evaluation of free-text rationales")
    parser.add_argument("-v", "--verbose", action="store_true", help="Prefect's own INFO logs too")
    sub = parser.add_subparsers(dest="command", required=True)

    run = _config_command(sub, "run", "run", help="run the pipeline (demo data by default)")
    _server_option(run)
    _steps_option(run)
    run.set_defaults(func=cmd.run)

    score = _config_command(sub, "score", "score", help="score a rationale file with a finished run's evaluators")
    _server_option(score)
    _steps_option(score)
    score.set_defaults(func=cmd.score)

    ftc = _config_command(sub, "ftc", "ftc", help="FTC faithfulness of NLI explanations: counterfactual hypotheses "
                                                  "from each explanation's relation, judged by a task model")
    _server_option(ftc)
    ftc.set_defaults(func=cmd.ftc)

    addtext = _config_command(sub, "addtext", "addtext", help="AddText stress test: irrelevant text added to each "
                                                              "rationale, scored with every metric")
    _server_option(addtext)
    addtext.set_defaults(func=cmd.addtext)

    generate = _config_command(sub, "generate", "generate",
                               help="write a rationale file for a run's test split, one source per generator: "
                                    "trained here (graded budgets, known defects), Gemini or a Hugging Face model")
    _server_option(generate)
    _steps_option(generate)
    generate.set_defaults(func=cmd.generate)

    rescore = _config_command(sub, "rescore", "rescore",
                              help="score the new rationale files of an inbox (folder or s3://), once")
    _server_option(rescore)
    rescore.set_defaults(func=cmd.rescore)

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    quality = _config_command(bench, "quality", "bench quality",
                              help="every metric (REV, LAREV, RORA, RQ, LAS) on one train/test pair; results.json")
    quality.add_argument("--out", required=True,
                         help="directory for results.json, results.md, results.csv (intervals), separations.png")
    quality.add_argument("--bootstrap", type=int, default=1000,
                         help="bootstrap resamples for the 95%% intervals over test rows (0 = none)")
    quality.add_argument("--from-run", default=None,
                         help="rebuild the outputs from this finished run directory instead of running")
    quality.add_argument("--no-stress", action="store_true",
                         help="skip FTC and the AddText stress test on the gold rationales")
    quality.add_argument("--seeds", type=_at_least(1), default=1,
                         help="run the protocol this many times, seed offsets 0..N-1 on every model, data-order, "
                              "paraphraser and probe seed (default: %(default)s); results.json then holds means "
                              "over seeds with their sd, and each seed's outputs go to OUT/seed-<i>. The stress "
                              "tests run on seed 0 only")
    quality.add_argument("--metrics", type=_metric_list, default=None,
                         help=f"train and score only these metrics' steps, comma-separated from "
                              f"{', '.join(metric_names())} (default: all). REV always runs (LAREV is scored "
                              "against its phi_base); metrics that share a parameter section (rora, rq and las: "
                              "RORA's models) run together, so naming one runs them all")
    quality.add_argument("--controls", action="store_true",
                         help="also train and score LAREV's controls with its estimator, same seeds: erm_envs (phi_LA "
                              "by ERM over the same environments, no IRM, no probe), phi (REV's phi in phi_LA's "
                              "place) and r_only (an evaluator reading r without b); results.json's `controls`")
    quality.add_argument("--first-seed", type=_at_least(0), default=0,
                         help="the first seed offset (default: %(default)s): --first-seed 3 --seeds 2 adds seeds 3 "
                              "and 4 to a study in the same OUT; results.json covers every seed-<i> there")
    quality.add_argument("--report-rows", type=_report_rows, action="append", default=None, metavar="NAME=START:STOP",
                         help="also write the results of these test rows alone (positions in the run's test split) "
                              "to OUT/NAME (per seed OUT/NAME/seed-<i>), repeatable: one training scored on a "
                              "tuning split and a test split, e.g. --test-rows 6000: --report-rows tune=:2000 "
                              "--report-rows test=2000:")
    quality.add_argument("--human", action="append", default=None, metavar="ANNOTATIONS",
                         help="an annotation file (repeatable): after the run, `larev bench human` on it, into --out")
    _seed_deployment_option(quality)
    _server_option(quality)
    quality.set_defaults(func=cmd.bench_quality)

    human = bench.add_parser("human", help="agreement of a finished run's metrics with human judgements of "
                                           "rationales; human.json, human.md, human.png")
    human.add_argument("--run", required=True, help="a finished run directory (its task must match the files')")
    human.add_argument("--annotations", action="append", required=True, metavar="FILE",
                       help="fine-grained judgements (new_info, supports_label) or acceptability votes (acceptable, "
                            "candidate) of explanations, e.g. ../shared/data/human/cqa_fine_grained.parquet "
                            "(repeatable: one file of each kind)")
    human.add_argument("--out", required=True, help="directory for human.json, human.md, human.png, skipped.csv")
    human.add_argument("--bootstrap", type=_at_least(0), default=1000,
                       help="bootstrap resamples over instances for the intervals (default: %(default)s)")
    human.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    human.add_argument("--no-progress", action="store_true", help="no progress bars")
    human.add_argument("--refresh", action="store_true", help="recompute every step, cached or not")
    _server_option(human)
    human.set_defaults(func=cmd.bench_human)

    validity = bench.add_parser("validity", help="every scorer on human judgements, perturbations no scorer trains "
                                                 "on and the variants, as protocols/validity.yaml fixes them; "
                                                 "results.json, results.md, results.png")
    validity.add_argument("--protocol", default="protocols/validity.yaml", help="the protocol file (default: "
                                                                                "%(default)s)")
    validity.add_argument("--task", choices=("nli", "qa"), default="nli", help="the protocol's task")
    validity.add_argument("--split", choices=("tune", "report"), default="tune",
                          help="tune (choices are made on it) or report (read once per decision; the run appends "
                               "its line to the ledger)")
    validity.add_argument("--out", required=True, help="directory for results.json, results.md, results.png")
    validity.add_argument("--seeds", type=_int_list, default=None,
                          help="a subset of the protocol's seeds, e.g. 0,1 (results say so); default: all")
    validity.add_argument("--metrics", type=_comma_list, default=None,
                          help="a subset of the protocol's metrics, e.g. rev,larev (results marked partial)")
    validity.add_argument("--human", action="append", default=[], metavar="FILE",
                          help="another annotation file of the task's layout, split by instance as the protocol's "
                               "(repeatable)")
    validity.add_argument("--candidates", type=_comma_list, default=None, metavar="NAME,...",
                          help="tune split: only these decision candidates (the others screened out on fewer "
                               "seeds; results.json says which); default: every one")
    validity.add_argument("--test-limit", type=_at_least(5), default=None,
                          help="at most this many of the split's rows (a quick look; results marked partial)")
    validity.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                          help="a pipeline setting by dotted path, VALUE read as YAML (results marked partial)")
    validity.add_argument("--store", default=".larev/store", help="artifact store (default: %(default)s)")
    validity.add_argument("--run-dir", default="runs", help="where each seed's run goes (default: %(default)s)")
    validity.add_argument("--ledger", default="protocols/ledger.jsonl",
                          help="the report split's ledger (default: %(default)s)")
    validity.add_argument("--beside", default=None, metavar="RESULTS_JSON",
                          help="report split: the tune run's results.json of the same protocol and task, set beside "
                               "this run's in results.md (e.g. docs/validity/nli-tune.json)")
    validity.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    validity.add_argument("--no-progress", action="store_true", help="no progress bars")
    _seed_deployment_option(validity)
    _server_option(validity)
    validity.set_defaults(func=cmd.bench_validity)

    speed = bench.add_parser("speed", help="speed ratios measured side by side in one run; speed.json")
    speed.add_argument("--out", required=True, help="directory for speed.json")
    speed.add_argument("--skip-demo", action="store_true", help="skip the cold / cached demo runs")
    speed.add_argument("--esnli-results", action="append", default=None, metavar="RESULTS_JSON",
                       help="a `larev bench quality` results.json on e-SNLI (repeatable): its wall time per seed is "
                            "esnli_seed_minutes when it ran every metric, esnli_rev_larev_seed_minutes when it ran "
                            "--metrics rev,larev")
    speed.add_argument("--cose-results", action="append", default=None, metavar="RESULTS_JSON",
                       help="the same on CoS-E: cose_seed_minutes / cose_rev_larev_seed_minutes (e.g. a "
                            "--backbone minilm-frozen run, issue 35)")
    _server_option(speed)
    speed.set_defaults(func=cmd.bench_speed)

    scale = bench.add_parser("scale", help="score throughput in-process vs sharded on 1, 2, ... Dask workers")
    scale.add_argument("--run", default=None,
                       help="a finished run whose evaluators score (default: train a quick REV + LAREV demo run)")
    scale.add_argument("--rows", type=int, default=20_000, help="rationale rows to score (default 20,000)")
    scale.add_argument("--shard-rows", type=int, default=2_500, help="rows per shard (default 2,500)")
    scale.add_argument("--workers", default="1,2", help="comma-separated LocalCluster sizes (default 1,2)")
    scale.add_argument("--out", default="bench/scale", help="where scale.json and the rationale file go")
    _server_option(scale)
    scale.set_defaults(func=cmd.bench_scale)

    memory = bench.add_parser("memory", help="peak memory of larev score, whole file vs shards, on growing files")
    memory.add_argument("--run", default=None, help="a finished run (default: train a small REV-only demo run)")
    memory.add_argument("--rows", default="50000,200000", help="comma-separated file sizes (default 50000,200000)")
    memory.add_argument("--shard-rows", type=int, default=10_000, help="rows per shard (default 10,000)")
    memory.add_argument("--out", default="bench/memory", help="where memory.json goes")
    _server_option(memory)
    memory.set_defaults(func=cmd.bench_memory)

    gpu = bench.add_parser("gpu", help="the GPU check: REV's and LAREV's core on one device and precision, each "
                                       "step timed, with a run's resolved settings (no Prefect server)")
    gpu_commands = gpu.add_subparsers(dest="gpu", required=True)
    gpu_run = gpu_commands.add_parser("run", help="train and score on this device; run.json, scores, models")
    gpu_fixed = gpu_commands.add_parser("fixed", help="score and run IG with another run's saved models here")
    for p in (gpu_run, gpu_fixed):
        p.add_argument("--data", required=True, help="the examples file (e.g. ../shared/data/esnli/dev.parquet)")
        p.add_argument("--task", choices=("nli", "qa"), default="nli", help="the file's task (default: %(default)s)")
        p.add_argument("--train-rows", default=":2000", help="row slice of the training rows (default %(default)s)")
        p.add_argument("--test-rows", default="8000:8500", help="row slice of the test rows (default %(default)s)")
        p.add_argument("--backbone", default="embedded", help="the evaluators' backbone (default %(default)s)")
        p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where it runs (default cpu)")
        p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                       help="bf16: autocast on CUDA for training and scoring (ignored on CPU)")
        p.add_argument("--epochs", type=_at_least(1), default=3, help="passes over the training rows (default 3)")
        p.add_argument("--ig-steps", type=_at_least(1), default=None, help="IG steps (default: the resolved one)")
        p.add_argument("--seed", type=_at_least(0), default=0, help="seed offset (fixed: the models' run's)")
        p.add_argument("--out", required=True, help="the run's folder")
    gpu_run.set_defaults(func=cmd.bench_gpu_run)
    gpu_fixed.add_argument("--models", required=True, help="a run's models/ folder")
    gpu_fixed.set_defaults(func=cmd.bench_gpu_fixed)
    gpu_compare = gpu_commands.add_parser("compare", help="CPU vs GPU runs: seconds per step and score agreement")
    gpu_compare.add_argument("cpu", help="the CPU run's folder")
    gpu_compare.add_argument("--gpu", action="append", required=True, help="a GPU run's folder (repeatable)")
    gpu_compare.add_argument("--fixed", action="append", default=None,
                             help="the `fixed` folder of the GPU run given at the same place ('-': none)")
    gpu_compare.add_argument("--out", default=None, help="a Markdown file for the table and figures")
    gpu_compare.set_defaults(func=cmd.bench_gpu_compare)

    service = sub.add_parser("service", help="run larev as a Prefect service").add_subparsers(dest="service",
                                                                                             required=True)
    setup = service.add_parser("setup", help="on the Prefect API (PREFECT_API_URL, or --server): create the work "
                                             "pools, the crash-detection automation, and every deployment")
    setup.add_argument("--no-deploy", action="store_true", help="pools and crash detection only")
    setup.add_argument("--crash-after", type=int, default=None,
                       help="seconds without a heartbeat before a running flow run is marked Crashed (default 90)")
    _server_option(setup)
    setup.set_defaults(func=cmd.service_setup)

    cache = sub.add_parser("cache", help="the step cache of an artifact store").add_subparsers(dest="cache",
                                                                                                required=True)
    verify = cache.add_parser("verify", help="which cached step entries today's code still reaches: current, "
                                             "upstream-stale (reads a stale step's output), stale (the step reruns; "
                                             "the modules that changed), unverifiable (no step record)")
    verify.add_argument("--store", default=".larev/store",
                        help="artifact store: a local path or s3://bucket/prefix (default: %(default)s)")
    verify.add_argument("--prune", action="store_true",
                        help="delete the stale and unverifiable entries with their outputs (a finished run whose "
                             "models go can no longer score new rationales until it is run again)")
    verify.add_argument("--json", action="store_true", help="print every entry as JSON")
    verify.set_defaults(func=cmd.cache_verify)

    compare = sub.add_parser("compare", help="which rationale source is better: paired differences of sources "
                                             "scored by a run's evaluators, with intervals over instances and "
                                             "seeds; compare.json / compare.md / compare.png")
    compare.add_argument("sources", nargs="+", metavar="SOURCE",
                         help="two or more, in order: a source of the run (gold, leaky, ...), an earlier `larev "
                              "score --name NAME` output (NAME or NAME:SOURCE), or a rationale file (scored first)")
    compare.add_argument("--run", dest="runs", action="append", required=True,
                         help="a finished run directory; repeat it for the evaluator seeds of one protocol "
                              "(bench quality --seeds N makes NAME-seed0, NAME-seed1, ...)")
    compare.add_argument("--name", default="compare", help="outputs go to RUN/compare-NAME (default: %(default)s)")
    compare.add_argument("--out", default=None, help="output directory instead of RUN/compare-NAME")
    compare.add_argument("--metrics", type=_comma_list, default=None,
                         help="compare only these metrics, comma-separated (default: every metric whose score is "
                              "a mean over instances)")
    compare.add_argument("--level", type=float, default=0.95, help="confidence level (default: %(default)s)")
    compare.add_argument("--n-boot", type=int, default=2000,
                         help="bootstrap resamples over instances (default: %(default)s)")
    compare.add_argument("--no-by-label", dest="by_label", action="store_false",
                         help="skip the per-label breakdown")
    compare.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                         help="where rationale files are scored (default: %(default)s)")
    _server_option(compare)
    compare.set_defaults(func=cmd.compare)

    board = sub.add_parser("leaderboard", help="a run's leaderboard: every source ever scored with its evaluators "
                                               "(its own variants, `larev score` files, inbox files), ranked per "
                                               "metric; rewrites RUN/leaderboard.parquet and .md")
    board.add_argument("run", help="the run directory")
    board.add_argument("--metric", default=None, help="print only this metric's table")
    board.add_argument("--min-share", type=_share, default=0.5,  # larev.leaderboard.MIN_SHARE
                       help="the share of gold's ids an entry must be scored on to be ranked; one scored on fewer is "
                            "listed apart (default: %(default)s)")
    board.set_defaults(func=cmd.leaderboard)

    pack = sub.add_parser("pack", help="write a finished run's trained evaluators, tokenizer, configs and run.json "
                                       "to one file with a digest of every file (safetensors, nothing pickled); "
                                       "`larev score --pack FILE` scores with it without training")
    pack.add_argument("--run", required=True, help="the run directory")
    pack.add_argument("--out", required=True, help="the pack file to write (a tar; e.g. evaluators.larev.tar)")
    pack.set_defaults(func=cmd.pack)

    data = sub.add_parser("data", help="the real datasets (e-SNLI, CoS-E, human judgements) from their authors' "
                                       "releases").add_subparsers(dest="data", required=True)
    get = data.add_parser("get", help="download a release, check each file against the lock file, convert it to "
                                      "larev's columns (docs/data.md) and say where the files went")
    get.add_argument("name", choices=("esnli", "cose", "human"),
                     help="esnli (train, dev, test), cose (v1.0 train, dev) or human (Wiegreffe et al.'s judgements)")
    get.add_argument("--out", default="data",
                     help="the data folder (default: %(default)s): NAME/*.parquet, raw/NAME/ (the downloads) and "
                          "sources.lock.json; set LAREV_DATA to it for the Makefile's benchmarks")
    get.add_argument("--only", type=_comma_list, default=None, metavar="OUTPUT,...",
                     help="only these outputs: esnli train, dev, test; cose train, dev; human snli_acceptability, "
                          "cqa_acceptability, cqa_fine_grained, snli_fine_grained (default: all)")
    get.add_argument("--form", default=None,
                     help="esnli: preprocessed (default: the lower-cased, tokenized release the committed results "
                          "were computed on) or raw (the CSVs' original text); cose: raw (default: the unprocessed "
                          "explanations) or processed")
    get.add_argument("--from", dest="source_dir", default=None, metavar="DIR",
                     help="convert files already downloaded, kept in DIR under their published paths (or DIR/NAME/"
                          "...: a data folder's raw/), instead of fetching them")
    get.add_argument("--mirror", default=None, metavar="URL",
                     help="fetch from URL/NAME/<published path> instead of the authors' URLs (default: the "
                          "LAREV_DATA_MIRROR variable when set)")
    get.add_argument("--accept-changed", action="store_true",
                     help="convert a source file whose sha256 differs from the one the lock file recorded, and "
                          "record the new one (default: refuse it)")
    get.add_argument("--no-progress", action="store_true", help="no progress bars")
    get.set_defaults(func=cmd.data_get)

    show = sub.add_parser("show", help="print a run's results, or a metric's card (--metric)")
    show.add_argument("run", nargs="?", default=None, help="the run directory (not with --metric / --write-cards)")
    show.add_argument("--report", action="store_true", help="also print report.md")
    show.add_argument("--metric", default=None, metavar="NAME",
                      help=f"print this metric's card instead (docs/metrics/NAME.md: formula, how to read a score, "
                           f"what it was measured on, failure modes, signature, options): one of "
                           f"{', '.join(metric_names())}")
    show.add_argument("--write-cards", default=None, metavar="DIR",
                      help="write every registered metric's card and their index into DIR, generated from the "
                           "registry and larev/cards/texts/ (the committed ones: --write-cards docs/metrics)")
    show.add_argument("--write-figures", action="store_true",
                      help="rewrite every marked figure of README.md, docs/results.md, docs/validity.md and "
                           "docs/defaults.md from the committed result it names (run from the repository root)")
    show.set_defaults(func=cmd.show)
    return parser
