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


# ------------------------------------------------------------------ planted: a label cue in r the evaluator reads

LABELS = ["entailment", "contradiction", "neutral"]
CUE = {"entailment": "fruit", "contradiction": "tool", "neutral": "sleeps"}  # in r: names the label
FILLER = ["red", "blue", "green", "old", "new", "big", "small", "wet"]


def _cue_examples(n: int, rng, split: str) -> pl.DataFrame:
    from larev.schema import validate_examples

    rows = []
    for i in range(n):
        y = LABELS[i % 3]
        words = [CUE[y], *rng.sample(FILLER, 3)]
        rng.shuffle(words)
        rows.append({"id": f"{split}{i}", "premise": f"a {rng.choice(['man', 'dog'])} walks",
                     "hypothesis": "a dog walks", "label": y, "rationale": " ".join(words)})
    return validate_examples(pl.DataFrame(rows), task="nli", default_split=split)


def test_borrowed_and_empty_are_what_a_hand_computation_gives_when_the_evaluator_reads_a_label_cue_in_r():
    """Planted: the gold rationale names its label with a cue word among filler, b says nothing about the label.
    phi (trained on [r, b]) reads the cue; phi_base (on b) cannot read anything. The report's figures for
    `borrowed` and `empty` must be the hand-computed means over the rows (each borrowed row scored with its
    donor's rationale), and they show what issue 33 found: a borrowed same-label rationale, which says nothing
    about its instance, scores as well as the instance's own, far above no rationale."""
    import random

    from larev.config import ScoreConfig, TrainConfig
    from larev.data.variants import borrowed_from, make_variants
    from larev.formats import baseline_input, rationale_input
    from larev.metrics.rev import score_rev
    from larev.models.evaluator import score_labels
    from larev.models.train import train_evaluator
    from tests.helpers import tiny_evaluator

    rng = random.Random(0)
    train, test = _cue_examples(120, rng, "train"), _cue_examples(30, rng, "test")
    baseline = {r["id"]: f"{r['premise']} and {r['hypothesis']}"
                for r in pl.concat([train, test]).iter_rows(named=True)}
    vocab = [*FILLER, *CUE.values(), "a", "man", "dog", "walks", "and", "rationale:", "baseline:", *LABELS]
    phi, phi_base = tiny_evaluator(vocab, seed=0), tiny_evaluator(vocab, seed=1)
    config = TrainConfig(epochs=4, batch_size=8, learning_rate=3e-3)
    b_train = [baseline[i] for i in train["id"]]
    train_evaluator(phi, [rationale_input(r, b) for r, b in zip(train["rationale"], b_train)],
                    train["label"].to_list(), [], [], [], config, progress=False)
    train_evaluator(phi_base, [baseline_input(b) for b in b_train], train["label"].to_list(), [], [], [], config,
                    progress=False)
    baselines = pl.DataFrame({"id": test["id"], "label": test["label"],
                              "baseline": [baseline[i] for i in test["id"]]})
    rationales = make_variants(test, baselines, ["gold", "borrowed", "empty"])
    summary = summarise(score_rev(phi, phi_base, rationales, test, baselines, ScoreConfig()))
    figures = {r["source"]: r for r in summary.iter_rows(named=True)}

    def logp(model, text, y):
        return score_labels(model, [text], [y], [LABELS]).logp[0]

    labels, golds, bs = test["label"].to_list(), test["rationale"].to_list(), baselines["baseline"].to_list()
    base = [logp(phi_base, baseline_input(b), y) for b, y in zip(bs, labels)]
    donors = borrowed_from(labels, same_label=True)
    by_hand = {
        "borrowed": [logp(phi, rationale_input(golds[d], b), y) - g for d, b, y, g in zip(donors, bs, labels, base)],
        "empty": [logp(phi, rationale_input("", b), y) - g for b, y, g in zip(bs, labels, base)],
        "gold": [logp(phi, rationale_input(r, b), y) - g for r, b, y, g in zip(golds, bs, labels, base)]}
    for variant, values in by_hand.items():
        assert figures[variant]["score"] == pytest.approx(sum(values) / len(values), abs=1e-4), variant
        below = [v + g < LOG_THIRD for v, g in zip(values, base)]
        assert figures[variant]["below_chance"] == pytest.approx(sum(below) / len(below))
    assert figures["gold"]["score_vs_empty"] == pytest.approx(figures["gold"]["score"] - figures["empty"]["score"])
    # what the figures show: phi reads the cue in a borrowed rationale as in the instance's own
    assert figures["gold"]["reads"] and figures["borrowed"]["reads"]
    assert figures["gold"]["accuracy_with"] > 0.9 and figures["borrowed"]["accuracy_with"] > 0.9
    assert abs(figures["gold"]["score"] - figures["borrowed"]["score"]) < 0.1
    assert figures["borrowed"]["score_vs_empty"] > 0.5  # far above no rationale: REV rewards the label's phrasing
