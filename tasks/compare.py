"""Read the scores a comparison needs from finished run directories, and write and publish its outputs.

A source is named in one of three ways (`source_scores`), as the run's leaderboard names its entries
(larev.leaderboard.entry_name):
  gold            a rationale source of the run itself (its built-in variants: gold, leaky, vacuous, ...)
  NAME            every source of an earlier `larev score --name NAME` (RUN/NAME/scores.parquet); one source keeps
                  the name NAME, several become NAME:SOURCE
  NAME:SOURCE     one source of such an output
Every source's scores carry their signature (null for a table written before signatures were kept);
`check_comparable` refuses sources whose signatures say they were not made the same way
(larev.compare.check_signatures) before anything is compared. The flow's parameters (CompareParams) and how a
compared file is named live here too, so the CLI checks them before any flow starts. The math is
larev/compare.py; nothing here is cached (a comparison is cheap and must see the files as they are).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import polars as pl
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE
from pydantic import BaseModel, ConfigDict, Field

from larev.compare import ALL_LABELS, CompareConfig, check_signatures, compare_markdown, compare_plot, \
    compare_sources, comparable_metrics, compared_metrics
from larev.config import Device
from larev.data.files import SUFFIXES
from larev.data.variants import VARIANTS
from larev.digests import file_digest
from larev.errors import ConfigError
from larev.leaderboard import entry_name
from larev.metrics.scores import with_aggregate_kind
from larev.run_files import RUN_FILE, TEST_SPLIT_FILE
from larev.signature import SIGNATURE_COLUMN
from tasks.reports import artifact_key, ui_rows

SCORE_COLUMNS = ["id", "source", "metric", "score", "label", "aggregate", SIGNATURE_COLUMN]
SCORES_FILE = "scores.parquet"


def _read_scores(path: Path) -> pl.DataFrame:
    """The columns a comparison reads; a table written before `aggregate` existed gets it as summaries do, one
    written before signatures were kept a null signature."""
    scores = with_aggregate_kind(pl.scan_parquet(path))
    if SIGNATURE_COLUMN not in scores.collect_schema().names():
        scores = scores.with_columns(pl.lit(None, pl.String).alias(SIGNATURE_COLUMN))
    return scores.select(SCORE_COLUMNS).collect()


def gold_labels(run_dir: Path) -> pl.DataFrame:
    """id -> gold label of the run's test split (a scored file may carry labels of its own)."""
    return pl.read_ndjson(run_dir / TEST_SPLIT_FILE).select("id", pl.col("label").alias("gold_label"))


def scored_outputs(run_dir: Path) -> list[str]:
    """Names of the `larev score` outputs inside a run directory."""
    return sorted(p.parent.name for p in run_dir.glob(f"*/{SCORES_FILE}"))


def source_scores(run_dir: str | Path, ref: str) -> pl.DataFrame:
    """The scores of the source(s) `ref` names in one run directory, `source` set to the name shown in the
    comparison. Raises ConfigError naming what the run holds when `ref` names nothing."""
    run_dir = Path(run_dir)
    own = _read_scores(run_dir / SCORES_FILE)
    name, _, wanted = ref.partition(":")
    if not wanted and ref in set(own["source"].unique().to_list()):
        return own.filter(pl.col("source") == ref)
    output = run_dir / name / SCORES_FILE
    if output.exists():
        scored = _read_scores(output)
        sources = scored["source"].unique(maintain_order=True).to_list()
        if wanted:
            if wanted not in sources:
                raise ConfigError(f"{output} has no source {wanted!r}; it has {', '.join(sources)}")
            return scored.filter(pl.col("source") == wanted).with_columns(source=pl.lit(ref))
        return scored.with_columns(source=pl.col("source").map_elements(
            lambda source: entry_name(name, source, len(sources)), return_dtype=pl.String))
    own_sources = ", ".join(own["source"].unique(maintain_order=True).to_list())
    outputs = ", ".join(scored_outputs(run_dir)) or "none"
    raise ConfigError(f"{ref!r} names nothing in {run_dir}: the run's own sources are {own_sources}; its scored "
                      f"outputs (larev score --name) are {outputs}; or pass a rationale file to score first")


