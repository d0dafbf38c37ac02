"""Summaries, the Markdown report and the separation plot; published to the Prefect UI as artifacts."""

from __future__ import annotations

import json
import math
import re

import polars as pl
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

import larev.metrics.scores as scores_mod
import larev.reports as reports
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_bytes, put_file, put_table, stacked_parquet


@larev_task("report")
def summarise_scores(store: ArtifactStore, scores: list[ArtifactRef], title: str,
                     sections: list[ArtifactRef] | None = None,
                     signatures: dict[str, str] | None = None) -> dict[str, ArtifactRef]:
    """scores.parquet (every metric), summary.parquet (per metric and source), report.md, separations.png.

    sections: the metrics' own parts of report.md (Markdown, their `report_section` steps), appended in order.
    signatures: {metric: signature} (larev/signature.py): a `signature` column in scores.parquet and
    summary.parquet, and a section of report.md.
    """
    signatures = signatures or {}
    with stacked_parquet(store, scores, scores_mod.SCORE_SCHEMA) as stacked:  # streamed: any number of rows
        summary = scores_mod.summarise(pl.scan_parquet(stacked))
        signed = stacked.with_name("signed.parquet")
        pl.scan_parquet(stacked).with_columns(signature_column(signatures)).sink_parquet(signed)
        scores_ref = put_file(store, "scores.parquet", signed)
    summary = summary.with_columns(signature_column(signatures))
    markdown = reports.report_markdown(summary, title=title, signatures=signatures)
    for section in sections or []:
        if text := store.read_text(section.key).strip():
            markdown += "\n" + text + "\n"
    return {
        "scores": scores_ref,
        "summary": put_table(store, "summary.parquet", summary),
        "report": put_bytes(store, "report.md", markdown.encode(), kind="text"),
        "plot": put_bytes(store, "separations.png", reports.separation_plot(summary), kind="image"),
    }


def signature_column(signatures: dict[str, str]) -> pl.Expr:
    """Each row's metric's signature (null for a metric `signatures` does not name)."""
    return pl.col("metric").replace_strict(signatures, default=None, return_dtype=pl.String).alias("signature")


def artifact_key(name: str) -> str:
    """Prefect artifact keys take lower-case letters, digits and dashes only."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-") or "larev"


def ui_rows(table: pl.DataFrame, digits: int = 3) -> list[dict]:
    """A table as the UI shows it: floats rounded to `digits`, an undefined value (NaN, null) as "n/a"."""
    def cell(value):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "n/a"
        return round(value, digits) if isinstance(value, float) else value

    return [{k: cell(v) for k, v in row.items()} for row in table.iter_rows(named=True)]


@task(name="publish", task_run_name="publish-{name}", cache_policy=NONE, persist_result=False)
def publish(store: ArtifactStore, report: ArtifactRef, name: str) -> None:
    """Show the run's report in the Prefect UI (on cached reruns too), keyed by the run's name."""
    create_markdown_artifact(key=f"{artifact_key(name)}-report", markdown=store.read_text(report.key),
                             description="Run report")


def publish_score_table(store: ArtifactStore, summary: ArtifactRef, name: str) -> None:
    """The score table in the Prefect UI, keyed by the run's name. Called from the flow's body, not in a task: it is
    then the flow run's own artifact, which the UI's Artifacts tab lists first, above every task run's artifacts
    (within one group the UI orders artifacts by their random ids, so creation order cannot put it first)."""
    create_table_artifact(key=f"{artifact_key(name)}-scores", table=ui_rows(store.read_parquet(summary.key)),
                          description="Scores per metric and source (3 decimals; n/a: undefined)")


@task(name="publish-stress", task_run_name="publish-stress-{name}", cache_policy=NONE, persist_result=False)
def publish_stress(store: ArtifactStore, refs: dict[str, ArtifactRef], name: str) -> None:
    """Show the AddText report and the FTC summary per source in the Prefect UI, keyed by the output's name."""
    key = artifact_key(name)
    if "addtext_report" in refs:
        create_markdown_artifact(key=f"{key}-addtext", markdown=store.read_text(refs["addtext_report"].key),
                                 description="AddText stress test: score shifts per metric")
    if "ftc_summary" in refs:
        by_source = json.loads(store.read_text(refs["ftc_summary"].key))["by_source"]
        rows = [{"source": source, **{k: s[k] for k in ("n_examples", "n", "n_extracted", "ftc_delta", "ftc_kl",
                                                         "ftc_wasserstein")}} for source, s in by_source.items()]
        create_table_artifact(key=f"{key}-ftc", table=ui_rows(pl.DataFrame(rows)),
                              description="FTC per rationale source")
