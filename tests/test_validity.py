"""The validity benchmark's pure parts: perturbations on hand-written examples, the criteria against values worked
out by hand (and sklearn / scipy), the bootstrap over seeds and instances, the protocol's thresholds as the marks
read them, the human split and the ledger."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats
from sklearn.metrics import average_precision_score, roc_auc_score

from larev.baselines.nli import _PHRASINGS
from larev.data.variants import LEAKY_TEMPLATE
from larev.errors import ConfigError
from larev.methods.leakage_aware.instances import LABEL_STATEMENT_TEMPLATES
from larev.validity import perturb
from larev.validity.criteria import (Draws, combine_seeds, interval, order_credit, ratio, weighted_auroc,
                                     weighted_average_precision, weighted_spearman)
from larev.validity.human_split import human_half, in_tune_half
from larev.validity.ledger import begin_reading, end_reading, read_ledger, readings
from larev.validity.protocol import is_met, load_protocol, protocol_digest

REPO = Path(__file__).resolve().parents[1]
PROTOCOL_V2 = REPO / "protocols" / "validity-v2.yaml"
PROTOCOL = REPO / "protocols" / "validity.yaml"


# ---- perturbations ------------------------------------------------------------------------------------------

def test_shuffled_moves_only_content_words_and_keeps_them():
    gold = "a dog runs in the park ."
    out = perturb.shuffled(gold, np.random.default_rng(0))
    words, before = out.split(), gold.split()
    assert out != gold and Counter(words) == Counter(before)
    for i, w in enumerate(before):
        if w in ("a", "in", "the", "."):
            assert words[i] == w  # function words and punctuation stay where they were
    assert perturb.shuffled("the dog is here", np.random.default_rng(0)) is None  # one content word: nothing to move


def test_truncated_keeps_the_first_half():
    assert perturb.truncated("one two three four five") == "one two"
    assert perturb.truncated("one two three four") == "one two"
    assert perturb.truncated("alone") is None


def test_noun_swapped_replaces_the_key_word_with_another_instances():
    gold = "the dog is in the park , so the dog is outside ."
    out = perturb.noun_swapped(gold, "A dog runs in the park .", "a cat sleeps on the sofa", "A cat sleeps on a sofa .",
                               "A dog runs in the park . The dog is outside .")
    # the key word: the longest content word of the premise gold repeats (park, 4 letters, beats dog); the donor's
    # own key word: 'sleeps' (longest of cat / sleeps / sofa shared by its rationale and premise)
    assert out == "the dog is in the sleeps , so the dog is outside ."
    # no content word shared with the premise: nothing to swap
    assert perturb.noun_swapped("it is obvious", "A dog runs .", "a cat", "A cat .", "A dog runs .") is None


def test_negated_adds_or_removes_one_negation():
    assert perturb.negated("the man is sleeping .") == "the man is not sleeping ."
    assert perturb.negated("the man is not sleeping .") == "the man is sleeping ."
    assert perturb.negated("the man does n't sleep") == "the man does sleep"  # e-SNLI's tokens
    assert perturb.negated("he ca n't swim") == "he can swim" and perturb.negated("he won't swim") == "he will swim"
    assert perturb.negated("she cannot sing") == "she can sing"
    assert perturb.negated("dogs run fast") is None  # no auxiliary, no negation


def test_novel_label_statements_use_no_template_of_the_project():
    templates = [t.lower() for phrasings in _PHRASINGS.values() for t in phrasings]
    templates += [LEAKY_TEMPLATE.lower(), *(t.lower() for t in LABEL_STATEMENT_TEMPLATES)]
    for label, statement in perturb.NOVEL_LABEL_STATEMENTS.items():
        assert label not in statement
        words = statement.split()
        for template in templates:  # no three words of a statement in a row in any template
            for i in range(len(words) - 2):
                assert " ".join(words[i:i + 3]) not in template, (statement, template)


def _nli_examples() -> pl.DataFrame:
    return pl.DataFrame({
        "id": ["e1", "e2", "e3"],
        "premise": ["A dog runs in the park .", "A woman sings on a stage .", "Two kids eat cake ."],
        "hypothesis": ["An animal is outside .", "A woman is silent .", "Kids are eating ."],
        "label": ["entailment", "contradiction", "entailment"],
        "rationale": ["a dog in a park is outside", "she cannot sing and be silent", "kids eat cake"],
        "rationale_2": ["dogs are animals", None, "eating cake is eating"],
        "rationale_3": ["parks are outside", "singing is not silent", ""],
    })


def test_every_kind_is_built_and_what_cannot_be_built_is_counted():
    built = perturb.perturbations(_nli_examples(), "nli", seed=0)
    rows = {(r["id"], r["source"]): r["rationale"] for r in built.rows.iter_rows(named=True)}
    assert rows[("e1", "perturb_explanation_2")] == "dogs are animals"
    assert rows[("e2", "perturb_hypothesis_copied")] == "A woman is silent ."
    assert rows[("e3", "perturb_premise_copied")] == "Two kids eat cake ."
    assert rows[("e1", "perturb_label_novel")] == perturb.NOVEL_LABEL_STATEMENTS["entailment"]
    assert rows[("e2", "perturb_negated")] == "she can sing and be silent"
    assert built.skipped["explanation_2"] == 1 and built.skipped["explanation_3"] == 1  # e2's null, e3's blank
    assert set(built.rows["label"]) <= {"entailment", "contradiction"}
    assert all(s.startswith(perturb.PREFIX) for s in built.rows["source"])


def test_an_instances_perturbation_does_not_depend_on_the_other_rows():
    whole = perturb.perturbations(_nli_examples(), "nli", seed=3, kinds=("shuffled",)).rows
    alone = perturb.perturbations(_nli_examples().slice(1, 1), "nli", seed=3, kinds=("shuffled",)).rows
    assert alone.row(0) == whole.filter(pl.col("id") == "e2").row(0)


def test_qa_has_no_premise_kinds_and_a_kind_of_another_task_is_refused():
    qa = pl.DataFrame({"id": ["q1"], "question": ["Where do fish live ?"], "choices": [["water", "sky"]],
                       "label": ["water"], "rationale": ["fish live in water"]})
    built = perturb.perturbations(qa, "qa")
    assert "perturb_premise_copied" not in set(built.rows["source"])
    assert built.rows.filter(pl.col("source") == "perturb_label_novel")["rationale"][0] == "my pick would be water"
    with pytest.raises(ValueError, match="premise_copied"):
        perturb.perturbations(qa, "qa", kinds=("premise_copied",))


# ---- criteria, worked by hand ---------------------------------------------------------------------------------

SCORES = np.array([0.1, 0.4, 0.35, 0.8])
LABELS = np.array([0, 0, 1, 1])


def test_auroc_by_hand():
    # positives 0.35 and 0.8 against negatives 0.1 and 0.4: 0.35 beats 0.1 only, 0.8 beats both -> 3 of 4
    assert weighted_auroc(SCORES, LABELS)[0] == pytest.approx(0.75)
    assert roc_auc_score(LABELS, SCORES) == pytest.approx(0.75)
    # a tie counts 1/2: positives 1 and 2 against the negative 1 -> (0.5 + 1) / 2
    assert weighted_auroc([1, 1, 2], [0, 1, 1])[0] == pytest.approx(0.75)


def test_average_precision_by_hand():
    # highest first: 0.8 (positive: precision 1, recall 1/2), 0.4 (negative), 0.35 (positive: precision 2/3,
    # recall 1) -> 1/2 * 1 + 1/2 * 2/3
    assert weighted_average_precision(SCORES, LABELS)[0] == pytest.approx(5 / 6)
    assert average_precision_score(LABELS, SCORES) == pytest.approx(5 / 6)
    # tied scores form one threshold: [1, 1] with one positive -> precision 1/2 at recall 1
    assert weighted_average_precision([1, 1], [0, 1])[0] == pytest.approx(0.5)
    assert average_precision_score([0, 1], [1, 1]) == pytest.approx(0.5)


def test_spearman_by_hand():
    # ranks of y: 1, 2, 3.5, 5, 3.5; deviations x -2..2, y -2, -1, .5, 2, .5: cov 8, var 10 and 9.5
    x, y = [1, 2, 3, 4, 5], [5, 6, 7, 8, 7]
    assert weighted_spearman(x, y)[0] == pytest.approx(8 / np.sqrt(95))
    assert stats.spearmanr(x, y).statistic == pytest.approx(8 / np.sqrt(95))
    assert np.isnan(weighted_spearman([1, 1, 1], [1, 2, 3])[0])  # a constant side has no rank correlation


def test_integer_weights_equal_the_resample_written_out():
    rng = np.random.default_rng(1)
    scores, labels, other = rng.normal(size=30).round(1), rng.integers(0, 2, size=30), rng.normal(size=30)
    counts = rng.integers(0, 4, size=(5, 30)).astype(float)
    for b, w in enumerate(counts):
        rows = np.repeat(np.arange(30), w.astype(int))
        assert weighted_auroc(scores, labels, counts)[b] == pytest.approx(roc_auc_score(labels[rows], scores[rows]))
        assert weighted_average_precision(scores, labels, counts)[b] == pytest.approx(
            average_precision_score(labels[rows], scores[rows]))
        assert weighted_spearman(scores, other, counts)[b] == pytest.approx(
            stats.spearmanr(scores[rows], other[rows]).statistic)


def test_ratio_and_order_credit():
    assert order_credit([2, 1, 1], [1, 1, 2]).tolist() == [1.0, 0.5, 0.0]
    assert ratio([1, 0.5, 0], [1, 1, 1], np.array([[2, 0, 1]]))[0] == pytest.approx(2 / 3)


def test_the_interval_covers_the_spread_over_seeds():
    draws = Draws("x", n_instances=50, n_seeds=5, n_boot=400)
    flat = np.tile(np.full(400, 0.6), (5, 1))  # every seed the same: no training variance
    spread = np.array([np.full(400, v) for v in (0.5, 0.55, 0.6, 0.65, 0.7)])  # seeds differ, instances do not
    assert interval(combine_seeds(flat, draws), 0.95) == pytest.approx((0.6, 0.6))
    low, high = interval(combine_seeds(spread, draws), 0.95)
    assert low < 0.57 and high > 0.63  # the seeds' spread shows in the interval
    # the same criterion draws the same instances for every scorer (paired): the draws follow from its name
    assert (Draws("x", 50, 5, 10).instances == Draws("x", 50, 5, 10).instances).all()


# ---- the protocol and its thresholds --------------------------------------------------------------------------

def test_the_repositorys_protocol_reads_and_names_every_criterion():
    protocol = load_protocol(PROTOCOL)
    assert len(protocol.seeds) >= 5 and protocol.tasks["nli"].splits == {"tune": "6000:8000", "report": "8000:"}
    assert protocol.criterion("acceptability_auroc/snli_acceptability").threshold == 0.5
    assert protocol.criterion("perturb/shuffled").direction == "below"
    assert protocol.criterion("perturb/explanation_2").judge == "abs_value"
    assert protocol.criterion("perturb_order/explanation_2") is None  # no expected order between two people
    assert protocol.criterion("perturb_corr/explanation_2").threshold == 0.5
    assert protocol_digest(PROTOCOL) == hashlib.sha256(PROTOCOL.read_bytes()).hexdigest()


def test_a_bad_protocol_names_the_field(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text(PROTOCOL.read_text().replace("judge: low}         # acceptable", "judge: lowest}      # acceptable"))
    with pytest.raises(ConfigError, match="acceptability_auroc.judge"):
        load_protocol(bad)
    with pytest.raises(ConfigError, match="no such protocol"):
        load_protocol(tmp_path / "missing.yaml")


def test_is_met_reads_direction_threshold_and_part():
    protocol = load_protocol(PROTOCOL)
    auroc = protocol.criterion("acceptability_auroc/f")
    assert is_met(auroc, 0.6, 0.52, 0.68) is True and is_met(auroc, 0.6, 0.48, 0.7) is False
    ap = protocol.criterion("acceptability_ap/f")
    assert is_met(ap, 0.5, 0.45, 0.55, prevalence=0.4) is True and is_met(ap, 0.5, 0.45, 0.55, prevalence=0.46) is False
    near = protocol.criterion("perturb/explanation_2")
    assert is_met(near, -0.05, -0.2, 0.1, gold_sd=0.5) is True and is_met(near, -0.15, -0.2, 0.1, gold_sd=0.5) is False
    assert is_met(near, -0.05, -0.2, 0.1) is None  # no gold sd: not judged
    below = protocol.criterion("perturb/shuffled")  # score - gold below 0, read at the interval's upper end
    assert is_met(below, -0.5, -0.7, -0.1) is True and is_met(below, -0.5, -0.9, 0.05) is False
    assert is_met(None, 0.9, 0.8, 1.0) is None


def _synthetic(protocol_path: Path) -> dict:
    """results of a made-up scorer pair on a made-up acceptability file and one perturbation, through evaluate."""
    from larev.human.annotations import Annotations
    from larev.validity.evidence import SeedScores, evaluate

    rng = np.random.default_rng(0)
    ids = [f"i{k}" for k in range(40)]
    judged = pl.DataFrame({"id": [i for i in ids for _ in range(3)],
                           "source": [f"candidate-{c}" for _ in ids for c in range(3)],
                           "votes": rng.integers(0, 4, size=120), "annotators": [3] * 120,
                           "gpt3_nll": rng.normal(size=120), "length": rng.integers(3, 20, size=120).astype(float)})
    texts = judged.select("id", "source", rationale=pl.lit("some words here"))
    ann = Annotations(name="acc", kind="acceptability", task="nli", examples=pl.DataFrame(), rationales=texts,
                      judgements=judged, notes=[], skipped=pl.DataFrame())
    human = judged.select("id", "source", metric=pl.lit("rev"),
                          score=pl.col("votes").cast(pl.Float64) + pl.Series(rng.normal(scale=1.5, size=120)))
    gold = pl.DataFrame({"id": ids, "source": "gold", "metric": "rev", "score": rng.normal(1, 1, size=40)})
    shuffled = gold.with_columns(source=pl.lit("perturb_shuffled"), score=pl.col("score") - 0.5)
    per_seed = {s: SeedScores(test=pl.concat([gold, shuffled]).select("metric", "id", "source", "score"),
                              human={"acc": human.select("metric", "id", "source", "score")}) for s in (0, 1)}
    return evaluate(load_protocol(protocol_path), "nli", per_seed, {"acc": ann})


def test_the_marks_follow_the_protocols_thresholds(tmp_path):
    from larev.validity.report import cell_text

    before = _synthetic(PROTOCOL)["scorers"]["rev"]
    assert before["pairwise/acc"]["met"] is True and cell_text(before["pairwise/acc"]).endswith("✓")
    assert before["perturb_order/shuffled"]["value"] == 1.0 and before["perturb_order/shuffled"]["met"] is True
    copy = tmp_path / "validity.yaml"
    shutil.copy(PROTOCOL, copy)
    text = copy.read_text()
    text = text.replace("pairwise: {direction: above, threshold: 0.5,", "pairwise: {direction: above, threshold: 0.95,")
    copy.write_text(text)
    after = _synthetic(copy)["scorers"]["rev"]
    assert after["pairwise/acc"]["value"] == before["pairwise/acc"]["value"]  # the same figure
    assert after["pairwise/acc"]["met"] is False and cell_text(after["pairwise/acc"]).endswith("✗")
    assert after["perturb_order/shuffled"]["met"] is True  # another criterion: unchanged


def test_a_cell_on_a_kind_the_scorer_trained_on_is_marked_and_not_judged(tmp_path):
    copy = tmp_path / "validity.yaml"
    copy.write_text(PROTOCOL.read_text().replace("  larev_vs_empty: [empty,", "  rev: [shuffled]\n  larev_vs_empty: [empty,"))
    cells = _synthetic(copy)["scorers"]["rev"]
    assert cells["perturb_order/shuffled"]["trained_on"] is True and cells["perturb_order/shuffled"]["met"] is None
    assert "trained_on" not in cells["pairwise/acc"]


# ---- the human split and the ledger ---------------------------------------------------------------------------

def test_a_protocol_that_forgets_the_signals_mark_is_refused(tmp_path):
    """Protocol v2 turns the mismatched-rationale term on for two candidates and marks what they train on; a copy
    that forgets one mark, or turns the term on for every scorer of the run without marking them, is refused
    before any step, naming the scorer and the kinds."""
    protocol = load_protocol(PROTOCOL_V2)
    assert protocol.trained_on_kinds("larev@reader-mismatch") == ["borrowed", "borrowed_other"]
    assert protocol.trained_on_kinds("larev@reader") == []
    forgot = tmp_path / "forgot.yaml"
    forgot.write_text(PROTOCOL_V2.read_text().replace("  larev@mismatch: [borrowed, borrowed_other]\n", ""))
    with pytest.raises(ConfigError, match=r"larev@mismatch on text like \['borrowed', 'borrowed_other'\]"):
        load_protocol(forgot)
    everywhere = tmp_path / "everywhere.yaml"
    everywhere.write_text(PROTOCOL_V2.read_text().replace("      rora.phi_train.epochs: 4\n",
                                                          "      rora.phi_train.epochs: 4\n      larev.lambda_mismatched: 1\n"))
    with pytest.raises(ConfigError, match=r"tasks.qa.settings sets larev.lambda_mismatched, which trains larev "):
        load_protocol(everywhere)


def test_protocol_v2_reads_its_data_from_the_data_directory(tmp_path, monkeypatch):
    """${LAREV_DATA} in protocol v2's data and human paths is the data directory: LAREV_DATA when set, else
    ../shared/data where it exists, else data/ (where `larev data get` writes)."""
    monkeypatch.setenv("LAREV_DATA", str(tmp_path / "mine"))
    protocol = load_protocol(PROTOCOL_V2)
    assert protocol.tasks["nli"].data == f"{tmp_path / 'mine'}/esnli/dev.parquet"
    assert protocol.tasks["qa"].human == [f"{tmp_path / 'mine'}/human/cqa_acceptability.parquet",
                                          f"{tmp_path / 'mine'}/human/cqa_fine_grained.parquet"]
    monkeypatch.delenv("LAREV_DATA")
    monkeypatch.chdir(tmp_path)  # no ../shared/data here
    assert load_protocol(PROTOCOL_V2).tasks["nli"].data == "data/esnli/dev.parquet"


def test_the_first_protocols_shared_paths_read_from_the_data_directory(tmp_path, monkeypatch):
    """protocols/validity.yaml names ../shared/data's files (written before ${LAREV_DATA}): with LAREV_DATA set
    they are the same files under it, where none is set they stay where they were, and the digest is the file's."""
    digest = protocol_digest(PROTOCOL)
    monkeypatch.delenv("LAREV_DATA", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "main").mkdir()
    monkeypatch.chdir(tmp_path / "main")  # a checkout beside ../shared/data, as in this workplace
    assert load_protocol(PROTOCOL).tasks["nli"].data == "../shared/data/esnli/dev.parquet"
    monkeypatch.setenv("LAREV_DATA", str(tmp_path / "mine"))
    protocol = load_protocol(PROTOCOL)
    assert protocol.tasks["nli"].data == f"{tmp_path / 'mine'}/esnli/dev.parquet"
    assert protocol.tasks["nli"].human == [f"{tmp_path / 'mine'}/human/snli_acceptability.parquet"]
    assert protocol_digest(PROTOCOL) == digest


