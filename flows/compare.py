"""Which rationale source is better? Paired comparison of sources scored by a run's evaluators (larev/compare.py).

Sources are the run's own (gold, leaky, ...), earlier `larev score` outputs, or rationale files, which are scored
first with the `score-rationales` flow (cached: a file scored before is not scored again). Several runs are read
as evaluator seeds of one protocol (`larev bench quality --seeds N` makes them): the same sources are scored in
each, and the comparison gets a seeds interval beside the one over instances.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.score import ScoreParams, score_rationales
from tasks.compare import CompareParams, compare_and_write, is_rationale_file, output_name

__all__ = ["CompareParams", "compare_rationale_sources"]


@flow(name="compare-sources", flow_run_name="compare-{params.name}", log_prints=True)
def compare_rationale_sources(params: CompareParams) -> dict:
    """Score the files among the sources in every run, then compare every pair of sources."""
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
    result = compare_and_write(params.runs, refs, out, params.compare, params.metrics, params.name)
    for line in result["verdicts"]:
        print(line)
    return result
