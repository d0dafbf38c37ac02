"""Which rationale source is better? Paired comparison of sources scored by a run's evaluators (larev/compare.py).

Sources are the run's own (gold, leaky, ...), earlier `larev score` outputs, or rationale files, which are scored
first with the `score-rationales` flow (cached: a file scored before is not scored again). Several runs are read
as evaluator seeds of one protocol (`larev bench quality --seeds N` makes them): the same sources are scored in
each, and the comparison gets a seeds interval beside the one over instances.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from flows.score import ScoreParams, score_rationales
from larev.compare import CompareConfig
from larev.config import Device
from larev.data.files import SUFFIXES
from larev.data.variants import VARIANTS
from larev.digests import file_digest
from larev.run_files import RUN_FILE
from tasks.compare import compare_and_write


class CompareParams(BaseModel):
    """Parameters of one comparison (the Prefect UI renders them as a form)."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str] = Field(..., min_length=1, description="finished run directories; several: evaluator seeds "
                                                           "of one protocol, compared on the same sources")
    sources: list[str] = Field(..., min_length=2, description="what to compare, in order (A, B, ...): a source "
                                                              "of the run (gold), an earlier `larev score` output "
                                                              "(NAME or NAME:SOURCE), or a rationale file")
    name: str = Field("compare", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      description="outputs go to RUN/compare-NAME/ (the first run) unless `out` is set")
    out: str | None = Field(None, description="output directory (default: RUN/compare-NAME)")
    metrics: list[str] | None = Field(None, description="compare only these metrics (default: every metric whose "
                                                        "score is a mean over instances)")
    compare: CompareConfig = Field(default_factory=CompareConfig)
    device: Device = Field("auto", description="where files are scored: auto (CUDA when present), cpu or cuda")
    progress: bool = Field(True, description="progress bars while files are scored")


def is_rationale_file(ref: str) -> bool:
    """A ref that names an existing rationale file (scored first) rather than a source of the run."""
    path = Path(ref)
    return path.suffix.lower() in SUFFIXES and path.is_file()


def output_name(path: str, runs: list[str]) -> str:
    """The `larev score --name` a compared file is scored under: its stem, made a valid name; with the start of
    its digest added when the stem is one of the runs' own variants (`leaky.csv` is not the variant `leaky`) or an
    earlier output of that name came from another file."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(path).stem).strip("-.") or "file"
    stem = stem if stem[0].isalnum() else f"f{stem}"
    taken = stem in VARIANTS or any(_scored_from_elsewhere(Path(run) / stem, path) for run in runs)
    return f"{stem}-{file_digest(path)[:8]}" if taken else stem


def _scored_from_elsewhere(output: Path, path: str) -> bool:
    """Whether the score output `output` exists and was made from another file than `path`."""
    record = output / RUN_FILE
    if not record.is_file():
        return False
    scored = json.loads(record.read_text()).get("params", {}).get("rationales")
    return scored is None or Path(scored).resolve() != Path(path).resolve()


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