def test_protocol_v2_decides_the_reader_crossed_with_the_signal_and_keeps_the_irm_arm():
    protocol = load_protocol(PROTOCOL_V2)
    for task in ("nli", "qa"):
        runs = {name: settings for name, (_, settings) in protocol.candidate_runs(task).items()}
        assert list(runs) == ["larev@mismatch", "larev@reader", "larev@reader-mismatch"]
        assert runs["larev@mismatch"] == {"larev.lambda_mismatched": 1.0}
        assert runs["larev@reader"]["model.backbone"] == runs["larev@reader-mismatch"]["model.backbone"] == \
            "minilm-reader"
        assert {k: v for k, v in runs["larev@reader-mismatch"].items() if k != "larev.lambda_mismatched"} == \
            runs["larev@reader"]  # the two readers differ in the signal only
    assert protocol.arm_runs("nli") == {"larev@irm": ("larev", {"larev.objective.lambda_irm": 1.0,
                                                                "larev.objective.lambda_probe": 0.005})}


def test_human_halves_split_by_instance_and_cover_the_file():
    frame = pl.DataFrame({"id": [str(k) for k in range(200) for _ in range(3)], "annotator": [0, 1, 2] * 200})
    tune, report = human_half(frame, "tune"), human_half(frame, "report")
    assert tune.height + report.height == frame.height
    assert not set(tune["id"]) & set(report["id"])
    assert 70 < tune["id"].n_unique() < 130  # about half
    assert all(in_tune_half(i) for i in tune["id"])


