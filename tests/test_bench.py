"""bench quality's results.json layout from a summary."""

from __future__ import annotations

import polars as pl
import pytest

from larev.bench import quality_markdown, quality_results


def test_results_layout():
    rows = []
    for metric, base in (("rev", 0.0), ("larev", 1.0)):
        for source, score, acc in (("gold", 2.0, 0.9), ("leaky", 0.5, 0.8), ("gold_leaky", 1.5, 0.9),
                                   ("vacuous", 0.0, 0.5), ("my-model", 9.0, 1.0)):
            rows.append({"metric": metric, "source": source, "score": score + base, "accuracy_with": acc,
                         "accuracy_base": 0.5, "n": 10})
    summary = pl.DataFrame(rows)
    results = quality_results(summary, n_test=10, seconds=12.34)
    assert set(results) == {"scores", "accuracy", "separations", "n_test", "seconds"}
    assert results["scores"]["larev"] == {"gold": 3.0, "leaky": 1.5, "gold_leaky": 2.5, "vacuous": 1.0}
    assert results["accuracy"]["rev"]["vacuous"] == 0.5
    assert results["separations"]["rev"] == pytest.approx(
        {"gold-leaky": 1.5, "gold-gold_leaky": 0.5, "gold-vacuous": 2.0, "SUM": 4.0})
    assert results["n_test"] == 10 and results["seconds"] == 12.3
    md = quality_markdown(summary, results, title="t")
    assert "| larev | 3.000 | 1.500 | 2.500 | 1.000 |" in md


def test_undefined_las_is_null_in_results():
    import json

    summary = pl.DataFrame({"metric": ["las", "las"], "source": ["gold", "leaky"], "score": [0.1, float("nan")],
                            "accuracy_with": [0.9, 1.0], "accuracy_base": [0.5, 0.5], "n": [10, 10]})
    results = quality_results(summary, n_test=10, seconds=1.0)
    assert results["scores"]["las"] == {"gold": 0.1, "leaky": None}
    assert results["separations"]["las"]["gold-leaky"] is None
    assert "NaN" not in json.dumps(results)
