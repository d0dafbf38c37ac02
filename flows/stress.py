"""FTC and the AddText stress test on their own: a finished run's evaluators, on its rationale variants or on a
user's rationale file."""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field, model_validator

from flows.score import finished_run, read_run, stress_steps
from larev.stress.addtext.config import AddTextConfig
from larev.config import Device, ScoreConfig
from larev.data.logged import RationaleReading
from larev.digests import file_digest
from larev.errors import ConfigError
from larev.stress.ftc.config import FtcConfig
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.runner import StepRunner
from tasks.data import load_rationales
from tasks.export import export_run
from tasks.reports import publish_stress
from tasks.stress import ftc_problem

log = logging.getLogger("larev.steps")


class StressParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str = Field(..., description="a finished pipeline run's directory (holding run.json)")
    rationales: str | None = Field(None, description="rationale file (id, source, rationale[, label]); empty: the "
                                                     "run's own rationale variants")
    name: str = Field("stress", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      description="outputs go to RUN/NAME/ (RUN: the --run directory)")
    column_map: dict[str, str] = Field(default_factory=dict, description="file column -> canonical column")
    reading: RationaleReading = Field(default_factory=RationaleReading,
                                      description="how a logged file (lm-eval sample log, JSON lines) and "
                                                  "reasoning traces (think tags) are read")
    sources: list[str] | None = Field(None, description="rationale sources to look at, '*' for all; empty: 'gold' "
                                                        "of the run's variants, every source of a file")
    ftc: FtcConfig | None = Field(default_factory=FtcConfig, description="FTC options; empty: no FTC (skipped with "
                                                                         "a warning on runs it does not apply to "
                                                                         "when AddText is on)")
    addtext: AddTextConfig | None = Field(default_factory=AddTextConfig, description="AddText options; empty: none")
    score: ScoreConfig | None = Field(None, description="scoring options for AddText; default: the run's own")
    device: Device = Field("auto", description="auto (CUDA when present), cpu or cuda")
    progress: bool = Field(True, description="progress bars on long steps")

    @model_validator(mode="after")
    def _something_to_do(self):
        if self.ftc is None and self.addtext is None:
            raise ValueError("neither ftc nor addtext is set: nothing to do")
        return self


@flow(name="stress-test", flow_run_name="stress-{params.name}", log_prints=True)
def stress_test(params: StressParams) -> dict:
    """FTC faithfulness of NLI explanations and the AddText stress test of every metric the run trained."""
    run = read_run(params.run)
    refs = {k: ArtifactRef(**v) for k, v in run["artifacts"].items()}
    store = ArtifactStore(run["artifact_root"])
    ftc = params.ftc
    problem = ftc_problem(store, refs, ftc) if ftc is not None else None
    if problem and params.addtext is None:
        raise ConfigError(problem)
    if problem:
        log.warning("%s: FTC skipped, AddText runs", problem)
        ftc = None
    sources = params.sources or (["*"] if params.rationales else ["gold"])
    with StepRunner(store, progress=params.progress) as steps:
        rationales = refs["rationales"]
        if params.rationales:
            rationales = steps.run(load_rationales, params.rationales, file_digest(params.rationales),
                                   refs["examples"], params.column_map or None, params.reading)
        title = Path(params.rationales).name if params.rationales else f"run {Path(params.run).name}"
        trained = finished_run(steps, run, refs, score=params.score, device=params.device)
        out = stress_steps(trained, refs, rationales, ftc=ftc, addtext=params.addtext, sources=tuple(sources),
                           title=title)
    publish_stress(store, out, name=f"{Path(params.run).name}-{params.name}")
    run_dir = export_run(store, str(Path(params.run) / params.name), out, params.model_dump(mode="json"))
    return {"run_dir": run_dir, "refs": out, "steps": steps.records}