def gather_scores(run_dirs: list[str], refs: list[str]) -> tuple[pl.DataFrame, list[str]]:
    """Every ref's scores from every run (seed = the run's position), and the compared names in order (at least
    two)."""
    scores, names = _gather(run_dirs, refs)
    if len(set(names)) < 2:
        raise ConfigError(f"{refs} name fewer than two distinct sources: nothing to compare")
    return scores, names


def _gather(run_dirs: list[str], refs: list[str]) -> tuple[pl.DataFrame, list[str]]:
    parts, names = [], []
    for seed, run_dir in enumerate(run_dirs):
        labels = gold_labels(Path(run_dir))
        for ref in refs:
            frame = source_scores(run_dir, ref).with_columns(seed=pl.lit(seed, dtype=pl.Int64))
            frame = frame.drop("label").join(labels, on="id", how="left").rename({"gold_label": "label"})
            parts.append(frame)
            if seed == 0:
                names += [s for s in frame["source"].unique(maintain_order=True).to_list() if s not in names]
    return pl.concat(parts, how="vertical_relaxed"), names


def check_comparable(run_dirs: list[str], refs: list[str],
                     metrics: list[str] | None) -> tuple[dict[str, str | None], list[str]]:
    """({metric: its signature}, warnings) of comparing `refs` across `run_dirs` under the compared metrics;
    raises larev.compare.NotComparable (a ConfigError) naming the metric, the two sources or runs and the fields
    that differ when their signatures say the scores were made differently."""
    scores, names = _gather(run_dirs, refs)
    return check_signatures(scores, names, compared_metrics(scores, metrics), run_dirs)


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


@task(name="compare-sources", cache_policy=NONE, persist_result=False)
def compare_and_write(run_dirs: list[str], refs: list[str], out: str, config: CompareConfig,
                      metrics: list[str] | None, name: str) -> dict:
    """compare.json, compare.md and compare.png under `out`; the Markdown and the overall table as Prefect
    artifacts, each metric with its signature. Returns the paths, each overall verdict, the signatures and the
    warnings. Refuses (NotComparable) sources whose signatures differ."""
    scores, names = gather_scores(run_dirs, refs)
    signatures, warnings = check_signatures(scores, names, compared_metrics(scores, metrics), run_dirs)
    table = compare_sources(scores, names, config, metrics, signatures=signatures)
    if table.height == 0:
        raise ConfigError(f"no metric to compare: the runs score {scores['metric'].unique().to_list()} and "
                          f"--metrics asked for {metrics}")
    _, skipped = comparable_metrics(scores)
    markdown = compare_markdown(table, names, skipped=skipped, seeds=len(run_dirs), config=config,
                                warnings=warnings)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            for row in table.to_dicts()]  # NaN is not JSON
    record = {"runs": run_dirs, "sources": names, "config": config.model_dump(), "skipped_metrics": skipped,
              "signatures": {m: signatures.get(m) for m in table["metric"].unique(maintain_order=True)},
              "warnings": warnings, "rows": rows}
    (out_dir / "compare.json").write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    (out_dir / "compare.md").write_text(markdown)
    (out_dir / "compare.png").write_bytes(compare_plot(table))
    key = artifact_key(f"compare-{name}")
    create_markdown_artifact(key=key, markdown=markdown, description="larev compare: paired differences")
    overall = table.filter(pl.col("label") == ALL_LABELS).drop("label", "seeds_low", "seeds_high")
    create_table_artifact(key=f"{key}-table", table=ui_rows(overall), description="paired differences per metric")
    return {"out": str(out_dir), "verdicts": [f"{r['metric']}: {r['verdict']} ({r['difference']:+.3f})"
                                              for r in overall.iter_rows(named=True)],
            "signatures": record["signatures"], "warnings": warnings}
