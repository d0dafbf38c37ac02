"""larev.compare: paired differences of rationale sources, against values worked out by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from larev.compare import (ALL_LABELS, COMPARE_SCHEMA, CompareConfig, NotComparable, adjust_p_values,
                           check_signatures, compare_markdown, compare_plot, compare_sources, seeds_interval,
                           seeds_signature, verdict, win_rate)
from larev.signature import make_signature


def frame(rows: list[tuple]) -> pl.DataFrame:
    """rows of (seed, id, source, metric, score, label); aggregate 'mean' except for las."""
    df = pl.DataFrame(rows, schema=["seed", "id", "source", "metric", "score", "label"], orient="row")
    return df.with_columns(aggregate=pl.when(pl.col("metric") == "las").then(pl.lit("leak_macro"))
                           .otherwise(pl.lit("mean")))


def two_sources(a: np.ndarray, b: np.ndarray, *, seed: int = 0, labels=None, metric: str = "larev") -> list[tuple]:
    labels = labels if labels is not None else ["x"] * len(a)
    return [(seed, f"i{i}", src, metric, float(v), labels[i])
            for src, values in (("A", a), ("B", b)) for i, v in enumerate(values)]


def test_win_rate_counts_ties_half():
    assert win_rate(np.array([1.0, -1.0, 0.0, 2.0])) == pytest.approx(2.5 / 4)


def test_seeds_interval_is_student_t_over_seed_means():
    # mean 2, sd 1, t(0.975, df 2) = 4.302653 -> half width 4.302653 / sqrt(3) = 2.484138
    low, high, sd = seeds_interval(np.array([1.0, 2.0, 3.0]), 0.95)
    assert sd == pytest.approx(1.0)
    assert (low, high) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-5)
    assert all(np.isnan(seeds_interval(np.array([1.0]), 0.95)))


def test_verdict_needs_every_interval_to_exclude_zero():
    assert verdict(0.3, [(0.1, 0.5)], "A", "B", 0.01) == "A > B"
    assert verdict(-0.3, [(-0.5, -0.1)], "A", "B", 0.01) == "A < B"
    assert verdict(0.3, [(0.1, 0.5), (-0.2, 0.8)], "A", "B", 0.01) == "no difference"
    assert verdict(0.3, [(float("nan"), float("nan"))], "A", "B", 0.01) == "no difference"


def test_verdict_needs_p_below_alpha_and_bh_can_take_a_difference_back():
    assert verdict(0.3, [(0.1, 0.5)], "A", "B", p_value=0.2, alpha=0.05) == "no difference"
    # Benjamini-Hochberg over (0.04, 0.04, 0.9): 0.04 * 3 / 2 = 0.06 for both small ones, 0.9 stays
    rows = [{**{k: None for k in COMPARE_SCHEMA}, "metric": "m", "label": ALL_LABELS, "a": a, "b": "x",
             "p_value": p, "verdict": f"{a} > x"} for a, p in (("A", 0.04), ("B", 0.04), ("C", 0.9))]
    table = adjust_p_values(pl.DataFrame(rows, schema=COMPARE_SCHEMA), 0.05)
    assert table["p_adjusted"].to_list() == pytest.approx([0.06, 0.06, 0.9])
    assert set(table["verdict"]) == {"no difference"}


def test_float_noise_between_two_scorings_of_the_same_text_is_a_tie():
    """The same rationales scored in other batches differ by about 1e-6 (float32): no difference, not 'A < B'."""
    rng = np.random.default_rng(5)
    a = rng.normal(0, 1, 500)
    row = compare_sources(frame(two_sources(a, a + rng.normal(0, 2e-6, 500))), ["A", "B"],
                          CompareConfig(by_label=False)).row(0, named=True)
    assert row["difference"] == 0 and row["win_rate"] == 0.5 and row["verdict"] == "no difference"


def test_a_planted_difference_is_found_with_its_size():
    rng = np.random.default_rng(0)
    b = rng.normal(0, 1, 400)
    a = b + 0.5 + rng.normal(0, 0.2, 400)
    row = compare_sources(frame(two_sources(a, b)), ["A", "B"], CompareConfig(by_label=False)).row(0, named=True)
    assert row["difference"] == pytest.approx(float((a - b).mean()))
    assert row["ids_low"] < row["difference"] < row["ids_high"]
    assert 0.4 < row["ids_low"] and row["ids_high"] < 0.6
    assert row["verdict"] == "A > B" and row["p_value"] < 0.01 and row["win_rate"] > 0.95


def test_a_reordered_copy_compares_as_identical():
    """Pairing is by id: a copy of the file in another row order has no difference at all."""
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, 200)
    rows = two_sources(a, a)
    copy = [r for r in rows if r[2] == "B"]
    shuffled = [copy[i] for i in rng.permutation(len(copy))]
    scores = frame([r for r in rows if r[2] == "A"] + shuffled)
    row = compare_sources(scores, ["A", "B"], CompareConfig(by_label=False)).row(0, named=True)
    assert row["difference"] == 0 and (row["ids_low"], row["ids_high"]) == (0, 0)
    assert row["verdict"] == "no difference" and row["win_rate"] == 0.5 and row["p_value"] == 1.0


def test_a_difference_that_flips_between_seeds_is_no_difference():
    """Within each seed the ids interval excludes 0 on the seed-averaged difference, but the seed means disagree
    in sign: the seeds interval covers 0, so the verdict is no difference."""
    rng = np.random.default_rng(2)
    rows = []
    for seed, shift in enumerate([0.6, -0.3, 0.5]):
        b = rng.normal(0, 0.1, 300)
        rows += two_sources(b + shift, b, seed=seed)
    row = compare_sources(frame(rows), ["A", "B"], CompareConfig(by_label=False)).row(0, named=True)
    assert row["seeds"] == 3 and row["ids_low"] > 0
    assert row["seeds_low"] < 0 < row["seeds_high"]
    assert row["seed_sd"] == pytest.approx(np.std([0.6, -0.3, 0.5], ddof=1), abs=0.02)
    assert row["verdict"] == "no difference"


def test_per_label_breakdown_and_instances_present_in_both():
    # A beats B on label p by 1, ties on q; id i5 has no B score and is left out
    a = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 9.0])
    b = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    labels = ["p", "p", "p", "q", "q", "q"]
    rows = two_sources(a, b, labels=labels)
    table = compare_sources(frame(rows), ["A", "B"], CompareConfig(n_boot=200, n_permutations=200))
    overall = table.filter(pl.col("label") == ALL_LABELS).row(0, named=True)
    assert overall["n"] == 5 and overall["difference"] == pytest.approx(3 / 5)
    by = {r["label"]: r for r in table.filter(pl.col("label") != ALL_LABELS).iter_rows(named=True)}
    assert by["p"]["difference"] == 1.0 and by["p"]["n"] == 3
    assert by["q"]["difference"] == 0.0 and by["q"]["verdict"] == "no difference"


def test_three_sources_get_adjusted_p_values_and_las_is_not_compared():
    rng = np.random.default_rng(3)
    base = rng.normal(0, 1, 100)
    rows = [(0, f"i{i}", src, metric, float(v), "x") for metric in ("larev", "las")
            for src, values in (("A", base + 0.3), ("B", base), ("C", base + rng.normal(0, 0.01, 100)))
            for i, v in enumerate(values)]
    table = compare_sources(frame(rows), ["A", "B", "C"], CompareConfig(by_label=False))
    assert table["metric"].unique().to_list() == ["larev"] and table.height == 3
    assert (table["p_adjusted"] >= table["p_value"] - 1e-12).all()
    text = compare_markdown(table, ["A", "B", "C"], skipped=["las"], seeds=1, config=CompareConfig())
    assert "Benjamini-Hochberg" in text and "Not compared: las" in text and "does not cover training" in text
    assert compare_plot(table)[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_source_is_named():
    with pytest.raises(ValueError, match="'Z'"):
        compare_sources(frame(two_sources(np.zeros(3), np.zeros(3))), ["A", "Z"])


def signature(settings: dict | None = None, seed: int = 0, backbone: str = "embedded") -> str:
    return make_signature("larev", "v1", backbone, None, settings or {"lr": 1e-3}, seed, "0.1.0")


def signed(rows: list[tuple], signatures: dict[tuple[int, str], str | None]) -> pl.DataFrame:
    """frame(rows) with each (seed, source)'s signature."""
    df = frame(rows)
    keys = pl.DataFrame([(seed, source, sig) for (seed, source), sig in signatures.items()],
                        schema={"seed": pl.Int64, "source": pl.String, "signature": pl.String}, orient="row")
    return df.join(keys, on=["seed", "source"], how="left")


