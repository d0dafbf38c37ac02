"""Paired bootstrap intervals: hand-checkable cases."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from larev.metrics.bootstrap import aggregate, bootstrap_intervals


def frame(metric: str, per_source: dict[str, list[float]], leaks: dict[str, list[bool]] | None = None):
    rows = []
    for source, values in per_source.items():
        for i, v in enumerate(values):
            rows.append({"id": f"e{i}", "metric": metric, "source": source, "score": v,
                         "leaks": None if leaks is None else leaks[source][i]})
    return pl.DataFrame(rows, schema_overrides={"leaks": pl.Boolean})


def test_aggregates_by_hand():
    values = np.array([1.0, 0.0, -1.0, 1.0])
    present = np.array([1.0, 1.0, 0.0, 1.0])  # example 2 has no score for this source
    assert aggregate(values, present) == pytest.approx((1 + 0 + 1) / 3)
    leaks = np.array([1.0, 1.0, 0.0, 0.0])
    # leaking present: (1 + 0) / 2; non-leaking present: 1 / 1; macro (1/2 + 1) / 2
    assert aggregate(values, present, leaks) == pytest.approx((0.5 + 1) / 2)
    assert math.isnan(aggregate(values, np.array([1.0, 1.0, 0.0, 0.0]), leaks))  # no non-leaking example
    # along the last axis: one aggregate per resample row
    stacked = aggregate(np.stack([values, values + 1]), np.ones((2, 4)))
    assert stacked == pytest.approx([0.25, 1.25])


def test_the_interval_is_scipys_bca_of_the_mean():
    from scipy import stats

    rng = np.random.default_rng(4)
    gold = rng.normal(0.3, 1.0, 80)
    ci = bootstrap_intervals(frame("rev", {"gold": list(gold)}), n_boot=999, seed=2)
    row = ci.filter(pl.col("quantity") == "gold").row(0, named=True)
    # a paired draw of (score, present) pairs in id order, every example present: the BCa interval of the mean
    in_id_order = gold[sorted(range(len(gold)), key=lambda i: f"e{i}")]
    expected = stats.bootstrap((in_id_order, np.ones_like(gold)), lambda v, h, axis: (v * h).sum(axis) / h.sum(axis),
                               paired=True, vectorized=True, n_resamples=999, method="BCa", rng=2).confidence_interval
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((expected.low, expected.high))
    assert row["ci_low"] < gold.mean() < row["ci_high"]


def test_a_constant_paired_difference_has_a_zero_width_interval():
    rng = np.random.default_rng(0)
    gold = rng.normal(size=50)
    scores = frame("rev", {"gold": list(gold), "leaky": list(gold - 0.5), "gold_leaky": list(gold - 0.25),
                           "vacuous": list(gold - 1.0)})
    ci = bootstrap_intervals(scores, n_boot=300, seed=1)
    row = {q: r for q, *r in ci.select("quantity", "estimate", "ci_low", "ci_high").iter_rows()}
    assert row["gold-leaky"] == pytest.approx([0.5, 0.5, 0.5])
    assert row["SUM"] == pytest.approx([1.75, 1.75, 1.75])
    est, low, high = row["gold"]
    assert est == pytest.approx(gold.mean()) and low < est < high  # the per-source score does vary


def test_interval_is_reproducible_and_covers_a_noisy_separation():
    rng = np.random.default_rng(1)
    gold = rng.normal(1.0, 1.0, size=400)
    leaky = rng.normal(0.0, 1.0, size=400)
    scores = frame("rora", {"gold": list(gold), "leaky": list(leaky)})
    a = bootstrap_intervals(scores, n_boot=500, seed=7)
    assert a.equals(bootstrap_intervals(scores, n_boot=500, seed=7))
    sep = a.filter(pl.col("quantity") == "gold-leaky").row(0, named=True)
    assert sep["ci_low"] < sep["estimate"] < sep["ci_high"]
    assert sep["ci_low"] > 0.7 and sep["ci_high"] < 1.3  # true difference 1, standard error ~0.07


def test_las_interval_and_an_undefined_las():
    gain = {"gold": [1.0, 0.0, 1.0, 0.0] * 5, "leaky": [1.0] * 20}
    leaks = {"gold": [True, False] * 10, "leaky": [True] * 20}
    ci = bootstrap_intervals(frame("las", gain, leaks), n_boot=200, seed=0)
    rows = {q: r for q, *r in ci.select("quantity", "estimate", "nan_share").iter_rows()}
    assert rows["gold"][0] == pytest.approx((1.0 + 0.0) / 2)
    assert math.isnan(rows["leaky"][0]) and rows["leaky"][1] == 1.0  # every rationale leaks: LAS undefined
    assert math.isnan(rows["gold-leaky"][0])
