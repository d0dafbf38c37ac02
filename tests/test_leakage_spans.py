"""The span rule (larev/leakage/spans.py) on planted data: redundant multi-word label cues, where masking each
row's top word leaves the label readable and the span rule must bring the residual down to the reference's level.
Plus the pure helpers against hand-worked values, and LAREV's use of it on b (known phrases, multi-span
environments)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from larev.leakage.probe import residual_leakage
from larev.leakage.rationale_model import RationaleModelConfig
from larev.stats import binomial_margin
from larev.leakage.spans import (SpanRuleConfig, attribution_shares, phrase_spans,
                                 select_leakage_spans, snap_spans, span_recall, spans_for)
from larev.leakage.text import mask_text, merge_spans, subtract_spans

# --------------------------------------------------------------------------------------------- pure helpers


def _words(text: str):
    out, pos = [], 0
    for w in text.split():
        start = text.index(w, pos)
        out.append((w.lower(), start, start + len(w)))
        pos = start + len(w)
    return out


def test_phrase_spans_grow_over_neighbours_above_the_threshold_only():
    text = "a man does not tell us whether b"
    words = _words(text)
    shares = [0.0, 0.01, 0.05, 0.3, 0.2, 0.03, 0.1, -0.02]
    chosen = [w == "not" for w, _, _ in words]
    (span,) = phrase_spans(words, shares, chosen, expand_threshold=0.02)
    assert text[span[0]:span[1]] == "does not tell us whether"  # "man" (0.01) and "b" (-0.02) stay out
    assert phrase_spans(words, shares, chosen, expand_threshold=0.5) == [(words[3][1], words[3][2])]


def test_merge_snap_recall_and_mask_by_hand():
    assert merge_spans([(5, 7), (0, 2), (2, 4)]) == [(0, 4), (5, 7)]
    assert snap_spans([(4, 7)], [(2, 9), (20, 25)]) == [(2, 9)]  # grown to the phrase it overlaps, not the other
    # phrase chars 2..9 (7) and 20..25 (5); spans cover 4..7 (3) and 20..22 (2): recall 5 / 12
    assert span_recall([[(4, 7), (20, 22)]], [[(2, 9), (20, 25)]]) == pytest.approx(5 / 12)
    assert span_recall([[(0, 1)]], [[]]) is None
    assert mask_text("a b c d", [(2, 3), (4, 5)], "<m>") == "a <m> <m> d"
    assert mask_text("a b c d", [(2, 5)], "<m>") == "a <m> d"
    # 1.96 * sqrt(0.25 / 100) = 0.098
    assert binomial_margin(0.5, 100, 1.96) == pytest.approx(0.098)
    assert attribution_shares([1.0, -1.0, 2.0]) == [0.25, -0.25, 0.5]


def test_subtract_spans_and_protected_text_by_hand():
    assert subtract_spans([(0, 10)], [(3, 5)]) == [(0, 3), (5, 10)]
    assert subtract_spans([(0, 4), (6, 9)], [(2, 7)]) == [(0, 2), (7, 9)]
    assert subtract_spans([(3, 5)], [(0, 10)]) == []
    assert subtract_spans([(0, 2)], []) == [(0, 2)]
    # "if" chosen and grown over "then": the phrase would run 0..11 across the protected "x y" (3..6); it is cut
    words = [_words("if x y then z")]
    row = [w for w in words[0] if not 3 <= w[1] < 6]  # the protected words are never offered to the rule
    assert spans_for([row], [[0.5, 0.5, 0.0]], {"if"}, 0.1, protected=[[(3, 6)]]) == [[(0, 3), (6, 11)]]


def test_input_clauses_and_the_form_of_b_by_hand():
    from larev.methods.leakage_aware.leakage_spans import baseline_form, input_clauses

    b = "Given that a dog runs, it must be that a cat sleeps."
    clauses = input_clauses(b, "A dog runs.", "A cat  sleeps")
    assert clauses == [(11, 21, "PREMISE"), (39, 51, "HYPOTHESIS")]
    assert baseline_form(b, [(23, 38)], clauses, "<m>") == "Given that PREMISE, <m> HYPOTHESIS."
    assert baseline_form(b, [(0, 14)], clauses, "<m>") == "<m>PREMISE, it must be that HYPOTHESIS."  # cut at x
    assert input_clauses("A cat sleeps.", "A dog runs", "A cat sleeps") == []  # both clauses, or none


def test_spans_for_global_words_and_per_row_top_k():
    words = [_words("x alpha beta y"), _words("beta z")]
    shares = [[0.0, 0.6, 0.3, 0.1], [0.9, 0.1]]
    assert spans_for(words, shares, {"alpha"}, 0.5) == [[(2, 7)], []]
    assert spans_for(words, shares, {"alpha"}, 0.2) == [[(2, 12)], []]  # beta (0.3) joins alpha's phrase
    assert spans_for(words, shares, 1, 0.95) == [[(2, 7)], [(0, 4)]]  # each row's own top word


# --------------------------------------------------------------------------------------------- planted cues

# Each label has three multi-word cue phrasings; every row carries TWO different phrasings of its label (redundant
# cues), so removing one word, or even one whole phrase, leaves the label readable. Frame words ("that", "it",
# "is") occur in phrasings of every label.
CUES = {
    "entailment": ["clearly shows that", "it follows that", "which proves it"],
    "contradiction": ["rules out that", "it is false that", "which refutes it"],
    "neutral": ["says nothing on whether", "it is open whether", "which leaves it open"],
}
FILLER = ("man woman dog cat street park car house tree river ball table window chair road field boat "
          "child city hill garden door light music food water").split()


def _planted(n: int, seed: int):
    rng = random.Random(seed)
    labels = list(CUES)
    texts, ys, words, shares, xs = [], [], [], [], []
    for _ in range(n):
        y = rng.choice(labels)
        first, second = rng.sample(CUES[y], 2)
        filler = [rng.choice(FILLER) for _ in range(8)]
        parts = filler[:3] + first.split() + filler[3:6] + second.split() + filler[6:]
        text = " ".join(parts)
        ws = _words(text)
        cue_positions = set(range(3, 3 + len(first.split()))) | set(
            range(6 + len(first.split()), 6 + len(first.split()) + len(second.split())))
        # IG's credit split over the cue words unevenly (one phrase gets more), frame words get a little; noise
        # on the filler words
        weight = {3: rng.uniform(0.5, 1.5)}
        raw = []
        for i, (w, _, _) in enumerate(ws):
            if i in cue_positions:
                base = 0.15 if w in {"that", "it", "is", "which", "whether", "on"} else rng.uniform(0.5, 1.5)
                raw.append(base * (2.0 if i < 3 + len(first.split()) else 1.0) * weight[3])
            else:
                raw.append(rng.gauss(0.0, 0.05))
        texts.append(text)
        ys.append(y)
        words.append(ws)
        shares.append(attribution_shares(raw))
        xs.append(" ".join(filler))
    return texts, ys, words, shares, xs


PROBE = RationaleModelConfig(epochs=4)


def _residual_fn(texts, ys, n_train):
    cands = [list(CUES)] * len(texts)

    def residual(spans):
        masked = [mask_text(t, s, "<mask>") for t, s in zip(texts, spans)]
        return residual_leakage(masked[:n_train], ys[:n_train], cands[:n_train], masked[n_train:], ys[n_train:],
                                cands[n_train:], PROBE)

    return residual, cands


def test_redundant_multiword_cues_defeat_the_top_word_and_the_span_rule_removes_them():
    texts, ys, words, shares, xs = _planted(900, seed=3)
    n_train = 700
    residual, cands = _residual_fn(texts, ys, n_train)
    reference = residual_leakage(xs[:n_train], ys[:n_train], cands[:n_train], xs[n_train:], ys[n_train:],
                                 cands[n_train:], PROBE)
    chance = 1 / 3
    assert reference < chance + 0.1  # x carries no label information

    # the thesis's rule: each row's single top word masked; the other cue phrase still gives the label away
    top_word = spans_for(words, shares, 1, expand_threshold=1.0)
    assert residual(top_word) > 0.9

    selection = select_leakage_spans(words, shares, n_train, SpanRuleConfig(probe=PROBE), ranking="global",
                                     residual=residual, reference=reference, n_validation=len(texts) - n_train)
    assert selection.residual_before > 0.9
    assert selection.converged
    assert selection.residual_after <= reference + selection.tolerance
    assert selection.residual_after < chance + 0.1
    # the phrase expansion matters: the same words masked alone leave the frame words carrying the label
    assert residual(spans_for(words, shares, set(selection.chosen), expand_threshold=1.0)) > (
        selection.residual_after + 0.1)
    # what it masked is the cues: no filler word is chosen
    assert not set(selection.chosen) & set(FILLER)
    assert [s["size"] for s in selection.steps] == sorted(s["size"] for s in selection.steps)


def test_the_rule_reports_not_converged_when_the_ranking_cannot_reach_the_cue():
    # attribution on the filler only: the ranking never reaches the cue words, the residual stays high, and the
    # selection says so instead of claiming success
    texts, ys, words, _, xs = _planted(500, seed=4)
    shares = [[0.0 if w in " ".join(c for cs in CUES.values() for c in cs).split() else 1.0 for w, _, _ in ws]
              for ws in words]
    n_train = 400
    residual, cands = _residual_fn(texts, ys, n_train)
    selection = select_leakage_spans(words, shares, n_train, SpanRuleConfig(probe=PROBE, max_words=4),
                                     ranking="global", residual=residual, reference=1 / 3, n_validation=100)
    assert not selection.converged
    assert selection.residual_after > 0.8


# --------------------------------------------------------------------------------------------- LAREV on b


def test_known_phrases_are_the_relation_phrase_or_the_answer():
    from larev.methods.leakage_aware.leakage_spans import known_phrases

    b = "A man sleeps does not tell us whether a man is tired."
    (span,) = known_phrases("nli", b, "neutral")
    assert b[span[0]:span[1]] == "does not tell us whether"
    q = "The fox lives in the forest, so the answer is forest."
    assert [q[s:e] for s, e in known_phrases("qa", q, "Forest")] == ["forest", "forest"]


def test_multi_span_environments_rewrite_each_phrase_and_keep_the_rest():
    from larev.methods.leakage_aware.antonyms import AntonymConfig
    from larev.methods.leakage_aware.environments import ABSENT, build_environments

    b = "A dog runs, so a dog moves and it implies nothing."
    s1, s2, s3 = b.index("so"), b.index("implies"), b.index("nothing")
    rows = pl.DataFrame([
        {"id": "a", "baseline": b, "term": None, "spans": [[s1, s1 + 2], [s2, s2 + 7]], "task": "nli"},
        {"id": "b", "baseline": b, "term": None, "spans": [[s3, s3 + 7]], "task": "nli"},
        {"id": "c", "baseline": b, "term": None, "spans": [], "task": "nli"},
        {"id": "d", "baseline": b, "term": None, "spans": [[2, 5], [s2, s2 + 7]], "task": "nli"},
    ])
    table = build_environments(rows, "<mask>", AntonymConfig(wordnet_path="/nonexistent"))
    env = {(r["id"], r["env"]): r for r in table.iter_rows(named=True)}
    assert env[("a", "E2")]["baseline"] == "A dog runs, <mask> a dog moves and it <mask> nothing."
    assert env[("a", "E3")]["baseline"] == "A dog runs, so it is false that a dog moves and it contradicts nothing."
    assert env[("a", "E3")]["backend"] == "lexicon"
    assert env[("a", "E3")]["term"] == "so | implies"
    # no rewrite for any span: no E3 at all, never E2's text
    assert env[("b", "E3")]["baseline"] is None and env[("b", "E3")]["backend"] == ABSENT
    assert env[("c", "E2")]["baseline"] == b and env[("c", "E2")]["backend"] == "none"
    # a span with no rewrite ("dog") keeps its text in E3: E3 differs from b in the label phrase only, no masks
    assert env[("d", "E2")]["baseline"] == "A <mask> runs, so a dog moves and it <mask> nothing."
    assert env[("d", "E3")]["baseline"] == "A dog runs, so a dog moves and it contradicts nothing."
    for i in ("a", "b", "d"):
        assert env[(i, "E3")]["baseline"] != env[(i, "E2")]["baseline"]


# --------------------------------------------------------------------------------------------- RORA on r


def test_rora_residual_rule_reads_x_with_the_masked_rationale():
    """Rationales carry two redundant cue phrases of their label; x carries none. The span rule, whose probe
    reads (x, masked r), must bring the gain over x down to the binomial margin; masking nothing leaves a large
    gain."""
    from larev.leakage.rationale_model import train_rationale_model
    from larev.leakage.spans import LeakageDetectionConfig, detect_leakage_spans
    from larev.methods.rora.infill import mask_spans

    texts, ys, _, _, xs = _planted(600, seed=5)
    n_train = 480
    cands = [list(CUES)] * len(texts)
    model = train_rationale_model(texts[:n_train], ys[:n_train], cands[:n_train], PROBE)
    config = LeakageDetectionConfig(n_steps=8, spans=SpanRuleConfig(probe=PROBE))

    def mask(text, spans):
        return mask_spans(text, spans)[0]

    _, per_row, summary = detect_leakage_spans(model, texts, ys, cands, xs, n_train, config, mask)
    assert summary["accuracy_x"] < 1 / 3 + 0.1
    margin = binomial_margin(1 / 3, len(texts) - n_train, 1.96)
    assert summary["residual_gain"] <= margin + 0.03
    assert summary["converged"]
    assert (per_row["span_source"] == "spans").mean() > 0.9
    unmasked = residual_leakage([f"{x} rationale: {t}" for x, t in zip(xs[:n_train], texts[:n_train])],
                                ys[:n_train], cands[:n_train],
                                [f"{x} rationale: {t}" for x, t in zip(xs[n_train:], texts[n_train:])],
                                ys[n_train:], cands[n_train:], PROBE)
    assert unmasked - summary["accuracy_x"] > 0.5  # what the rule removed


def test_leakage_reliance_is_the_mean_drop_when_the_spans_are_masked():
    import numpy as np

    from larev.formats import rationale_input
    from larev.methods.leakage_aware.reliance import leakage_reliance
    from larev.models.evaluator import score_labels
    from tests.helpers import tiny_evaluator

    b = ["a dog runs so a dog moves", "a cat sleeps and nothing follows", "a man eats so he is full"]
    masked = ["a dog runs <mask> a dog moves", "a cat sleeps and <mask>", "a man eats <mask> he is full"]
    labels = ["entailment", "neutral", "entailment"]
    cands = [["entailment", "contradiction", "neutral"]] * 3
    ev = tiny_evaluator(b + masked + labels)
    assert leakage_reliance(ev, b, b, labels, cands) == 0.0  # nothing masked, nothing taken from the spans
    one = [score_labels(ev, [rationale_input("", t)], [y], [c]).logp[0] for t, y, c in zip(b, labels, cands)]
    other = [score_labels(ev, [rationale_input("", t)], [y], [c]).logp[0] for t, y, c in zip(masked, labels, cands)]
    # batched against one row at a time: float32 summation order moves the mean by ~1e-5 relative on some CPUs
    assert leakage_reliance(ev, b, masked, labels, cands) == pytest.approx(float(np.mean(np.subtract(one, other))),
                                                                           rel=1e-4)


@pytest.mark.parametrize("rule", ["spans", "top_word"])
def test_find_baseline_spans_rows_and_what_the_summary_measures(rule):
    """b = "<premise> <relation phrase> <hypothesis>", the relation phrase naming the label and x saying nothing
    about it; the attributing model is untrained, so nothing is claimed about which spans it finds, only about
    what the summary measures: a fresh probe reads the label from b's form before masking, the hypothesis alone
    reads at chance, and (top_word, where the reported spans are the raw ones) the span recall is the hand-computed
    overlap with the relation phrases."""
    from larev.leakage.attribution import AttributionConfig
    from larev.methods.leakage_aware.leakage_spans import find_baseline_spans, input_clauses, known_phrases
    from tests.helpers import tiny_evaluator

    rng = random.Random(1)
    rows = []
    for i in range(60):
        y = ["entailment", "contradiction", "neutral"][i % 3]
        p, h = f"a {rng.choice(FILLER)} runs", f"a {rng.choice(FILLER)} moves"
        b = {"entailment": f"{p} means that {h}.", "contradiction": f"{p} rules out that {h}.",
             "neutral": f"{p} does not tell us whether {h}."}[y]
        rows.append({"id": f"r{i}", "task": "nli", "premise": p, "hypothesis": h, "question": None, "choices": None,
                     "label": y, "baseline": b})
    frame = pl.DataFrame(rows)
    n_train = 48
    ev = tiny_evaluator(frame["baseline"].to_list() + ["baseline", ":", "entailment", "contradiction", "neutral"])
    config = AttributionConfig(n_steps=4, rule=rule, spans=SpanRuleConfig(probe=PROBE, min_occurrences=1))
    out, table, summary = find_baseline_spans(ev, frame, n_train, config)
    assert out.columns == ["id", "term", "spans", "score", "delta"] and out.height == 60
    for b, spans, term in zip(frame["baseline"], out["spans"].to_list(), out["term"].to_list()):
        assert term == (" | ".join(b[s:e] for s, e in spans) if spans else None)
    if rule == "top_word":
        assert all(len(s) == 1 for s in out["spans"].to_list())
    assert {"word", "attribution", "magnitude", "count"} <= set(table.columns)
    assert summary["chance"] == pytest.approx(1 / 3) and summary["residual_reads"] == "form"
    assert summary["residual_before"] > 0.9  # the relation phrase names the label: a fresh probe reads it
    assert summary["hypothesis_only"] <= 1 / 3 + binomial_margin(1 / 3, 60 - n_train, 1.96)  # x is label-free
    if rule == "top_word":
        known = [subtract_spans(known_phrases("nli", r["baseline"], r["label"]),
                                [(s, e) for s, e, _ in input_clauses(r["baseline"], r["premise"], r["hypothesis"])])
                 for r in rows[:n_train]]
        found = [[tuple(s) for s in spans] for spans in out["spans"].to_list()[:n_train]]
        assert summary["span_recall"] == pytest.approx(span_recall(found, known))


def test_baseline_spans_leave_x_alone_and_the_residual_reads_what_b_adds_to_x():
    """Planted: the hypothesis carries its own label artifact (a label's subject word in 80 % of rows, as SNLI's
    hypothesis-only cues), and b adds its label in a relation phrase. The rule must mask the phrase, never x's
    words, and call the leakage gone when b's form reads at chance, while the whole masked b still reads x's
    artifact (so the residual measured on the whole b could only have reached chance by masking the input)."""
    from larev.leakage.attribution import AttributionConfig
    from larev.methods.leakage_aware.leakage_spans import find_baseline_spans
    from tests.helpers import tiny_evaluator

    rng = random.Random(3)
    subject = {"entailment": "man", "contradiction": "woman", "neutral": "child"}
    relation = {"entailment": ["means that", "shows that"], "contradiction": ["rules out that", "denies that"],
                "neutral": ["does not tell us whether", "says nothing about whether"]}
    rows = []
    for i in range(360):
        y = ["entailment", "contradiction", "neutral"][i % 3]
        who = subject[y] if rng.random() < 0.8 else rng.choice(list(subject.values()))
        p = f"a {rng.choice(FILLER)} is near the {rng.choice(FILLER)}"
        h = f"a {who} sees the {rng.choice(FILLER)}"
        b = f"{p[0].upper()}{p[1:]} {rng.choice(relation[y])} {h}."
        rows.append({"id": f"r{i}", "task": "nli", "premise": p, "hypothesis": h, "question": None, "choices": None,
                     "label": y, "baseline": b})
    frame = pl.DataFrame(rows)
    ev = tiny_evaluator(frame["baseline"].to_list() + ["baseline", ":", "entailment", "contradiction", "neutral"])
    config = AttributionConfig(n_steps=4, spans=SpanRuleConfig(probe=PROBE, min_occurrences=1))
    out, _, summary = find_baseline_spans(ev, frame, 288, config)
    assert summary["residual_reads"] == "form" and summary["reference"] == pytest.approx(1 / 3)
    for row, spans in zip(rows, out["spans"].to_list()):
        b = row["baseline"]
        x_start = b.lower().index(row["hypothesis"])
        premise_end = len(row["premise"])
        assert all(s >= premise_end and e <= x_start + 1 for s, e in spans), (b, spans)  # only between p and h
    assert summary["residual_before"] > 0.9  # the relation phrase gives the label away
    assert summary["converged"] and summary["residual_after"] <= 1 / 3 + summary["tolerance"]
    assert summary["hypothesis_only"] > 0.6  # x's own artifact, which is not b's leakage ...
    assert summary["residual_with_input"] > summary["residual_after"] + 0.2  # ... is still there, untouched


def test_global_ranking_per_label_takes_labels_in_turn_and_pools_many_labels():
    from larev.leakage.spans import MAX_LABEL_TABLES, global_ranking

    words = [_words("so big"), _words("so big"), _words("not small"), _words("not small")]
    shares = [[0.9, 0.1], [0.9, 0.1], [0.3, 0.2], [0.3, 0.2]]
    config = SpanRuleConfig(min_occurrences=1, min_row_share=0.0)
    # pooled: "so" (0.9) and "not" (0.3) outrank "small" (0.2) and "big" (0.1)
    assert global_ranking(words, shares, config) == ["so", "not", "small", "big"]
    # per label, in turn: the first of each label, then the second of each
    assert global_ranking(words, shares, config, ["a", "a", "b", "b"]) == ["so", "not", "big", "small"]
    many = [f"answer {i}" for i in range(MAX_LABEL_TABLES + 1)]
    rows = [_words("so big")] * len(many)
    assert global_ranking(rows, [[0.9, 0.1]] * len(many), config, many) == ["so", "big"]


def test_rora_span_rule_masks_a_restated_qa_answer():
    """RORA's side on QA: rationales that restate their answer (one of 3 per-row choices, two-word answers too).
    The copy-aware rationale-only model's IG ranks each row's own words, the span rule masks the answer, and the
    probe on (x, masked r) falls back to x alone (with the copy term off these rows fail the
    masked-answer check: 630 of 700)."""
    from larev.leakage.rationale_model import train_rationale_model
    from larev.leakage.spans import LeakageDetectionConfig, detect_leakage_spans
    from larev.methods.rora.infill import mask_spans

    rng = random.Random(3)
    pool = [f"thing{i}" for i in range(40)] + [f"old thing{i}" for i in range(10)]
    texts, ys, cands, xs = [], [], [], []
    for _ in range(700):
        choices = rng.sample(pool, 3)
        y = rng.choice(choices)
        words = [rng.choice(FILLER) for _ in range(6)]
        words.insert(rng.randrange(7), y)
        texts.append(" ".join(words))
        ys.append(y)
        cands.append(choices)
        xs.append(f"which one? choices: {', '.join(choices)}")
    n_train = 560
    probe = RationaleModelConfig(epochs=4)
    model = train_rationale_model(texts[:n_train], ys[:n_train], cands[:n_train], probe)
    assert model.config.copy_term == "on"
    config = LeakageDetectionConfig(n_steps=8, spans=SpanRuleConfig(probe=probe))
    _, per_row, summary = detect_leakage_spans(model, texts, ys, cands, xs, n_train, config,
                                               lambda text, spans: mask_spans(text, spans)[0])
    assert summary["converged"] and summary["residual_gain"] <= binomial_margin(1 / 3, 140, 1.96)
    masked_answer = [all(w not in mask_spans(t, s)[0].split() for w in y.split()[-1:])
                     for t, y, s in zip(texts, ys, per_row["spans"].to_list())]
    assert sum(masked_answer) / len(texts) > 0.9  # the answer's head word is gone from the rationale
    unmasked = residual_leakage([f"{x} rationale: {t}" for x, t in zip(xs[:n_train], texts[:n_train])],
                                ys[:n_train], cands[:n_train],
                                [f"{x} rationale: {t}" for x, t in zip(xs[n_train:], texts[n_train:])],
                                ys[n_train:], cands[n_train:], probe)
    assert unmasked - summary["accuracy_x"] > 0.3  # what the rule removed