def test_two_sources_whose_signatures_differ_in_settings_are_refused_naming_the_field():
    rows = two_sources(np.zeros(5), np.ones(5))
    a, b = signature({"lr": 1e-3}), signature({"lr": 1e-4})
    scores = signed(rows, {(0, "A"): a, (0, "B"): b})
    with pytest.raises(NotComparable) as refused:
        check_signatures(scores, ["A", "B"], ["larev"], runs=["runs/demo"])
    message = str(refused.value)
    assert "\n" not in message and message.startswith("larev: A and B in runs/demo were not scored the same way")
    settings_a, settings_b = a.split("|")[2].split(":")[1], b.split("|")[2].split(":")[1]
    assert f"signatures differ in settings (A {settings_a}, B {settings_b})" in message
    assert "seed" not in message.split(";")[0]  # only the field that differs
    # a metric not compared is not checked
    assert check_signatures(scores, ["A", "B"], [], runs=["runs/demo"]) == ({}, [])


def test_runs_read_as_seeds_may_differ_in_their_seed_only():
    rows = two_sources(np.zeros(5), np.ones(5), seed=0) + two_sources(np.zeros(5), np.ones(5), seed=1)
    s0, s1 = signature(seed=0), signature(seed=1)
    scores = signed(rows, {(0, "A"): s0, (0, "B"): s0, (1, "A"): s1, (1, "B"): s1})
    shown, warnings = check_signatures(scores, ["A", "B"], ["larev"], runs=["r0", "r1"])
    assert warnings == [] and shown == {"larev": s0.replace("|seed:0|", "|seed:0,1|")}
    table = compare_sources(scores, ["A", "B"], CompareConfig(by_label=False), signatures=shown)
    assert table["signature"].to_list() == [shown["larev"]]
    text = compare_markdown(table, ["A", "B"], skipped=[], seeds=2, config=CompareConfig())
    assert f"Signature: `{shown['larev']}`" in text
    # another backbone in the second run: not a seed of the same protocol
    other = signature(seed=1, backbone="minilm")
    scores = signed(rows, {(0, "A"): s0, (0, "B"): s0, (1, "A"): other, (1, "B"): other})
    with pytest.raises(NotComparable, match=r"^larev: runs r0 and r1 are not seeds of one protocol .*backbone "
                                            r"\(r0 embedded, r1 minilm\), seed \(r0 0, r1 1\)"):
        check_signatures(scores, ["A", "B"], ["larev"], runs=["r0", "r1"])


