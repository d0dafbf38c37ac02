"""The metrics both flows train and score, in order: wiring as data.

A metric may read models an earlier one trained (LAREV reads REV's phi_base and phi; RQ / LAS read RORA's theta,
training rationales and rationale-only models). Adding a metric is one entry here (CONTRIBUTING.md): the pipeline's
parameter sections (flows/pipeline.py), the CLI's `--metrics` names and switches (flows/cli/parser.py), the run's
report and `bench quality`'s summaries are all read from this list.
"""

from __future__ import annotations

from larev.reports import summary_lines
from tasks.accuracy import Accuracy
from tasks.leakage_aware import LarevVsEmpty, LeakageAware
from tasks.metric import Metric
from tasks.r_only import ROnly
from tasks.rev import Rev
from tasks.rora import Rora

METRICS: list[Metric] = [Rev(), LeakageAware(), LarevVsEmpty(), ROnly(), Rora(), Accuracy()]


def with_metrics(params, names: list[str]):
    """The pipeline parameters with only the metrics named (their score names, `--metrics`) switched on: every
    section whose metrics are all left out gets `enabled` False. A metric without a section (REV) always runs, and
    metrics sharing a section (RORA, RQ, LAS) run together."""
    wanted = {m.section for m in METRICS if m.section and set(m.names()) & set(names)}
    sections = {m.section for m in METRICS if m.section}  # each has `enabled` (flows/pipeline.py metric_sections)
    return params.model_copy(update={
        s: getattr(params, s).model_copy(update={"enabled": s in wanted}) for s in sorted(sections)})


def with_controls(params):
    """The pipeline parameters with every control of every enabled metric switched on (`bench quality --controls`:
    its section's `controls`). Fails when no enabled metric has controls."""
    controlled = [m for m in METRICS if m.controls and m.enabled(params)]
    if not controlled:
        owners = [m.name for m in METRICS if m.controls]
        raise SystemExit(f"error: --controls: no metric with controls is switched on ({', '.join(owners)} has them; "
                         f"--metrics ...,{owners[0]})")
    return params.model_copy(update={
        m.section: getattr(params, m.section).model_copy(update={"controls": list(m.controls)}) for m in controlled})


def all_score_names() -> set[str]:
    """The score names of every registered metric that a run trains by default (a section's `enabled` default): a
    run that scored all of them ran the full protocol. A metric off by default (r_only, larev_vs_empty) is not in it."""
    return {name for m in METRICS if m.section is None or m.options is None
            or m.options.model_fields["enabled"].default for name in m.names()}


def bench_summaries(artifacts: dict, store) -> dict:
    """`bench quality`'s "leakage" entry of a finished run: each metric's `bench_summary` that has one."""
    return {m.name: summary for m in METRICS if (summary := m.bench_summary(artifacts, store))}


def bench_lines(metric: str, summary: dict) -> list[str]:
    """One metric's bench summary as results.md lines: the registered metric's own `bench_markdown` (a table of
    the figures for a metric no longer registered, e.g. in an older seed's results.json)."""
    owner = next((m for m in METRICS if m.name == metric), None)
    if owner is None:
        return summary_lines(metric, summary)
    return owner.bench_markdown(summary)
