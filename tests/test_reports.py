"""Reports: Markdown tables, separations, the baseline-leakage note, the PNG plot."""

from __future__ import annotations

import polars as pl

from larev.reports import diagnose, markdown_table, report_markdown, separation_plot, separation_table


def _summary(acc_base: float) -> pl.DataFrame:
    return pl.DataFrame({"metric": ["rev"] * 4, "source": ["gold", "gold_leaky", "leaky", "vacuous"],
                         "score": [0.5, 0.25, -0.5, 0.0], "accuracy_with": [0.9, 0.9, 0.5, 0.5],
                         "accuracy_base": [acc_base] * 4, "n": [10] * 4})


def test_markdown_table_and_separations():
    assert markdown_table(pl.DataFrame({"a": ["x"], "b": [0.12345]})) == "| a | b |\n| --- | --- |\n| x | 0.123 |"
    seps = separation_table(_summary(0.5)).row(0, named=True)
    assert seps == {"metric": "rev", "gold-leaky": 1.0, "gold-gold_leaky": 0.25, "gold-vacuous": 0.5, "SUM": 1.75,
                    "unread": "-"}  # a summary without `reads` (written before it existed) flags nothing


def test_leaky_baseline_is_flagged_only_when_the_baseline_reads_the_label():
    assert diagnose(_summary(0.6)) == []
    notes = diagnose(_summary(0.99))
    assert len(notes) == 1 and "0.990" in notes[0] and "leaks the label" in notes[0]
    assert "## Notes" in report_markdown(_summary(0.99), title="t")
    assert "## Notes" not in report_markdown(_summary(0.6), title="t")


def test_plot_is_a_png():
    assert separation_plot(_summary(0.5))[:8] == b"\x89PNG\r\n\x1a\n"


def test_artifact_keys_are_what_prefect_accepts():
    from tasks.reports import artifact_key

    assert artifact_key("demo-nli") == "demo-nli"
    assert artifact_key("My_Run.v2") == "my-run-v2"
    assert artifact_key("__") == "larev"


def _bar_pixels(png: bytes) -> int:
    """How many pixels carry matplotlib's first bar colour (tab:blue, #1f77b4)."""
    import io

    import matplotlib.image as mpimg
    import numpy as np

    rgb = (mpimg.imread(io.BytesIO(png), format="png")[..., :3] * 255).round()
    return int((np.abs(rgb - np.array([31, 119, 180])).max(axis=-1) <= 2).sum())


def test_a_user_file_without_variants_plots_its_scores_not_an_empty_chart():
    user_only = pl.DataFrame({"metric": ["rev", "larev"], "source": ["my-model"] * 2, "score": [0.4, 0.2],
                              "accuracy_with": [0.9, 0.9], "accuracy_base": [0.5, 0.5], "n": [10, 10]})
    assert _bar_pixels(separation_plot(user_only)) > 500
    assert _bar_pixels(separation_plot(_summary(0.5))) > 500


def test_ui_table_rounds_and_names_undefined_values():
    from tasks.reports import ui_rows

    table = pl.DataFrame({"metric": ["las"], "score": [float("nan")], "accuracy_with": [0.123456789], "n": [12],
                          "leak_rate": [None]}, schema_overrides={"leak_rate": pl.Float64})
    assert ui_rows(table) == [{"metric": "las", "score": "n/a", "accuracy_with": 0.123, "n": 12, "leak_rate": "n/a"}]


def test_many_sources_plot_their_mean_without_a_crowded_legend(recwarn):
    many = pl.DataFrame({"metric": ["rev"] * 40, "source": [f"model-{i}" for i in range(40)],
                         "score": [0.1 * i for i in range(40)], "accuracy_with": [0.9] * 40,
                         "accuracy_base": [0.5] * 40, "n": [10] * 40})
    assert _bar_pixels(separation_plot(many)) > 500
    assert not [w for w in recwarn if "tight_layout" in str(w.message).lower() or "Tight layout" in str(w.message)]


def test_the_verdict_says_separates_only_when_the_interval_is_above_zero():
    """gold - leaky [0.1, 0.5]: separates; gold - vacuous [-0.1, 0.2]: cannot tell apart; gold - borrowed
    [-0.4, -0.1]: ranks the variant higher; the SUM and a control's rows are left out."""
    from larev.reports import verdict_lines, verdict_table

    intervals = pl.DataFrame({
        "metric": ["larev", "larev", "larev", "larev", "larev", "control_phi"],
        "quantity": ["gold", "gold-leaky", "gold-vacuous", "gold-borrowed", "SUM", "gold-leaky"],
        "estimate": [1.0, 0.3, 0.05, -0.25, 0.4, 0.3], "ci_low": [0.9, 0.1, -0.1, -0.4, 0.1, 0.1],
        "ci_high": [1.1, 0.5, 0.2, -0.1, 0.7, 0.5]})
    verdict = verdict_table(intervals)
    assert verdict.select("variant", "verdict").rows() == [("leaky", "separates"), ("vacuous", "cannot tell apart"),
                                                          ("borrowed", "ranks it higher")]
    lines = verdict_lines(verdict)
    assert lines[2].split() == ["larev", "+0.30", "[+0.10,+0.50]", "+0.05", "[-0.10,+0.20]=", "-0.25",
                                "[-0.40,-0.10]!"]
    assert lines[-1] == ("larev separates gold from 1 of 3 variants it reads; cannot tell it from vacuous; ranks "
                         "borrowed above it.")
    # a variant its evaluator reads at chance is not counted, whatever its interval
    summary = pl.DataFrame({"metric": ["larev", "larev"], "source": ["leaky", "vacuous"], "reads": [False, True]})
    unread = verdict_table(intervals, summary)
    assert unread.select("variant", "verdict").rows()[0] == ("leaky", "read at chance")
    assert verdict_lines(unread)[-1] == ("larev separates gold from 0 of 2 variants it reads; cannot tell it from "
                                         "vacuous; ranks borrowed above it; reads leaky at chance.")
    # LAS's macro-average is undefined where one group is empty: said so, not counted
    las = pl.DataFrame({"metric": ["las"], "quantity": ["gold-leaky"], "estimate": [float("nan")],
                        "ci_low": [float("nan")], "ci_high": [float("nan")]})
    assert verdict_lines(verdict_table(las))[-1] == "las separates gold from 0 of 0 variants it reads; undefined for leaky."