def test_seeds_signature_lists_the_seeds_in_numeric_order():
    assert seeds_signature([signature(seed=10), signature(seed=2), signature(seed=2)]) == \
        signature(seed=2).replace("|seed:2|", "|seed:2,10|")


def test_an_unsigned_source_beside_a_signed_one_is_compared_with_one_warning():
    rows = two_sources(np.zeros(5), np.ones(5)) + two_sources(np.zeros(5), np.ones(5), metric="rev")
    scores = signed(rows, {(0, "A"): signature(), (0, "B"): None})
    shown, warnings = check_signatures(scores, ["A", "B"], ["larev", "rev"], runs=["runs/demo"])
    assert shown == {"larev": signature(), "rev": signature()}
    assert len(warnings) == 1 and "B in runs/demo (larev, rev) carry no signature" in warnings[0]
    text = compare_markdown(compare_sources(scores, ["A", "B"], CompareConfig(by_label=False), signatures=shown),
                            ["A", "B"], skipped=[], seeds=1, config=CompareConfig(), warnings=warnings)
    assert "**Warning:** compared without a signature check" in text
    # nothing signed at all (tables written before signatures): no warning, no signature shown
    shown, warnings = check_signatures(frame(rows), ["A", "B"], ["larev"])
    assert shown == {"larev": None} and warnings == []
    table = compare_sources(frame(rows), ["A", "B"], CompareConfig(by_label=False), signatures=shown)
    assert "Signature: none" in compare_markdown(table, ["A", "B"], skipped=[], seeds=1, config=CompareConfig())