def test_a_reading_is_recorded_as_it_begins_and_again_as_it_ends_or_fails(tmp_path, monkeypatch):
    """Three readings: one that ended, one that failed, one whose process was killed (its `began` line alone); the
    summary counts each and names the unfinished one. Paths inside the working directory are recorded relative to
    it; the tune split is refused."""
    monkeypatch.chdir(tmp_path)
    ledger = tmp_path / "protocols" / "ledger.jsonl"
    fields = {"protocol": "d" * 64, "protocol_name": "validity-v2", "task": "nli", "split": "report",
              "seeds": [0, 1], "backbone": "embedded", "partial": False, "commit": "abc"}
    first = begin_reading(ledger, **fields, out=tmp_path / "bench" / "x")
    end_reading(ledger, first)
    second = begin_reading(ledger, **fields, out="/elsewhere/y")
    end_reading(ledger, second, error=RuntimeError("out of memory\nmore"))
    killed = begin_reading(ledger, **fields, out="bench/z")
    lines = read_ledger(ledger)
    assert [line["event"] for line in lines] == ["began", "ended", "began", "failed", "began"]
    assert lines[0]["out"] == "bench/x" and lines[2]["out"] == "/elsewhere/y"  # relative inside, as given outside
    assert lines[3]["error"] == "RuntimeError: out of memory"
    found = readings(lines, protocol="d" * 64, task="nli")
    assert [r.status for r in found.readings] == ["ended", "failed", "unfinished"]
    assert (found.count("ended"), found.count("failed"), found.count("unfinished")) == (1, 1, 1)
    assert found.lines()[2].endswith("-> bench/z: began, never ended") and killed["reading"] in {
        r.line["reading"] for r in found.readings}
    assert readings(lines, protocol="e" * 64).readings == []  # another protocol's readings are not counted
    # a whole line without an event (recorded when its reading ended) counts as ended
    assert readings([{"protocol": "d" * 64, "task": "nli", "date": "2026-11-28", "out": "b"}]).count("ended") == 1
    with pytest.raises(ValueError, match="report split"):
        begin_reading(ledger, **{**fields, "split": "tune"}, out="bench/t")


