"""REV eq. 5/6, summaries and separations against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from larev.metrics.rev import aggregate, pointwise_rev
from larev.metrics.scores import separations, summarise


def test_pointwise_and_aggregate_by_hand():
    # g'[r,b](y) = 0.8 and g[b](y) = 0.4 -> log 2 ; 0.25 vs 0.5 -> -log 2 ; equal -> 0
    with_ = np.log([0.8, 0.25, 0.3])
    base = np.log([0.4, 0.5, 0.3])
    pw = pointwise_rev(with_, base)
    assert pw.tolist() == pytest.approx([math.log(2), -math.log(2), 0.0])
    assert aggregate(pw) == pytest.approx(0.0)
    assert aggregate(np.array([1.0, 2.0])) == 1.5
    assert math.isnan(aggregate(np.array([])))


def _scores():
    rows = []
    for source, score, cw in [("gold", 1.0, True), ("gold", 2.0, False), ("leaky", 0.5, True),
                              ("leaky", 0.5, True), ("vacuous", 0.0, False), ("vacuous", -1.0, True)]:
        rows.append({"metric": "rev", "source": source, "score": score, "correct_with": cw, "correct_base": True})
    return pl.DataFrame(rows)


def test_summarise_and_separations():
    summary = summarise(_scores())
    gold = summary.filter(pl.col("source") == "gold").row(0, named=True)
    assert gold["score"] == 1.5 and gold["accuracy_with"] == 0.5 and gold["n"] == 2
    seps = separations(summary, "rev")
    # gold 1.5, leaky 0.5, vacuous -0.5; gold_leaky absent
    assert seps == {"gold-leaky": 1.0, "gold-vacuous": 2.0, "SUM": 3.0}
    assert separations(summary, "larev") == {}


def test_label_set_takes_lists_and_polars_series():
    from larev.schema import label_set

    assert label_set("nli") == ["entailment", "contradiction", "neutral"]
    assert label_set("qa", ["a", "b"]) == ["a", "b"]
    series = pl.DataFrame({"choices": [["x", "y", "z"]]})["choices"][0]  # a List cell comes back as a Series
    assert label_set("qa", series) == ["x", "y", "z"]
    with pytest.raises(ValueError, match="no label set"):
        label_set("qa", [])
