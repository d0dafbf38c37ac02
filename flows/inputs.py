"""Input checks, run before any step: a bad file fails in about a second with one clear message (larev.errors).

The flows run them first (`flow_input_check`), whether started from the command line, the UI or a schedule: a bad
file fails the flow run before any step with the one message as its state and a one-line error log, not a
traceback printed twice. The command line runs the same checks before it starts a Prefect server
(flows/cli/preflight.py). Each check reads what it checks the way the flow will: the same loaders, the same column
map, the run's own test split.
"""

from __future__ import annotations


def flow_input_check(check, *args):
    """Inside a flow: run `check(*args)`; on bad input (a LarevError) log its message as the run's one error line
    and return a Failed state that carries it, else None. The flow returns that state at once: the UI shows the
    message, and a Python caller of the flow gets the LarevError itself (the state's data), not Prefect's
    FailedRun."""
    from prefect import get_run_logger
    from prefect.states import Failed

    from larev.errors import LarevError

    try:
        check(*args)
    except LarevError as exc:
        get_run_logger().error("%s", exc)
        return Failed(message=str(exc), data=exc.with_traceback(None))  # the UI shows the message, not frames
    return None


def pipeline_inputs(params, *, with_task: bool = False) -> str | None:
    """The backbone, the pipeline's example files (train, validation, test and their row slices) and a rationale
    file; the examples' task when they were read (always with `with_task`)."""
    import polars as pl

    from larev.data.files import load_rationales_file
    from larev.data.sources import load_data
    from larev.models.pretrained import check_backbone

    check_backbone(params.model.backbone)
    if params.data.source != "files" and not params.rationales and not with_task:
        return None
    examples = load_data(params.data)
    if params.rationales:
        load_rationales_file(params.rationales, examples.filter(pl.col("split") == "test"),
                             column_map=params.data.column_map or None)
    return examples["task"][0]


def _run_examples(run_dir: str):
    from storage import ArtifactStore
    from storage.ref import ArtifactRef
    from tasks.export import read_run

    run = read_run(run_dir)
    return ArtifactStore(run["artifact_root"]), ArtifactRef(**run["artifacts"]["examples"])


def score_inputs(params) -> None:
    """`larev score`: the run directory and the rationale file against the run's test split (a shard at a time
    when sharded, as the flow reads it); with degradations, its source names."""
    from tasks.data import check_rationale_file

    store, examples = _run_examples(params.run_dir())
    if params.pack is not None:
        from flows.packs import check_pack_fits

        check_pack_fits(params.pack, store.read_parquet(examples.key), params.rationales, params.column_map or None,
                        params.reading)
    check_rationale_file(store, examples, params.rationales, params.column_map or None,
                         shard_rows=params.scale_out.shard_rows if params.scale_out.enabled else 0,
                         reading=params.reading)
    if params.degradations:  # a source named like a degradation (SOURCE~leaky) would be read as one
        from larev.data.files import read_rationale_rows
        from larev.generate.degradations import check_source_names

        rows = read_rationale_rows(params.rationales, column_map=params.column_map or None, reading=params.reading)
        check_source_names(rows["source"].drop_nulls().unique().to_list(), file=params.rationales)


def generate_inputs(params) -> None:
    """`larev generate`: the run directory (its examples readable), or the data's example files."""
    from larev.data.sources import load_data

    if params.run is not None:
        _run_examples(params.run)
    elif params.data.source == "files":
        load_data(params.data)


def human_inputs(run_dir: str, annotations: list[str]) -> None:
    """`larev bench human`: the run directory and every annotation file (of the run's task, distinct kinds)."""
    from larev.human.annotations import check_annotations
    from tasks.data import examples_task

    store, examples = _run_examples(run_dir)
    check_annotations(run_dir, annotations, examples_task(store, examples))


def compare_inputs(runs: list[str], sources: list[str], metrics: list[str] | None = None) -> None:
    """`larev compare`: every run directory; each rationale file against each run's test split; every other
    source named in each run (a source of the run or an earlier `larev score` output), and their signatures
    (larev.compare.NotComparable: a file's are checked once the flow has scored it)."""
    from tasks.compare import check_comparable, is_rationale_file, source_scores
    from tasks.data import check_rationale_file

    for run_dir in runs:
        store, examples = _run_examples(run_dir)
        for ref in sources:
            if is_rationale_file(ref):
                check_rationale_file(store, examples, ref, None, shard_rows=0)
            else:
                source_scores(run_dir, ref)
    scored = [ref for ref in sources if not is_rationale_file(ref)]
    if scored:
        check_comparable(runs, scored, metrics)


def validity_inputs(params) -> None:
    """`larev bench validity`: the seeds, metrics, candidates and settings asked for, and the report split's need of
    a tune run beside it, before any data file is looked for; then the protocol's data and human files (and the
    caller's), and the tune run set beside it (same protocol digest and task)."""
    from larev.errors import ConfigError
    from larev.validity.protocol import (SIGNALS, check_beside_split, check_inputs, load_protocol, protocol_digest,
                                         read_beside)

    check_beside_split(params.beside, params.split)
    protocol = load_protocol(params.protocol)
    signals = sorted(path for path in params.overrides if path in SIGNALS and params.overrides[path])
    if signals:
        raise ConfigError(f"--set {', '.join(signals)}: trains scorers on texts the benchmark judges them on; turn "
                          "it on in a protocol that marks what they train on (trained_on), not by a setting")
    if params.task in protocol.tasks:  # an unknown task is check_inputs' error
        candidates = protocol.candidate_runs(params.task)
        unknown = sorted(set(params.candidates or []) - set(candidates))
        if unknown:
            raise ConfigError(f"candidates {unknown} are not decision candidates of {params.protocol} on "
                              f"{params.task} ({sorted(candidates)})")
        if params.split == "report" and not params.beside and candidates:
            raise ConfigError(f"{params.protocol} decides defaults in runs of their own on {params.task} "
                              f"({', '.join(candidates)}): the report split reads them as the tune split decided, "
                              "so give the tune run's results.json with --beside")
    check_inputs(protocol, params.protocol, params.task, params.human, params.seeds, params.metrics)
    if params.beside:
        read_beside(params.beside, protocol_digest(params.protocol), params.task, params.split)
