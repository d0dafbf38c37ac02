"""What a score says (larev/metrics/scores.py): chance, reads, below_chance, score_clipped, score_vs_empty and the
separations' SUM / SUM_read, each against numbers worked out by hand."""

from __future__ import annotations

import math

import polars as pl
import pytest

from larev.metrics.scores import separations, summarise, unread_variants

LOG_THIRD = math.log(1 / 3)  # -1.0986


def _row(metric, source, logp_with, logp_base, correct, *, score=None, k=3):
    return {"id": f"{source}-{logp_with}", "metric": metric, "source": source, "label": "y", "logp_with": logp_with,
            "logp_base": logp_base, "score": logp_with - logp_base if score is None else score,
            "correct_with": correct, "correct_base": True, "aggregate": "mean", "n_labels": k}


def _planted() -> pl.DataFrame:
    rows = [_row("rev", "gold", -0.1, -0.05, True), _row("rev", "gold", -2.0, -0.05, False),
            _row("rev", "empty", -1.0, -0.05, True), _row("rev", "empty", -1.2, -0.05, False),
            _row("rev", "leaky", -4.0, -0.05, False), _row("rev", "leaky", -6.0, -0.05, False),
            _row("rq", "gold", -0.1, -0.3, True, score=1.0), _row("rq", "gold", -2.0, -0.3, False, score=0.0),
            _row("rq", "empty", -1.0, -0.3, True, score=0.0), _row("rq", "empty", -0.2, -0.3, True, score=0.0)]
    return pl.DataFrame(rows)


def test_reading_figures_by_hand():
    summary = summarise(_planted())
    rev = {r["source"]: r for r in summary.filter(pl.col("metric") == "rev").iter_rows(named=True)}
    gold, empty, leaky = rev["gold"], rev["empty"], rev["leaky"]
    assert gold["score"] == pytest.approx((-0.05 - 1.95) / 2)
    assert gold["chance"] == pytest.approx(1 / 3)
    assert gold["below_chance"] == 0.5  # -2.0 < log(1/3) < -0.1
    # log p_with clipped at log(1/3): (-0.1 + 0.05) and (log(1/3) + 0.05)
    assert gold["score_clipped"] == pytest.approx(((-0.1 + 0.05) + (LOG_THIRD + 0.05)) / 2)
    assert empty["below_chance"] == 0.5 and empty["score"] == pytest.approx(-1.05)
    assert gold["score_vs_empty"] == pytest.approx(-1.0 - -1.05)
    assert empty["score_vs_empty"] == 0.0
    assert leaky["below_chance"] == 1.0 and leaky["score_clipped"] == pytest.approx(LOG_THIRD + 0.05)
    assert leaky["score_vs_empty"] == pytest.approx(-4.95 - -1.05)
    # RQ's score is an accuracy gain, not a log-probability difference: nothing to clip
    rq = {r["source"]: r for r in summary.filter(pl.col("metric") == "rq").iter_rows(named=True)}
    assert rq["gold"]["score_clipped"] is None and rq["gold"]["score"] == 0.5
    assert rq["gold"]["below_chance"] == 0.5 and rq["empty"]["below_chance"] == 0.0
    assert rq["gold"]["score_vs_empty"] == 0.5


def test_reads_is_accuracy_outside_the_binomial_margin_of_chance():
    # 100 rows at K = 3: chance 1/3, margin 1.96 * sqrt(2/9 / 100) = 0.0924
    def rows(source, n_correct):
        return [_row("larev", source, -0.5 - i / 1000, 0.0, i < n_correct) for i in range(100)]

    scores = pl.DataFrame(rows("gold", 90) + rows("leaky", 40) + rows("vacuous", 43) + rows("gold_leaky", 20))
    summary = summarise(scores)
    reads = dict(summary.select("source", "reads").iter_rows())
    # 0.40 - 0.333 = 0.067 < 0.0924: at chance; 0.43 - 0.333 = 0.097 > 0.0924: read; 0.20 below chance: read (wrongly)
    assert reads == {"gold": True, "leaky": False, "vacuous": True, "gold_leaky": True}
    assert unread_variants(summary, "larev") == ["leaky"]
    seps = separations(summary, "larev")
    assert seps["SUM"] == pytest.approx(seps["gold-leaky"] + seps["gold-vacuous"] + seps["gold-gold_leaky"])
    assert seps["SUM_read"] == pytest.approx(seps["gold-vacuous"] + seps["gold-gold_leaky"])


def test_sum_is_the_thesis_three_only():
    rows = [_row("rev", s, lp, 0.0, True) for s, lp in
            [("gold", -0.1), ("leaky", -0.5), ("gold_leaky", -0.2), ("vacuous", -0.3), ("borrowed", -0.15),
             ("borrowed_other", -2.0), ("empty", -0.4)]]
    seps = separations(summarise(pl.DataFrame(rows)), "rev")
    assert seps["gold-borrowed"] == pytest.approx(0.05) and seps["gold-borrowed_other"] == pytest.approx(1.9)
    assert seps["SUM"] == pytest.approx(0.4 + 0.1 + 0.2)


def test_tables_without_the_label_count_give_unknown_figures():
    old = _planted().drop("n_labels")
    summary = summarise(old)
    assert summary["chance"].is_null().all() and summary["reads"].is_null().all()
    assert summary["score_clipped"].is_null().all() and "SUM_read" not in separations(summary, "rev")


def test_the_report_leads_with_the_variant_table_and_says_what_it_shows():
    from larev.reports import report_markdown

    def rows(source, n_correct, logp):
        return [_row("larev", source, logp, -0.1, i < n_correct) for i in range(100)]

    scores = pl.DataFrame(rows("gold", 90, -0.3) + rows("empty", 60, -0.9) + rows("borrowed", 88, -0.35)
                          + rows("leaky", 33, -4.0))
    report = report_markdown(summarise(scores), title="t")
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## What each metric says of each rationale variant"
    table = report.split(headings[0])[1].split("## ")[0]
    assert "| larev | gold | -0.200 | 0.600 | 0.900 | 0.333 | yes | 0.000 | -0.200 | 100 |" in table
    assert "| larev | leaky | -3.900 | -3.100 | 0.330 | 0.333 | no (chance) | 1.000 | -0.999 | 100 |" in table
    assert ("LAREV: relative to no rationale (empty, -0.800), gold +0.600, borrowed +0.550, leaky -3.100; its "
            "evaluator reads leaky at chance") in table
    seps = report.split("## Separations")[1]
    assert "| larev |" in seps and "| leaky |" in seps.split("| larev |")[1].splitlines()[0]
