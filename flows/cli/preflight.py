"""The command line's input checks, run before any Prefect server or flow starts: a bad file fails in about a
second with one clear message (larev.errors), instead of after a server start-up and inside a flow run's traceback.
The checks themselves are the flows' own (flows/inputs.py); this module picks the ones a command needs.
"""

from __future__ import annotations

import argparse

from flows.inputs import compare_inputs, generate_inputs, human_inputs, pipeline_inputs, score_inputs, validity_inputs


def check_inputs(args: argparse.Namespace) -> None:
    """Validate the input files of the command in `args` (nothing to check: no-op)."""
    key = getattr(args, "params_command", None)
    if key in ("run", "bench quality") and not getattr(args, "from_run", None):
        task = pipeline_inputs(args.params, with_task=bool(getattr(args, "human", None)))
        if getattr(args, "human", None):
            from larev.human.annotations import check_annotations

            check_annotations(f"this {task.upper()} run", args.human, task)
    elif key == "score":
        score_inputs(args.params)
    elif key == "generate":
        generate_inputs(args.params)
    elif args.command == "bench" and getattr(args, "bench", None) == "human":
        human_inputs(args.run, args.annotations)
    elif args.command == "bench" and getattr(args, "bench", None) == "validity":
        args.validity_params = validity_params(args)
        validity_inputs(args.validity_params)
    elif args.command == "compare":
        args.compare_params = compare_params(args)
        compare_inputs(args.compare_params.runs, args.compare_params.sources, args.compare_params.metrics)


def compare_params(args: argparse.Namespace):
    """`larev compare`'s options as the flow's validated parameters (a bad level or name fails here)."""
    from tasks.compare import CompareParams
    from larev.compare import CompareConfig

    return CompareParams(runs=args.runs, sources=args.sources, name=args.name, out=args.out, metrics=args.metrics,
                         device=args.device, compare=CompareConfig(level=args.level, n_boot=args.n_boot,
                                                                   by_label=args.by_label))


def validity_params(args: argparse.Namespace):
    """`larev bench validity`'s options as the flow's validated parameters; `--set` is read as `larev run --set`
    reads it (the path checked against the pipeline's parameters, the value as YAML)."""
    from flows.pipeline import PipelineParams
    from flows.settings import parse_set
    from flows.validity import ValidityParams

    overrides = {a.path: a.value for a in (parse_set(PipelineParams, item) for item in args.overrides)}
    return ValidityParams(protocol=args.protocol, task=args.task, split=args.split, out=args.out, seeds=args.seeds,
                          metrics=args.metrics, human=args.human, candidates=args.candidates,
                          test_limit=args.test_limit, overrides=overrides,
                          artifact_root=args.store, run_dir=args.run_dir, ledger=args.ledger, beside=args.beside,
                          device=args.device, progress=not args.no_progress, seed_deployment=args.seed_deployment)
