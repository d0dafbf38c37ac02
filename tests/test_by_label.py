"""The per-label table of `larev bench quality`: the gold rationale against a borrowed same-label one, per gold
label (values worked out by hand)."""

from __future__ import annotations

import polars as pl
import pytest

from larev.bench.quality import MAX_BY_LABEL, by_label_markdown, by_label_results


def _rows(source: str, label: str, scores: dict[str, float], correct: dict[str, bool],
          metric: str = "larev") -> list[dict]:
    return [{"id": i, "source": source, "label": label, "metric": metric, "score": s, "correct_with": correct[i],
             "aggregate": "mean", "leaks": None} for i, s in scores.items()]


def _scores() -> pl.DataFrame:
    # entailment (a, b): the evaluator reads the instance's own rationale better than a borrowed one;
    # neutral (c, d): it reads a borrowed rationale exactly as the gold one (what the label's rationales share)
    rows = (_rows("gold", "entailment", {"a": 1.0, "b": 0.6}, {"a": True, "b": True})
            + _rows("borrowed", "entailment", {"a": 0.2, "b": 0.4}, {"a": False, "b": True})
            + _rows("empty", "entailment", {"a": 0.0, "b": 0.0}, {"a": False, "b": False})
            + _rows("gold", "neutral", {"c": 0.5, "d": 0.3}, {"c": True, "d": True})
            + _rows("borrowed", "neutral", {"c": 0.5, "d": 0.3}, {"c": True, "d": True})
            + _rows("empty", "neutral", {"c": 0.0, "d": 0.0}, {"c": True, "d": False})
            + _rows("leaky", "neutral", {"c": 9.0, "d": 9.0}, {"c": True, "d": True}))  # plays no part
    return pl.DataFrame(rows)


def test_per_label_figures_by_hand():
    out = by_label_results(_scores(), n_boot=200)["larev"]
    entail, neutral = out["entailment"], out["neutral"]
    assert entail["n"] == 2 and neutral["n"] == 2
    assert entail["gold"] == pytest.approx(0.8)  # (1.0 + 0.6) / 2
    assert entail["borrowed"] == pytest.approx(0.3)  # (0.2 + 0.4) / 2
    assert entail["empty"] == pytest.approx(0.0)
    assert entail["gold_minus_borrowed"] == pytest.approx(0.5)  # paired: (0.8 + 0.2) / 2
    assert entail["accuracy"] == pytest.approx({"gold": 1.0, "borrowed": 0.5, "empty": 0.0})
    # a resample of the two differences (0.8, 0.2) has mean 0.2, 0.5 or 0.8, each end drawn in about 1 of 4
    assert entail["ci"] == pytest.approx([0.2, 0.8])
    # the kind-of-sentence reader: a borrowed rationale scores what the gold one does, in every resample
    assert neutral["gold_minus_borrowed"] == pytest.approx(0.0)
    assert neutral["ci"] == pytest.approx([0.0, 0.0])
    assert neutral["accuracy"]["empty"] == pytest.approx(0.5)


def test_per_label_markdown_has_one_row_per_metric_and_label():
    lines = "\n".join(by_label_markdown(by_label_results(_scores(), n_boot=0)))
    assert "| larev | entailment | 2 | 0.800 (1.000) | 0.300 (0.500) | 0.000 (0.000) | 0.500 |" in lines
    assert "| larev | neutral | 2 |" in lines
    assert by_label_markdown({}) == []


def test_no_per_label_table_without_borrowed_rationales_or_with_per_question_answers():
    without_borrowed = _scores().filter(pl.col("source") != "borrowed")
    assert by_label_results(without_borrowed, n_boot=10) == {}
    # QA: every question has its own answer, so there is no fixed label set to break the scores down by
    qa = pl.DataFrame([row for k in range(MAX_BY_LABEL + 1) for source in ("gold", "borrowed")
                       for row in _rows(source, f"answer {k}", {f"q{k}": 0.1}, {f"q{k}": True})])
    assert by_label_results(qa, n_boot=10) == {}
