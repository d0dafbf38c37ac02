"""The registry drives the wiring (tasks/metric.py, flows/metrics.py): parameter sections, `--metrics` names, controls,
and `bench quality`'s per-metric summaries. Pure checks on the real registry and on small stand-ins; the end-to-end
proof with a new metric is tests/test_metric_recipe.py."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from flows.metrics import METRICS, all_score_names, bench_lines, with_controls, with_metrics
from flows.pipeline import PipelineParams, metric_sections
from larev.bench.quality import leakage_markdown, mean_figures
from larev.methods.leakage_aware.config import CONTROLS
from tasks.metric import Metric


def test_pipeline_sections_and_cli_names_come_from_the_registry():
    owned = {m.section for m in METRICS if m.options is not None}
    assert owned == {"r_only", "larev", "larev_vs_empty", "rora"} and owned <= set(PipelineParams.model_fields)
    assert all_score_names() == {"rev", "larev", "rora", "rq", "las"}  # r_only, larev_vs_empty: off unless asked
    assert not PipelineParams().larev_vs_empty.enabled and not PipelineParams().r_only.enabled
    assert with_metrics(PipelineParams(), ["rev", "larev_vs_empty"]).larev_vs_empty.enabled
    assert with_metrics(PipelineParams(), ["r_only"]).r_only.enabled
    # a section sits between the run's own sections and its trailing fields in the UI form
    fields = list(PipelineParams.model_fields)
    assert fields.index("score") < fields.index("larev") < fields.index("variants")


def test_metrics_sharing_a_section_run_together_and_rev_always():
    only_las = with_metrics(PipelineParams(), ["las"])
    assert (only_las.larev.enabled, only_las.rora.enabled) == (False, True)
    rev_only = with_metrics(PipelineParams(), ["rev"])
    assert not rev_only.larev.enabled and not rev_only.rora.enabled
    assert [m.name for m in METRICS if m.enabled(rev_only)] == ["rev"]


def test_controls_switch_on_in_the_owning_section_and_need_it_enabled():
    params = with_controls(PipelineParams())
    assert params.larev.controls == list(CONTROLS)
    with pytest.raises(SystemExit, match="no metric with controls is switched on"):
        with_controls(with_metrics(PipelineParams(), ["rev"]))


class _Options(BaseModel):
    enabled: bool = True


def _metric(name: str, section: str | None, options=None) -> Metric:
    metric = Metric()
    metric.name, metric.section, metric.options = name, section, options
    return metric


def test_a_section_is_declared_once_by_one_metric_and_read_by_name():
    assert set(metric_sections([_metric("a", "a", _Options), _metric("b", "a")])) == {"a"}
    for bad in ([_metric("a", "a", _Options), _metric("b", "a", _Options)],  # declared twice
                [_metric("a", "train", _Options)],  # a run field
                [_metric("a", "a", BaseModel)],  # no `enabled`: --metrics could not switch it off
                [_metric("b", "nowhere")]):  # read, never declared
        with pytest.raises(TypeError, match="section"):
            metric_sections(bad)


def test_bench_summaries_are_averaged_over_seeds_whatever_their_shape():
    per_seed = [{"converged": True, "chosen": "x", "reads": "form", "recall": 0.5, "gold": {"acc": 0.2},
                 "missing": None},
                {"converged": False, "chosen": "y", "reads": "form", "recall": 1.0, "gold": {"acc": 0.4},
                 "missing": 0.3}]
    means = mean_figures(per_seed)
    assert means == {"converged": 0.5, "reads": "form", "recall": 0.75, "gold": {"acc": pytest.approx(0.3)},
                     "missing": 0.3}  # a text the seeds disagree on ("chosen") is left out


def test_each_metric_writes_its_own_summary_and_an_unknown_one_gets_a_table():
    lines = leakage_markdown({"rora": {"gold": {"residual_accuracy": 0.41, "accuracy_unmasked": 0.9,
                                                  "chance": 0.33, "residual_gain": None}},
                              "gone": {"a": {"b": 1.5}}}, bench_lines)
    text = "\n".join(lines)
    assert "## What RORA's leaky spans left" in text and "| gold | 0.410 | 0.900 | 0.330 |" in text
    assert "## gone: bench summary" in text and "| a.b | 1.500 |" in text
    la = bench_lines("larev", {"residual_accuracy": 0.5, "converged": 2 / 3})
    assert la[0] == "## What LAREV's leakage spans removed" and "hit its size cap in 33% of the seeds" in la[2]
    assert "Fresh probe on the training split:" in la[2]  # what it read is not known: not claimed
    assert "Fresh probe on the training split's b's form" in bench_lines("larev", {"residual_reads": "form"})[2]