def test_no_rows_give_undefined_figures_not_a_crash():
    empty = np.zeros((3, 0))
    for figure in (weighted_auroc([], [], empty), weighted_average_precision([], [], empty),
                   weighted_spearman([], [], empty)):
        assert figure.shape == (3,) and np.isnan(figure).all()


def test_the_recommendation_says_ties_and_never_calls_a_tied_scorer_better():
    from larev.validity.report import recommendation_lines

    cell = {"value": 0.6, "low": 0.55, "high": 0.65}
    results = {"scorers": {"control_erm_envs": {"a": {**cell, "met": True}, "b": {**cell, "met": False}},
                           "rora": {"a": {**cell, "met": True}, "b": {**cell, "met": False}}}}
    first, second = recommendation_lines(results)
    assert "**control_erm_envs and rora**" in first and "then" not in first
    assert "recommends **rora**" in second and "does better" not in second
    results["scorers"]["rora"]["a"]["met"] = False
    first, second = recommendation_lines(results)
    assert "then rora 0 of 2" in first and "control_erm_envs (a control) does better" in second


def test_a_lead_the_paired_intervals_do_not_back_is_called_a_tie():
    """larev meets 2 of 2 thresholds, rev 1 of 2: larev is recommended. Paired with rev it is better on 1 criterion
    and worse on none: separated. With the paired intervals over 0 everywhere (better on none), the same counts are
    a tie, and the line says so."""
    from larev.validity.report import recommendation_lines

    met, unmet = ({"value": 0.6, "low": 0.55, "high": 0.65, "met": flag} for flag in (True, False))
    results = {"level": 0.95, "scorers": {"larev": {"a": met, "b": met}, "rev": {"a": met, "b": unmet}},
               "pairs": {"larev": {"rev": {"better": ["b"], "worse": [], "criteria": 2}}}}
    lines = recommendation_lines(results)
    assert "recommends **larev**" in lines[1]
    assert lines[2] == ("- Paired with each metric after it (the same seeds and instances; criteria where the 95 % "
                        "interval of the difference excludes 0): rev: better on 1, worse on 0 of 2.")
    results["pairs"]["larev"]["rev"]["better"] = []
    separation = recommendation_lines(results)[2]
    assert "**Not separated from rev**" in separation and "tie" in separation
    results["pairs"]["larev"]["rev"]["worse"] = ["a"]
    assert "**The paired differences favour rev**" in recommendation_lines(results)[2]
    del results["pairs"]
    assert len(recommendation_lines(results)) == 2  # results from before the pairs: no line


