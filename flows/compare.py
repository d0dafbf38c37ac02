"""Which rationale source is better? Paired comparison of sources scored by a run's evaluators (larev/compare.py).

Sources are the run's own (gold, leaky, ...), earlier `larev score` outputs, or rationale files, which are scored
first with the `score-rationales` flow (cached: a file scored before is not scored again). Several runs are read
as evaluator seeds of one protocol (`larev bench quality --seeds N` makes them): the same sources are scored in
each, and the comparison gets a seeds interval beside the one over instances. Sources whose scores' signatures say
they were made differently (other evaluators or settings; across runs, anything but the seed) are refused before
any comparison (larev/compare.py).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.states import Failed

from flows.score import ScoreParams, score_rationales
from larev.compare import NotComparable
from tasks.compare import CompareParams, compare_and_write, is_rationale_file, output_name

__all__ = ["CompareParams", "compare_rationale_sources"]


@flow(name="compare-sources", flow_run_name="compare-{params.name}", log_prints=True)
def compare_rationale_sources(params: CompareParams) -> dict:
    """Score the files among the sources in every run, check the sources' signatures, then compare every pair of
    sources."""
    refs = []
    for ref in params.sources:
        if is_rationale_file(ref):
            name = output_name(ref, params.runs)
            for run in params.runs:
                score_rationales(ScoreParams(run=run, rationales=ref, name=name, device=params.device,
                                             progress=params.progress))
            refs.append(name)
        else:
            refs.append(ref)
    out = params.out or str(Path(params.runs[0]) / f"compare-{params.name}")
    try:  # checks the signatures before it writes anything
        result = compare_and_write(params.runs, refs, out, params.compare, params.metrics, params.name)
    except NotComparable as exc:
        # the run's state carries the one-line reason (the UI shows it; Prefect logs the final state at INFO) and
        # a Python caller gets the error itself; no error is logged with a traceback, so the command line's one
        # `error:` line is the only one
        return Failed(message=str(exc), data=exc.with_traceback(None))
    for line in result["warnings"]:
        print(f"warning: {line}")
    for line in result["verdicts"]:
        print(line)
    return result
