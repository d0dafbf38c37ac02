"""Score a rationale file with the evaluators a finished pipeline run trained."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

import polars as pl
from prefect import flow
from pydantic import BaseModel, ConfigDict, Field, model_validator

from larev.stress.addtext.config import AddTextConfig
from larev.config import BaselineConfig, Device, ScoreConfig
from larev.digests import file_digest
from larev.data.logged import RationaleReading
from larev.data.variants import VARIANTS
from larev.errors import ConfigError
from larev.generate.degradations import is_degraded
from larev.leaderboard import entries as leaderboard_entries
from larev.stress.ftc.config import FtcConfig
from flows.metrics import METRICS
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.metric import Run, run_signatures
from tasks.runtime.runner import StepRunner
from tasks.data import load_rationale_shards, load_rationales
from tasks.degradations import add_degradations, degradation_report
from tasks.export import export_run, read_run
from tasks.leaderboard import now, update_leaderboard
from tasks.reports import publish, publish_score_table, publish_stress, summarise_scores
from tasks.runtime.sharding import ScaleOutConfig
from tasks.stress import addtext_shifts, ftc_problem, local_model_digest, perturb_for_addtext, score_ftc


class ScoreParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str | None = Field(None, description="a finished pipeline run's directory (holding run.json); or `pack`")
    pack: str | None = Field(None, description="an evaluator pack (`larev pack`) to score with instead of a run: "
                                               "extracted under .larev/packs/ and checked file by file first")
    pack_digest: str | None = Field(None, pattern=r"^[0-9a-fA-F]{8,64}$",
                                    description="the pack's digest as `larev pack` printed it (or its start): a "
                                                "pack re-made whole, pack.json included, is then refused too")
    rationales: str = Field(..., description="rationale file: id, source, rationale[, label] (.parquet/.jsonl/.csv); "
                                             "or an lm-evaluation-harness sample log, or JSON lines read with "
                                             "reading.rationale_field")
    name: str = Field("scored", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      description="outputs go to RUN/NAME/ (RUN: the --run directory, or the pack's extraction); "
                                  "the name on the run's leaderboard, so not one of the run's own variants")
    column_map: dict[str, str] = Field(default_factory=dict, description="file column -> canonical column")
    reading: RationaleReading = Field(default_factory=RationaleReading,
                                      description="how a logged file (lm-eval sample log, JSON lines) and "
                                                  "reasoning traces (think tags) are read")
    score: ScoreConfig | None = Field(None, description="scoring options; default: the run's own")
    device: Device = Field("auto", description="auto (CUDA when present), cpu or cuda")
    progress: bool = Field(True, description="progress bars on long steps")
    origin: Literal["score", "inbox"] = Field("score", description="how the run's leaderboard lists this scoring: "
                                                                   "a file scored by hand, or an inbox file")
    leaderboard: bool = Field(True, description="record this scoring on the run's leaderboard")
    scale_out: ScaleOutConfig = Field(default_factory=ScaleOutConfig,
                                      description="shard large files over a Dask cluster (shard_rows > 0)")
    refresh: bool = Field(False, description="recompute every step even where a cached result exists")
    ftc: FtcConfig | None = Field(None, description="also compute FTC (NLI explanations); empty: no FTC")
    addtext: AddTextConfig | None = Field(None, description="also run the AddText stress test of every metric; "
                                                            "empty: none")
    stress_sources: list[str] = Field(["*"], min_length=1, description="rationale sources FTC and AddText look "
                                                                       "at; '*' for every source")
    degradations: bool = Field(False, description="also score each source's leaky, gold_leaky and vacuous "
                                                  "degradations (sources SOURCE~leaky, ...) and report each source "
                                                  "minus them with their SUM per metric (thesis table 5.8): "
                                                  "results.json, degradations.png; four times the rows to score")

    @model_validator(mode="after")
    def _run_or_pack(self):
        if (self.run is None) == (self.pack is None):
            raise ValueError("give exactly one of run (a finished run's directory) and pack (an evaluator pack)")
        if self.pack_digest is not None and self.pack is None:
            raise ValueError("pack_digest checks a pack: give pack too")
        if self.name in VARIANTS:
            raise ValueError(f"name {self.name!r} is one of the run's own variants ({', '.join(VARIANTS)}); its "
                             "outputs and leaderboard entry would be mistaken for them: choose another")
        return self

    def run_dir(self) -> str:
        """The run directory the evaluators are read from: `run`, or the checked extraction of `pack`."""
        if self.run is not None:
            return self.run
        from flows.packs import unpack

        return str(unpack(self.pack, expected_digest=self.pack_digest))

    @model_validator(mode="after")
    def _stress_needs_one_table(self):
        if (self.ftc or self.addtext) and self.scale_out.enabled:
            raise ValueError("ftc / addtext read the rationale table whole: drop scale_out.shard_rows, or run them "
                             "apart with `larev ftc` / `larev addtext` on a sample of the file")
        return self

    @model_validator(mode="after")
    def _degradations_need_one_table(self):
        if self.degradations and self.scale_out.enabled:
            raise ValueError("degradations pair each source's rows with its degradations' over the whole table: drop "
                             "scale_out.shard_rows, or score a sample of the file with degradations")
        return self


@flow(name="score-rationales", flow_run_name="score-{params.name}", log_prints=True)
def score_rationales(params: ScoreParams) -> dict:
    """Validate a rationale file against the run's test examples and score it with every metric the run trained.

    Sources the run has RORA / RQ / LAS models for (the built-in variants' names) use them; any other source is
    scored with the models trained on the gold rationales. With `degradations`, each source's leaky, gold_leaky and
    vacuous degradations are scored beside it (the gold rationale's models too) and the table of each source minus
    them (thesis table 5.8) goes to report.md, results.json and degradations.png; they are not leaderboard
    entries, and FTC and AddText look at the file's own sources only."""
    from flows.inputs import flow_input_check, score_inputs

    if (failed := flow_input_check(score_inputs, params)) is not None:
        return failed
    run_dir = params.run_dir()
    run = read_run(run_dir)
    refs = {k: ArtifactRef(**v) for k, v in run["artifacts"].items()}
    store = ArtifactStore(run["artifact_root"])
    problem = ftc_problem(store, refs, params.ftc) if params.ftc is not None else None
    if problem:  # before any step: a late failure would lose the scores
        raise ConfigError(problem)
    with StepRunner(store, scale_out=params.scale_out, refresh=params.refresh, progress=params.progress) as steps:
        trained = finished_run(steps, run, refs, score=params.score, device=params.device)
        digest, column_map = file_digest(params.rationales), params.column_map or None
        if params.scale_out.enabled:  # read, validated and scored a shard at a time
            rationales = steps.run(load_rationale_shards, params.rationales, digest, refs["examples"], column_map,
                                   params.scale_out.shard_rows, params.reading)
        else:
            rationales = steps.run(load_rationales, params.rationales, digest, refs["examples"], column_map,
                                   params.reading)
        scored = (steps.run(add_degradations, rationales, refs["examples"], refs["baselines"],
                            trained.baseline_config) if params.degradations else rationales)
        scores = score_all(trained, refs, scored)
        stress = stress_steps(trained, refs, rationales, ftc=params.ftc, addtext=params.addtext,
                              sources=tuple(params.stress_sources), title=Path(params.rationales).name)
        table = steps.run(degradation_report, scores) if params.degradations else {}
        report = steps.run(summarise_scores, scores, f"larev scores of {Path(params.rationales).name}",
                           [table["degradation_section"]] if table else None,
                           scoring_signatures(run, refs, params.score))
    publish(store, report["report"], name=params.name)
    publish_score_table(store, report["summary"], params.name)
    if stress:
        publish_stress(store, stress, name=params.name)
    inputs = {"rationales": scored} if isinstance(scored, ArtifactRef) else {}  # shards: in the store
    out = export_run(store, str(Path(run_dir) / params.name), {**inputs, **report, **stress, **table},
                     params.model_dump(mode="json"))
    moved = []
    if params.leaderboard:
        with store.local_copy(report["scores"].key) as scores_file:  # read lazily: a sharded file stays streamed
            # a source's degradations are probes, as the run's own variants are: not entries of their own
            own = ~is_degraded(pl.col("source")) if params.degradations else pl.lit(True)
            rows = leaderboard_entries(pl.scan_parquet(scores_file).filter(own),
                                       store.read_parquet(report["summary"].key).filter(own),
                                       origin=params.origin, output=params.name, file=Path(params.rationales).name,
                                       scored_at=now())
        moved = update_leaderboard(store, run, run_dir, rows)
        for line in moved:
            print(f"leaderboard: {line}")
    return {"run_dir": out, "steps": steps.records, "leaderboard": moved}


def scoring_signatures(run: dict, refs: dict[str, ArtifactRef], score: ScoreConfig | None = None) -> dict[str, str]:
    """The signature of every metric a finished run's models score (tasks.metric.run_signatures), from its
    run.json: its resolved parameters, with `score` in place of its scoring options when given."""
    saved = dict(run["params"])
    if score is not None:
        saved["score"] = score.model_dump(mode="json")
    return run_signatures(METRICS, refs, saved, backbone_weights=run.get("backbone_weights"),
                          data_digests=run.get("data_digests"))


def finished_run(steps: StepRunner, run: dict, refs: dict[str, ArtifactRef], *, score: ScoreConfig | None = None,
                 device: str = "auto") -> Run:
    """What the metrics read to score with a finished run's models (its run.json): its examples, baselines and
    options (`score` replaces the run's scoring options)."""
    return Run(steps=steps, examples=refs["examples"], baselines=refs["baselines"],
               baseline_config=BaselineConfig(**run["params"]["baselines"]),
               score=score or ScoreConfig(**run["params"]["score"]), device=device, tokenizer=refs.get("tokenizer"),
               saved_params=run["params"])


def score_all(run: Run, models: dict[str, ArtifactRef], rationales: ArtifactRef | list[ArtifactRef],
              label: str = "") -> list[ArtifactRef]:
    """Score tables of every metric (flows/metrics.py) whose models the run trained."""
    scoring = replace(run, label=label)
    return [table for metric in METRICS if metric.trained(models)
            for table in metric.score(scoring, models, rationales)]


def stress_steps(run: Run, refs: dict[str, ArtifactRef], rationales: ArtifactRef, *, ftc: FtcConfig | None,
                 addtext: AddTextConfig | None, sources: tuple[str, ...], title: str) -> dict[str, ArtifactRef]:
    """FTC of the rationales with the run's theta (or `ftc.task_model`), and the AddText stress test: perturbed
    copies scored with every metric beside their originals, and the shift table."""
    steps = run.steps
    out: dict[str, ArtifactRef] = {}
    if ftc is not None:
        out.update(steps.run(score_ftc, rationales, refs["examples"], ftc, sources, refs.get("theta"), run.device,
                             local_model_digest(ftc.task_model)))
    if addtext is not None:
        corpus_digest = file_digest(addtext.wiki_corpus) if addtext.wiki_corpus else None
        perturbed = steps.run(perturb_for_addtext, rationales, refs["examples"], addtext, sources, corpus_digest)
        scores = score_all(run, refs, perturbed["rationales"], label="addtext-")
        out.update(steps.run(addtext_shifts, scores, f"AddText stress test of {title}"))
        out["addtext_rationales"] = perturbed["addtext"]
    return out