def test_a_metric_gains_nothing_by_training_on_the_texts_that_would_judge_it():
    """rq is not judged on b (it trains on that kind): on every judged criterion it leads (1 of 1 against 1 of 2),
    on the criteria both are judged on the two tie, and the recommendation reads the common criteria."""
    from larev.validity.report import recommendation_lines

    cell = {"value": 0.6, "low": 0.55, "high": 0.65}
    results = {"scorers": {"larev": {"a": {**cell, "met": True}, "b": {**cell, "met": False}},
                           "rq": {"a": {**cell, "met": True}, "b": {**cell, "met": None, "trained_on": True}}}}
    first, second, third = recommendation_lines(results)
    assert "**rq** (a metric), 1 of 1; then larev 1 of 2" in first
    assert "On the 1 criteria every one of them is judged on: **larev and rq**" in second
    assert "recommends **larev**" in third and "tied with rq" in third


def test_the_metric_headline_is_one_row_per_metric_with_its_signature_and_figures():
    from larev.validity.report import metric_headline

    def cell(value, met):
        return {"value": value, "low": value - 0.1, "high": value + 0.1, "met": met}

    signature = "metric:rev.v1|backbone:embedded|settings:c2e206a6|seed:42|larev:0.1.0"
    results = {"seeds": [0, 1], "signatures": {"0": {"rev": signature}, "1": {}},
               "scorers": {"control_phi": {"variant_order/leaky": cell(0.9, True)},
                           "rev": {"acceptability_auroc/snli": cell(0.6, True), "pairwise/snli": cell(0.7, True),
                                   "variant_order/leaky": cell(0.55, False),
                                   "variant_order/borrowed": {**cell(0.5, None), "trained_on": True},
                                   "perturb_order/shuffled": cell(0.8, True)}}}
    header, rule, row, *rest = metric_headline(results).splitlines()
    assert not rest  # the control is not a metric: no row
    assert header == ("| metric | signature (first seed) | auroc snli | gold above leaky | gold above borrowed | "
                      "gold above shuffled | thresholds met |")
    assert row == ("| `rev` | `metric:rev.v1\\|backbone:embedded\\|settings:c2e206a6\\|seed:42\\|larev:0.1.0` | "
                   "0.600 [0.500, 0.700] ✓ | 0.550 [0.450, 0.650] ✗ | 0.500 [0.400, 0.600]† | "
                   "0.800 [0.700, 0.900] ✓ | 3 of 4 |")


