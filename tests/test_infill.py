"""RORA 3.2: sentinel masking, rebuilding from fills, fill parsing and a tiny infiller."""

from __future__ import annotations

import re

import pytest

from larev.config import TrainConfig
from larev.methods.rora.infill import (InfillerConfig, generate_fills, mask_spans, parse_fills, rebuild, sentinel_ids,
                          sentinel_target, with_sentinels)
from larev.models.tokenizer import train_word_tokenizer
from larev.models.train import train_evaluator
from tests.helpers import TINY_MODEL
from larev.models.evaluator import new_evaluator

TEXT = "A man is not a woman, so the answer is contradiction."


def test_mask_and_rebuild_round_trip_keeps_every_untouched_word():
    spans = [(9, 12), (39, 52)]  # "not", "contradiction"
    masked, originals = mask_spans(TEXT, spans)
    assert masked == "A man is <extra_id_0> a woman, so the answer is <extra_id_1>."
    assert originals == ["not", "contradiction"]
    assert rebuild(masked, originals) == (TEXT, 0)
    edited, missing = rebuild(masked, ["indeed", "entailment"])
    assert edited == "A man is indeed a woman, so the answer is entailment." and missing == 0
    untouched = [w for w in re.findall(r"\w+", TEXT) if w not in originals]
    assert [w for w in re.findall(r"\w+", edited) if w in untouched] == untouched
    assert sentinel_target(originals) == "<extra_id_0> not <extra_id_1> contradiction"


def test_a_missing_fill_keeps_the_rest_of_the_rationale():
    masked, _ = mask_spans(TEXT, [(9, 12), (39, 52)])
    text, missing = rebuild(masked, [None])  # the model emitted no sentinel at all
    assert text == "A man is a woman, so the answer is ." and missing == 2
    text, missing = rebuild(masked, ["surely"])  # sentinel 1 missing: the tail after it is still there
    assert text.startswith("A man is surely a woman, so the answer is") and missing == 1


def test_mask_rejects_overlapping_spans_and_caps_the_count():
    with pytest.raises(ValueError, match="overlaps"):
        mask_spans(TEXT, [(0, 5), (3, 8)])
    masked, originals = mask_spans(TEXT, [(0, 1), (2, 5), (9, 12)], max_spans=2)
    assert originals == ["A", "man"] and "not" in masked


def test_parse_fills_from_ids():
    tok = train_word_tokenizer(["a man is not a woman entailment contradiction"])
    assert with_sentinels(tok, 3) == 3 and with_sentinels(tok, 3) == 0  # idempotent
    s0, s1, s2 = sentinel_ids(tok, 3)
    word = tok.convert_tokens_to_ids
    ids = [tok.pad_token_id, s0, word("not"), word("a"), s1, word("entailment"), tok.eos_token_id, word("man")]
    assert parse_fills(ids, [s0, s1, s2], tok, 2) == ["not a", "entailment"]
    assert parse_fills([s1, word("man")], [s0, s1, s2], tok, 2) == [None, "man"]
    assert parse_fills([s2, word("man")], [s0, s1, s2], tok, 2) == [None, None]  # out of range: ignored


def test_tiny_infiller_learns_a_label_conditioned_fill():
    tok = train_word_tokenizer(["label : input : rationale : the answer is entailment contradiction neutral ."])
    with_sentinels(tok, 2)
    ev = new_evaluator(TINY_MODEL, tokenizer=tok, seed=0)
    labels = ["entailment", "contradiction", "neutral"] * 20
    inputs = [f"label: {y} input: rationale: the answer is <extra_id_0> ." for y in labels]
    targets = [f"<extra_id_0> {y}" for y in labels]
    before = [p.detach().clone() for p in ev.model.parameters()]
    train_evaluator(ev, inputs, targets, [], [], [], TrainConfig(epochs=30, batch_size=16, learning_rate=5e-3),
                    progress=False)
    assert any(not (a == b.detach()).all() for a, b in zip(before, ev.model.parameters()))
    fills = generate_fills(ev, inputs[:3] + ["label: neutral input: rationale: nothing leaks"], [1, 1, 1, 0],
                           InfillerConfig(max_new_tokens=4))
    assert fills[3] == [] and all(len(f) == 1 for f in fills[:3])
    assert [f[0] for f in fills[:3]] == labels[:3]
