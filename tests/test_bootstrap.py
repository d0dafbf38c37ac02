"""Paired bootstrap intervals: hand-checkable cases."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from larev.metrics.bootstrap import bootstrap_intervals, resample_counts, weighted_aggregate


def frame(metric: str, per_source: dict[str, list[float]], leaks: dict[str, list[bool]] | None = None):
    rows = []
    for source, values in per_source.items():
        for i, v in enumerate(values):
            rows.append({"id": f"e{i}", "metric": metric, "source": source, "score": v,
                         "leaks": None if leaks is None else leaks[source][i]})
    return pl.DataFrame(rows, schema_overrides={"leaks": pl.Boolean})


def test_counts_and_weighted_aggregates_by_hand():
    counts = resample_counts(5, 200, seed=3)
    assert counts.shape == (200, 5) and (counts.sum(axis=1) == 5).all()
    values = np.array([1.0, 0.0, -1.0, 1.0])
    w = np.array([[2.0, 1.0, 0.0, 1.0]])  # example 0 twice, example 2 never
    assert weighted_aggregate(w, values)[0] == pytest.approx((2 + 0 + 1) / 4)
    leaks = np.array([True, True, False, False])
    # leaking: (2*1 + 1*0) / 3; non-leaking: (0 + 1*1) / 1; macro (2/3 + 1) / 2
    assert weighted_aggregate(w, values, leaks)[0] == pytest.approx((2 / 3 + 1) / 2)
    assert math.isnan(weighted_aggregate(np.array([[1.0, 1.0, 0.0, 0.0]]), values, leaks)[0])


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
