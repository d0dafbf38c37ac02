"""FTC and AddText as tasks: read the rationales and examples, call larev.stress.ftc / larev.stress.addtext, write
tables."""

from __future__ import annotations

import polars as pl

import larev.stress.addtext.report as addtext_report
import larev.stress.addtext.shift as addtext_shift
import larev.stress.ftc.metric as ftc_metric
import larev.metrics.scores as scores_mod
from larev.stress.addtext.config import AddTextConfig
from larev.errors import InputError
from larev.stress.ftc.config import FtcConfig
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_bytes, put_file, put_json, put_table, stacked_parquet
from tasks.data import examples_in_test_split
from tasks.runtime.secrets import gemini_options


def _of_sources(rationales: pl.DataFrame, sources: tuple[str, ...]) -> pl.DataFrame:
    return rationales if "*" in sources else rationales.filter(pl.col("source").is_in(list(sources)))


class _Ticking:
    """An extractor that advances a progress bar once per explanation (LLM extraction of thousands of rows)."""

    def __init__(self, inner, bar):
        self.inner, self.bar = inner, bar

    def extract(self, explanation: str, hypothesis: str, label: str):
        try:
            return self.inner.extract(explanation, hypothesis, label)
        finally:
            self.bar.update(1)


@larev_task("ftc", gpu=True)
def score_ftc(store: ArtifactStore, rationales: ArtifactRef, examples: ArtifactRef, config: FtcConfig,
              sources: tuple[str, ...] = ("*",), theta: ArtifactRef | None = None, device: str = "auto",
              task_model_digest: str | None = None, progress: bool = True) -> dict[str, ArtifactRef]:
    """FTC-delta, FTC-K and FTC-W (FTC section 2.3) of the NLI rationales of `sources` ('*': all): ftc.parquet (one
    row per (example, case), with the reason where no counterfactual could be built) and ftc.json (the summary
    per source). `task_model_digest`: the content hash of a local `config.task_model` (part of the cache key)."""
    from larev.stress.ftc.config import make_extractor, make_task_model
    from larev.progress import progress_bar

    ex = examples_in_test_split(store, examples)
    rat = store.read_parquet(rationales.key)
    rows = _of_sources(rat, sources).join(ex.select("id", "task", "premise", "hypothesis"), on="id", how="inner")
    if rows.is_empty():
        raise InputError(f"FTC: no rationale of the sources {list(sources)} (the file has "
                         f"{sorted(rat['source'].unique())})", column="source")
    tasks = sorted(rows["task"].unique())
    if tasks != ["nli"]:
        raise InputError(f"FTC is defined for NLI explanations only; these rationales are for {tasks}", column="task")
    evaluator = None
    if not config.task_model:
        from larev.models.evaluator import load_evaluator

        evaluator = load_evaluator(store.get_dir(theta.key), device=device) if theta is not None else None
    task_model = make_task_model(config, evaluator=evaluator, device=device)
    extractor = make_extractor(config, **(gemini_options(store) if config.extractor == "llm" else {}))
    tables, summaries = [], {}
    with progress_bar(None, desc="ftc: explanations", enabled=progress, total=rows.height, unit="row") as bar:
        for source in sorted(rows["source"].unique()):
            part = rows.filter(pl.col("source") == source).rename({"rationale": "explanation"})
            table, summary = ftc_metric.ftc_scores(part, _Ticking(extractor, bar), task_model, config.alpha)
            tables.append(table.insert_column(1, pl.lit(source).alias("source")))
            summaries[source] = summary
    payload = {"config": config.model_dump(mode="json"), "task_model": config.task_model or "theta",
               "by_source": summaries}
    return {"ftc": put_table(store, "ftc.parquet", pl.concat(tables)),
            "ftc_summary": put_json(store, "ftc.json", payload)}


@larev_task("addtext")
def perturb_for_addtext(store: ArtifactStore, rationales: ArtifactRef, examples: ArtifactRef,
                        config: AddTextConfig, sources: tuple[str, ...] = ("*",),
                        corpus_digest: str | None = None) -> dict[str, ArtifactRef]:
    """AddText perturbations (seed 003 section 4.1) of the rationales of `sources` ('*' for all):
    addtext.parquet (every perturbed row with its provenance) and rationales.parquet (the originals and their
    perturbed copies in the rationale contract, ready to score). `corpus_digest`: the content hash of
    `config.wiki_corpus` (part of the cache key)."""
    from larev.stress.addtext import as_rationale_file, perturb_rationales

    everything = store.read_parquet(rationales.key)
    rat = _of_sources(everything, sources)
    if rat.is_empty():
        raise InputError(f"AddText: no rationale of the sources {list(sources)} (the file has "
                         f"{sorted(everything['source'].unique())})", column="source")
    perturbed = perturb_rationales(rat, examples_in_test_split(store, examples), config)
    return {"addtext": put_table(store, "addtext.parquet", perturbed),
            "rationales": put_table(store, "rationales.parquet", as_rationale_file(perturbed, originals=rat))}


@larev_task("addtext-shift")
def addtext_shifts(store: ArtifactStore, scores: list[ArtifactRef], title: str) -> dict[str, ArtifactRef]:
    """Per metric, kind and position: the mean score shift of the perturbed rationales and the share whose
    score rises (shift.parquet), as Markdown (addtext.md) and as a plot (addtext.png); every original and
    perturbed rationale's scores (scores.parquet)."""
    with stacked_parquet(store, scores, scores_mod.SCORE_SCHEMA) as stacked:
        shift = addtext_shift.score_shift_table(pl.scan_parquet(stacked))
        scores_ref = put_file(store, "scores.parquet", stacked)
    return {"addtext_shift": put_table(store, "shift.parquet", shift), "addtext_scores": scores_ref,
            "addtext_report": put_bytes(store, "addtext.md", addtext_report.shift_markdown(shift, title=title).encode(),
                                        kind="text"),
            "addtext_plot": put_bytes(store, "addtext.png", addtext_report.shift_plot(shift), kind="image")}


def ftc_problem(store: ArtifactStore, refs: dict[str, ArtifactRef], config: FtcConfig) -> str | None:
    """Why FTC cannot run on this run (not NLI; no theta and no task model), or None: checked before any step."""
    tasks = sorted(store.read_parquet(refs["examples"].key)["task"].unique())
    if tasks != ["nli"]:
        return f"FTC is defined for NLI explanations only; this run's task is {tasks}"
    if not config.task_model and "theta" not in refs:
        return ("FTC needs a task model: this run has no no-rationale evaluator theta (it was trained without "
                "RORA); give ftc.task_model (--task-model, an HF NLI classifier) or rerun with RORA on")
    return None


def local_model_digest(name_or_path: str | None) -> str | None:
    """A content hash of a local model directory's config and weights (None for a hub name or no model)."""
    import hashlib
    from pathlib import Path

    from larev.digests import sha256_file

    if not name_or_path or not Path(name_or_path).expanduser().is_dir():
        return None
    root = Path(name_or_path).expanduser()
    files = sorted(p for p in root.iterdir() if p.suffix in (".json", ".safetensors", ".txt", ".model"))
    return hashlib.sha256("".join(f"{p.name}:{sha256_file(p)}" for p in files).encode()).hexdigest()
