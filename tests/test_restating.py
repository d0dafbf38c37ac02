"""Natural label leakage in QA rationales: which rationales restate their answer, their masked copies, and the
natural-leakage table of `larev bench quality` (values worked out by hand)."""

from __future__ import annotations

import polars as pl
import pytest

from larev.bench.quality import natural_leakage_markdown, natural_leakage_results
from larev.data.restating import (ANSWER_MASK, RESTATING_MASKED_SOURCE, mask_answer, masked_rationales,
                                  restates_answer)


@pytest.mark.parametrize("rationale, answer, expected", [
    ("Old clocks have chimes.", "old clock", True),  # inflected last word, other case
    ("A house is the only place that is not likely to sell things", "house", True),
    ("You will get   arrested for that.", "get arrested", True),  # whitespace between the answer's words
    ("the process of aging in humans", "headache", False),
    ("A carpet covers the floor.", "car", False),  # not inside another word
    ("Use a scar to remember.", "car", False),
    ("", "house", False),
    ("Anything at all.", "?!", False),  # an answer without a word has no occurrence
])
def test_restates_answer(rationale, answer, expected):
    assert restates_answer(rationale, answer) is expected


def test_mask_answer_replaces_every_occurrence_and_keeps_the_rest():
    text = "Old clocks have chimes. An old clock rings, old-clock fans say."
    m = ANSWER_MASK
    assert mask_answer(text, "old clock") == f"{m} have chimes. An {m} rings, {m} fans say."
    assert mask_answer("Nothing here.", "house") == "Nothing here."


def test_masked_rationales_are_the_restating_rows_only():
    examples = pl.DataFrame({"id": ["a", "b", "c"], "label": ["house", "headache", "old clock"],
                             "rationale": ["A house is safe.", "Aging hurts.", "Old clocks chime."]})
    out = masked_rationales(examples)
    assert out.to_dicts() == [
        {"id": "a", "source": RESTATING_MASKED_SOURCE, "rationale": f"A {ANSWER_MASK} is safe.", "label": "house"},
        {"id": "c", "source": RESTATING_MASKED_SOURCE, "rationale": f"{ANSWER_MASK} chime.", "label": "old clock"}]


def _rows(metric: str, source: str, scores: dict[str, float], aggregate: str = "mean",
          leaks: dict[str, bool] | None = None) -> list[dict]:
    return [{"id": i, "source": source, "metric": metric, "score": s, "aggregate": aggregate,
             "leaks": None if leaks is None else leaks[i]} for i, s in scores.items()]


def test_natural_leakage_table_by_hand():
    # a and b restate (they have masked copies), c and d do not
    rows = (_rows("rev", "gold", {"a": 1.0, "b": 3.0, "c": 0.5, "d": 1.5})
            + _rows("rev", RESTATING_MASKED_SOURCE, {"a": 0.0, "b": 2.0})
            + _rows("rev", "leaky", {"a": 9.0, "b": 9.0, "c": 9.0, "d": 9.0}))  # other sources play no part
    scores = pl.DataFrame(rows)
    out = natural_leakage_results(scores, n_boot=200)["rev"]
    assert out["restating"] == pytest.approx(2.0)  # (1 + 3) / 2
    assert out["restating_masked"] == pytest.approx(1.0)  # (0 + 2) / 2
    assert out["non_restating"] == pytest.approx(1.0)  # (0.5 + 1.5) / 2
    assert out["restating_minus_masked"] == pytest.approx(1.0)
    assert out["share"] == pytest.approx(0.5)
    # paired: every resample's difference is 1, so the interval is the point
    assert out["ci"]["restating-restating_masked"] == pytest.approx([1.0, 1.0])
    low, high = out["ci"]["restating"]
    assert 1.0 <= low <= 2.0 <= high <= 3.0
    lines = "\n".join(natural_leakage_markdown({"rev": out}))
    assert "| rev | 2.000 [" in lines and "| 0.500 |" in lines


def test_natural_leakage_uses_las_macro_average_per_group():
    leaks = {"a": True, "b": False, "c": True, "d": False}
    rows = (_rows("las", "gold", {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0}, "leak_macro", leaks)
            + _rows("las", RESTATING_MASKED_SOURCE, {"a": 0.0, "b": 0.0}, "leak_macro", {"a": False, "b": False}))
    out = natural_leakage_results(pl.DataFrame(rows), n_boot=0)["las"]
    assert out["restating"] == pytest.approx(0.5)  # (1 / 1 + 0 / 1) / 2
    assert out["restating_masked"] is None  # no leaking rationale among the masked copies: undefined, null in JSON
    assert "ci" not in out


def test_no_masked_copies_no_table():
    scores = pl.DataFrame(_rows("rev", "gold", {"a": 1.0}))
    assert natural_leakage_results(scores, n_boot=10) == {}
    assert natural_leakage_markdown({}) == []