def test_the_docs_page_shows_the_committed_results_tables():
    """docs/validity.md's tables are the committed results' (docs/validity/nli-report.json and nli-tune.json), as
    `headline_table` and `split_comparison` write them: the page cannot drift from the results it cites."""
    import json

    from larev.validity.report import headline_table, split_comparison

    report, tune = (json.loads((REPO / "docs" / "validity" / f"nli-{split}.json").read_text())
                    for split in ("report", "tune"))
    page = (REPO / "docs" / "validity.md").read_text()
    assert report["split"] == "report" and tune["split"] == "tune" and report["protocol"] == tune["protocol"]
    for results in (report, tune):
        assert headline_table(results) in page
    assert page.index(headline_table(report)) < page.index(headline_table(tune))  # today's table first
    assert "\n".join(split_comparison(tune, report)).rstrip() in page
    assert report["protocol"][:12] in page


def test_the_report_split_was_read_once_and_its_ledger_line_is_committed():
    import json

    report = json.loads((REPO / "docs" / "validity" / "nli-report.json").read_text())
    lines = read_ledger(REPO / "protocols" / "ledger.jsonl")
    found = readings(lines, protocol=report["protocol"], task="nli").readings
    assert len(found) == 1 and found[0].status == "ended"
    assert found[0].line["date"] == report["date"] and found[0].line["commit"] == report["commit"]
    assert not [line for line in lines if str(line.get("out", "")).startswith("/")]  # no machine's folders
    assert not report["partial"] and len(report["seeds"]) >= 5


def test_the_results_page_opens_with_the_committed_metric_headline():
    """docs/results.md's first section is the committed report-split results' metric headline, signatures
    included."""
    import json

    from larev.validity.report import metric_headline

    results = json.loads((REPO / "docs" / "validity" / "nli-report.json").read_text())
    page = (REPO / "docs" / "results.md").read_text()
    assert page.index("## Headline") == page.index("## ")  # the first section
    assert metric_headline(results) in page
    assert not results.get("partial") and len(results["seeds"]) >= 5 and results["split"] == "report"


