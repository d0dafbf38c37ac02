"""Agreement with human judgements: the statistics against values worked out by hand, the annotation reader on
small files of both layouts, and the tables built from scores."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from larev.errors import ConfigError, InputError
from larev.human.agreement import (kendall_tau_b, paired_pairwise_difference, pairwise_accuracy, pairwise_credits,
                                   spearman, spearman_interval)
from larev.human.annotations import check_annotations, read_annotations
from larev.human.report import acceptability_agreement, fine_grained_agreement, human_markdown


# ------------------------------------------------------------------------------------------------ statistics
def test_spearman_by_hand():
    # ranks x: 1 2 3 4, ranks y: 1 3 2 4 -> d^2 = 0 1 1 0 -> rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(0.8)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))  # a constant side has no ranking


def test_kendall_tau_b_by_hand():
    # pairs of (1,2,3,4) vs (10,30,20,40): 5 concordant, 1 discordant, no ties -> (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(4 / 6)
    # x = (1, 1, 2), y = (1, 2, 3): pairs (0,1) tie in x, (0,2) and (1,2) concordant -> 2 / sqrt(2 * 3)
    assert kendall_tau_b([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))


def test_pairwise_credits_count_only_pairs_people_rank_differently():
    frame = pl.DataFrame({"id": ["a", "a", "a", "b", "b"],
                          "score": [3.0, 1.0, 1.0, 0.0, 0.0],
                          "human": [1.0, 0.0, 0.5, 1.0, 1.0]})
    credits = pairwise_credits(frame, "score", "human")
    # a: (3 vs 1, human 1 vs 0) right; (3 vs 1, 1 vs .5) right; (1 vs 1 tie, 0 vs .5) half -> 2.5 of 3
    # b: people tie: no pair
    assert credits.to_dicts() == [{"id": "a", "credit": 2.5, "pairs": 3}, {"id": "b", "credit": 0.0, "pairs": 0}]
    result = pairwise_accuracy(credits, n_boot=100)
    assert result["accuracy"] == pytest.approx(2.5 / 3) and result["pairs"] == 3
    assert result["ci"][0] <= result["accuracy"] <= result["ci"][1]


def test_paired_difference_by_hand_on_the_instances_both_scorers_share():
    scorer = pl.DataFrame({"id": ["a", "b", "c", "d"], "credit": [2.0, 1.0, 0.0, 2.0], "pairs": [3, 1, 0, 2]})
    reference = pl.DataFrame({"id": ["a", "b", "d"], "credit": [1.0, 1.0, 0.0], "pairs": [3, 1, 1]})
    # c has no pair, d has different pairs on the two sides (not the same explanations): both left out
    # a: 2 - 1 of 3 pairs, b: 1 - 1 of 1 -> (1 + 0) / 4
    result = paired_pairwise_difference(scorer, reference, n_boot=200)
    assert result["difference"] == pytest.approx(0.25) and result["pairs"] == 4
    assert result["ci"][0] <= 0.25 <= result["ci"][1]
    # the same credits on both sides: no difference, whatever the draw
    same = paired_pairwise_difference(scorer, scorer, n_boot=200)
    assert same["difference"] == 0.0 and same["ci"] == [0.0, 0.0]


def test_spearman_interval_covers_the_estimate_and_shrinks_with_more_instances():
    rng = np.random.default_rng(0)

    def frame(n):
        human = rng.random(n)
        return pl.DataFrame({"id": [f"i{k // 3}" for k in range(n)], "human": human,
                             "score": human + rng.normal(0, 0.5, n)})

    small, large = frame(60), frame(600)
    lo_s, hi_s = spearman_interval(small, "score", "human", n_boot=300)
    lo_l, hi_l = spearman_interval(large, "score", "human", n_boot=300)
    assert lo_l <= spearman(large["score"], large["human"]) <= hi_l
    assert hi_l - lo_l < hi_s - lo_s


# ------------------------------------------------------------------------------------------------ reading files
def _fine_file(tmp_path, rows=None):
    base = {"question": "Where is a cat?", "choices": ["home", "sea", "sky"], "label": "home"}
    rows = rows or [
        {"id": "q1", "source": "cose", "rationale": "Cats live at home.", "annotator": a, "new_info": n,
         "supports_label": s} for a, (n, s) in enumerate([(1, 1), (1, -1), (-1, None)])] + [
        {"id": "q1", "source": "gpt3", "rationale": "A home is where cats sleep.", "annotator": a, "new_info": 1,
         "supports_label": 1} for a in range(3)]
    path = tmp_path / "fine.parquet"
    pl.DataFrame([{**base, **r} for r in rows]).write_parquet(path)
    return path


def test_read_fine_grained_counts_the_share_of_new_and_supporting(tmp_path):
    ann = read_annotations(_fine_file(tmp_path))
    assert (ann.kind, ann.task) == ("fine_grained", "qa")
    assert ann.examples.select("id", "split").to_dicts() == [{"id": "q1", "split": "test"}]
    human = dict(ann.judgements.select("source", "human").iter_rows())
    assert human == {"cose": pytest.approx(1 / 3), "gpt3": 1.0}
    assert sorted(ann.rationales["source"]) == ["cose", "gpt3"]


def test_read_acceptability_sets_empty_explanations_aside_with_a_reason(tmp_path):
    base = {"premise": "A dog runs.", "hypothesis": "An animal moves.", "label": "entailment"}
    rows = [{"id": "p1", "candidate": c, "rationale": text, "annotator": a, "acceptable": int(a < c),
             "gpt3_nll": float(c)} for c, text in [(1, "Dogs are animals."), (2, "Running is moving, dogs are "
                                                                                  "animals."), (3, " ")]
            for a in range(3)]
    path = tmp_path / "acc.jsonl"
    pl.DataFrame([{**base, **r} for r in rows]).write_ndjson(path)
    ann = read_annotations(path)
    assert (ann.kind, ann.task) == ("acceptability", "nli")
    assert ann.skipped.select("id", "source", "row", "reason").to_dicts() == [
        {"id": "p1", "source": "candidate-3", "row": 6, "reason": "empty explanation"}]
    j = {r["source"]: r for r in ann.judgements.iter_rows(named=True)}
    assert (j["candidate-1"]["votes"], j["candidate-2"]["votes"]) == (1, 2)
    assert (j["candidate-1"]["length"], j["candidate-2"]["length"]) == (3.0, 6.0)


def test_annotation_errors_name_the_file_row_and_column(tmp_path):
    path = tmp_path / "bad.parquet"
    pl.DataFrame({"id": ["q1"], "question": ["Q?"], "rationale": ["r"]}).write_parquet(path)
    with pytest.raises(InputError, match="bad.parquet.*not an annotation file"):
        read_annotations(path)
    rows = [{"id": "q1", "source": "cose", "rationale": t, "annotator": a, "new_info": 1, "supports_label": 1}
            for a, t in enumerate(["one text", "another text"])]
    with pytest.raises(InputError, match=r"fine.parquet: row 0, column 'rationale': item \('q1', 'cose'\) has "
                                         "different explanation texts"):
        read_annotations(_fine_file(tmp_path, rows))


def test_check_annotations_wants_the_runs_task_and_one_file_per_kind(tmp_path):
    fine = str(_fine_file(tmp_path))
    assert [a.kind for a in check_annotations("run-a", [fine], "qa")] == ["fine_grained"]
    with pytest.raises(ConfigError, match="fine.parquet: QA annotations, but the run run-a was trained on NLI"):
        check_annotations("run-a", [fine], "nli")
    with pytest.raises(ConfigError, match="two annotation files of one kind"):
        check_annotations("run-a", [fine, fine], "qa")


# ------------------------------------------------------------------------------------------------ tables
def _scores(metric: str, values: dict[tuple[str, str], float]) -> list[dict]:
    return [{"metric": metric, "id": i, "source": s, "score": v} for (i, s), v in values.items()]


def test_fine_grained_table_by_hand(tmp_path):
    ann = read_annotations(_fine_file(tmp_path))  # human: cose 1/3, gpt3 1
    scores = pl.DataFrame(_scores("rev", {("q1", "cose"): 0.1, ("q1", "gpt3"): 0.7, ("q1", "vacuous"): 0.0})
                          + _scores("larev", {("q1", "cose"): 0.9, ("q1", "gpt3"): 0.2}))
    out = fine_grained_agreement(ann, scores, n_boot=50)
    assert list(out) == ["rev", "larev"]  # the metrics' usual order
    assert out["rev"]["spearman"] == pytest.approx(1.0) and out["rev"]["pairwise"] == 1.0
    assert out["larev"]["spearman"] == pytest.approx(-1.0) and out["larev"]["pairwise"] == 0.0
    assert out["larev"]["pairwise_minus_rev"]["difference"] == -1.0 and "pairwise_minus_rev" not in out["rev"]
    assert out["rev"]["by_source"]["gpt3"] == {"metric": pytest.approx(0.7), "human": 1.0, "n": 1}
    assert "vacuous" not in out["rev"]["by_source"]


def test_acceptability_table_has_the_baselines(tmp_path):
    base = {"premise": "A dog runs.", "hypothesis": "An animal moves.", "label": "entailment"}
    rows = [{"id": f"p{k}", "candidate": c, "rationale": f"explanation {c} " + "word " * c, "annotator": a,
             "acceptable": int(a < c), "gpt3_nll": float(4 - c)} for k in range(4) for c in (1, 2, 3)
            for a in range(3)]
    path = tmp_path / "acc.parquet"
    pl.DataFrame([{**base, **r} for r in rows]).write_parquet(path)
    ann = read_annotations(path)
    # votes rise with the candidate number; REV agrees, RQ disagrees
    scores = pl.DataFrame(_scores("rev", {(f"p{k}", f"candidate-{c}"): float(c) for k in range(4) for c in (1, 2, 3)})
                          + _scores("rq", {(f"p{k}", f"candidate-{c}"): -float(c) for k in range(4)
                                           for c in (1, 2, 3)}))
    out = acceptability_agreement(ann, scores, n_boot=50)
    assert list(out) == ["rev", "rq", "gpt3_nll", "length", "chance"]
    assert out["rev"]["pairwise_accuracy"] == 1.0 and out["rq"]["pairwise_accuracy"] == 0.0
    assert out["gpt3_nll"]["pairwise_accuracy"] == 1.0  # lower NLL on the more accepted ones
    assert out["length"]["pairwise_accuracy"] == 1.0 and out["rev"]["pairs"] == 12
    # paired against REV: RQ orders every pair the other way (0 - 1 on each instance's pairs), GPT-3 as REV does
    assert out["rq"]["minus_rev"] == {"difference": -1.0, "ci": [-1.0, -1.0], "pairs": 12}
    assert out["gpt3_nll"]["minus_rev"]["difference"] == 0.0 and "minus_rev" not in out["rev"]
    text = human_markdown({"acceptability": out, "files": {}}, title="t")
    assert "| gpt3_nll | 1.000 [1.000, 1.000] | 0.000 [0.000, 0.000] | 12 |" in text
    assert "| rev | 1.000 [1.000, 1.000] | - | 12 |" in text