def test_the_report_split_beside_the_tune_split_counts_kept_verdicts_and_moved_bests():
    from larev.validity.report import split_comparison

    def cell(value, met):
        return {"value": value, "low": value - 0.1, "high": value + 0.1, "met": met}

    auroc, leaky = "acceptability_auroc/snli", "variant_order/leaky"
    tune = {"protocol": "abc", "task": "nli", "split": "tune",
            "scorers": {"rev": {auroc: cell(0.6, True), leaky: cell(0.8, True),
                                "variant_order/borrowed": {**cell(0.5, None), "trained_on": True}},
                        "r_only": {auroc: cell(0.5, False), leaky: cell(0.7, False)},
                        "rev@x": {auroc: cell(0.7, True)}},
            "best": {auroc: {"scorer": "rev@x", "value": 0.7}, leaky: {"scorer": "rev", "value": 0.8}}}
    report = {"protocol": "abc", "task": "nli", "split": "report",
              "scorers": {"rev": {auroc: cell(0.55, True), leaky: cell(0.7, False),
                                  "variant_order/borrowed": cell(0.5, False)},
                          "r_only": {auroc: cell(0.5, False), leaky: cell(0.75, True)}},
              "best": {auroc: {"scorer": "rev", "value": 0.55}, leaky: {"scorer": "r_only", "value": 0.75}}}
    header, rule, rev, r_only, blank, same, moved = split_comparison(tune, report)
    # the candidate scored on tune only has no row; borrowed is judged on report only: not a kept verdict
    assert header == ("| scorer | met, tune | met, report | verdicts kept | auroc/snli, tune | auroc/snli, report |")
    assert rev == "| rev | 2 of 2 | 1 of 3 | 1 of 2 | 0.600 [0.500, 0.700] ✓ | 0.550 [0.450, 0.650] ✓ |"
    assert r_only.startswith("| r_only | 0 of 2 | 1 of 2 | 1 of 2 |")
    # the tune-only candidate is not a best that moved: among the scorers both ran, rev leads AUROC on both
    assert same == ("Among the scorers both ran, the tune split's best per criterion is (one of) the best on the "
                    "report split for 1 of 2 criteria; it is not on:")
    assert moved == "- `variant_order/leaky`: rev 0.800 on tune (0.700 on report); r_only 0.750 on report"
    report["scorers"]["r_only"][leaky]["value"] = 0.7  # a tie for best on report: not a move
    assert split_comparison(tune, report)[-1].endswith("for 2 of 2 criteria.")
    with pytest.raises(ValueError, match="different protocols"):
        split_comparison(tune, {**report, "protocol": "abd"})
    with pytest.raises(ValueError, match="expected a tune and a report run"):
        split_comparison(report, tune)


def test_a_report_run_is_set_beside_only_the_tune_run_of_its_protocol_and_task(tmp_path):
    import json

    from larev.errors import ConfigError
    from larev.validity.protocol import protocol_digest, read_beside

    protocol = REPO / "protocols" / "validity.yaml"
    digest = protocol_digest(protocol)
    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps({"protocol": digest, "task": "nli", "split": "tune"}))
    assert read_beside(str(tune), digest, "nli", "report")["split"] == "tune"
    with pytest.raises(ConfigError, match="only a report-split run"):
        read_beside(str(tune), digest, "nli", "tune")
    with pytest.raises(ConfigError, match=f"expected the tune split of protocol {digest[:12]} on qa"):
        read_beside(str(tune), digest, "qa", "report")
    for wrong in ({"protocol": "0" * 64, "task": "nli", "split": "tune"},
                  {"protocol": digest, "task": "nli", "split": "report"}, [1, 2]):
        tune.write_text(json.dumps(wrong))
        with pytest.raises(ConfigError, match="--beside .*tune.json: expected the tune split"):
            read_beside(str(tune), digest, "nli", "report")
    tune.write_text("{not json")
    with pytest.raises(ConfigError, match="not a results.json"):
        read_beside(str(tune), digest, "nli", "report")
    with pytest.raises(ConfigError, match="no such file"):
        read_beside(str(tmp_path / "none.json"), digest, "nli", "report")


def test_a_scorer_with_fewer_seeds_draws_each_of_them_evenly():
    draws = Draws("x", n_instances=10, n_seeds=5, n_boot=4000)
    assert draws.seed_picks(5) is draws.seeds
    picks = draws.seed_picks(2)
    assert picks.shape == (4000, 2) and abs((picks == 0).mean() - 0.5) < 0.02  # (seeds % 2 drew seed 0 in 3 of 5)
    assert (Draws("x", 10, 5, 4000).seed_picks(2) == picks).all()  # a rerun draws the same


def _evaluate_rows(test_frames: dict[int, pl.DataFrame], human: pl.DataFrame | None = None,
                   judged: pl.DataFrame | None = None, protocol: Path = PROTOCOL) -> dict:
    """evaluate on made-up per-seed test scores (and human scores of a made-up acceptability file)."""
    from larev.human.annotations import Annotations
    from larev.validity.evidence import SeedScores, evaluate

    annotations = {}
    if judged is not None:
        texts = judged.select("id", "source", rationale=pl.lit("some words here"))
        annotations["acc"] = Annotations(name="acc", kind="acceptability", task="nli", examples=pl.DataFrame(),
                                         rationales=texts, judgements=judged, notes=[], skipped=pl.DataFrame())
    per_seed = {s: SeedScores(test=frame, human={"acc": human} if human is not None else {})
                for s, frame in test_frames.items()}
    return evaluate(load_protocol(protocol), "nli", per_seed, annotations)


def test_gold_and_a_kind_are_paired_within_a_seed_when_one_seed_lacks_the_kind():
    rng = np.random.default_rng(3)
    ids = [f"i{k}" for k in range(60)]
    frames = {}
    for seed in (0, 1, 2):  # each seed's gold differs; the shuffled text scores 0.5 below its own seed's gold
        gold = pl.DataFrame({"metric": "rev", "id": ids, "source": "gold", "score": rng.normal(size=60) * 3})
        shuffled = gold.with_columns(source=pl.lit("perturb_shuffled"), score=pl.col("score") - 0.5)
        frames[seed] = pl.concat([gold, shuffled]) if seed != 1 else gold  # seed 1 did not score it
    cells = _evaluate_rows(frames)["scorers"]["rev"]
    assert cells["perturb_order/shuffled"]["per_seed"] == [1.0, 1.0]
    assert cells["perturb/shuffled"]["per_seed"] == pytest.approx([-0.5, -0.5])


def test_two_scorers_are_paired_on_the_same_draws():
    """larev's scores are rev's plus 1: every order figure is the same, so the paired interval of larev - rev is
    exactly 0 (unpaired draws would give it width)."""
    rng = np.random.default_rng(4)
    ids = [f"i{k}" for k in range(60)]
    frames = {}
    for seed in (0, 1):
        gold = pl.DataFrame({"metric": "rev", "id": ids, "source": "gold", "score": rng.normal(size=60)})
        shuffled = gold.with_columns(source=pl.lit("perturb_shuffled"), score=pl.col("score") + rng.normal(size=60))
        rev = pl.concat([gold, shuffled])
        frames[seed] = pl.concat([rev, rev.with_columns(metric=pl.lit("larev"), score=pl.col("score") + 1)])
    results = _evaluate_rows(frames)
    larev, rev = (results["scorers"][m]["perturb_order/shuffled"] for m in ("larev", "rev"))
    assert 0.3 < rev["value"] < 0.7 and rev["high"] - rev["low"] > 0.05  # the figure itself has width
    assert larev["value"] == rev["value"]
    versus = results["versus"]["larev"]["rev"]["perturb_order/shuffled"]
    assert (versus["low"], versus["high"]) == (0.0, 0.0)


def test_average_precision_is_judged_against_the_base_rate_of_the_rows_a_scorer_scored():
    """rev scores only the often-acceptable rows, at random: its AP is about their base rate (0.9), far above the
    file's (0.5), and it must not pass for skill."""
    rng = np.random.default_rng(5)
    ids = [f"i{k}" for k in range(200)]
    good = rng.random(200) < 0.9
    bad = rng.random(200) < 0.1
    judged = pl.DataFrame({"id": [i for i in ids for _ in range(2)],
                           "source": ["candidate-0", "candidate-1"] * 200,
                           "votes": [v for g, b in zip(good, bad) for v in (3 * g, 3 * b)], "annotators": [3] * 400,
                           "gpt3_nll": [None] * 400}, schema_overrides={"gpt3_nll": pl.Float64})
    human = judged.filter(pl.col("source") == "candidate-0").select(
        "id", "source", metric=pl.lit("rev"), score=pl.Series(rng.normal(size=200)))
    gold = pl.DataFrame({"metric": "rev", "id": ids, "source": "gold", "score": rng.normal(size=200)})
    results = _evaluate_rows({0: gold, 1: gold}, human=pl.concat([human, human]).unique(), judged=judged)
    ap = results["scorers"]["rev"]["acceptability_ap/acc"]
    assert ap["low"] > 0.55  # above the file's base rate: the old threshold would have called it met
    assert ap["met"] is False


def test_a_criterion_judged_below_its_threshold_ranks_no_scorer(tmp_path):
    copy = tmp_path / "validity.yaml"
    copy.write_text(PROTOCOL.read_text().replace("pairwise: {direction: above,", "pairwise: {direction: below,"))
    assert "pairwise/acc" in _synthetic(PROTOCOL)["best"]
    assert "pairwise/acc" not in _synthetic(copy)["best"]


def test_tied_leaders_each_show_their_own_counts_and_a_missing_interval_is_said():
    from larev.validity.report import best_sentences, recommendation_lines

    cell = {"value": 0.6, "low": 0.55, "high": 0.65}
    no = {**cell, "met": None, "trained_on": True}
    results = {"scorers": {"larev": {"a": {**cell, "met": True}, "b": {**cell, "met": False}, "c": no, "d": no},
                           "rora": {"a": {**cell, "met": True}, "b": {**cell, "met": True},
                                    "c": {**cell, "met": False}, "d": {**cell, "met": False}}}}
    first = recommendation_lines(results)[0]
    assert "**larev and rora** (a metric, a metric), larev 1 of 2, rora 2 of 4." in first
    results["best"] = {"a": {"scorer": "larev", "value": 0.6, "runner_up": "rora", "difference": 0.0,
                             "low": None, "high": None}}
    assert best_sentences(results) == ["- `a`: **larev** (a metric) 0.600, ahead of rora by 0.000 (no interval: "
                                       "not separated)"]
