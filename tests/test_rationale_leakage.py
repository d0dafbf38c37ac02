"""RORA 3.1: the rationale-only model, its IG word attributions, the global table and the leaky spans."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest
import torch

from larev.leakage.rationale_model import RationaleModelConfig, load_rationale_model, predict, save_rationale_model, train_rationale_model, words_with_offsets
from larev.leakage.spans import LeakageDetectionConfig, attribution_shares, detect_leakage, global_attribution, leaky_spans, leaky_words

LABELS = ["entailment", "contradiction", "neutral"]
FILLER = "the a man dog cat sits runs near park street red blue old young small tall".split()


def planted(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Rationales of random filler words; each carries one word that names its label ('zork' -> contradiction)."""
    cue = {"entailment": "blip", "contradiction": "zork", "neutral": "frob"}
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        y = rng.choice(LABELS)
        words = rng.sample(FILLER, 6)
        words.insert(rng.randrange(len(words) + 1), cue[y])
        texts.append(" ".join(words) + ".")
        labels.append(y)
    return texts, labels


def test_words_and_offsets():
    assert words_with_offsets("A man, asleep.") == [("a", 0, 1), ("man", 2, 5), (",", 5, 6), ("asleep", 7, 13),
                                                      (".", 13, 14)]


def test_shares_and_global_table_by_hand():
    assert attribution_shares([1.0, -3.0, 0.0]) == [0.25, -0.75, 0.0]
    assert attribution_shares([0.0, 0.0]) == [0.0, 0.0]
    table = global_attribution([["a", "b"], ["a", "c"]], [[0.5, 0.5], [-0.1, 1.1]])
    rows = {w: (a, c) for w, a, _, c in table.iter_rows()}
    assert rows["a"] == (pytest.approx(0.2), 2)  # (0.5 - 0.1) / 2
    assert table.filter(pl.col("word") == "a")["magnitude"][0] == pytest.approx(0.3)  # (0.5 + 0.1) / 2
    assert rows["c"][0] == pytest.approx(1.1) and rows["b"][0] == pytest.approx(0.5)
    assert table["word"].to_list() == ["c", "b", "a"]  # ranked by attribution
    cfg = LeakageDetectionConfig(threshold=0.4, min_occurrences=1)
    assert leaky_words(table, cfg) == {"b", "c"}
    assert leaky_words(table, cfg.model_copy(update={"min_occurrences": 2})) == set()


def test_spans_merge_runs_and_fallback_is_explicit():
    words = words_with_offsets("the answer is very bad .")
    spans, source = leaky_spans(words, {"very", "bad", "the"})
    assert spans == [(0, 3), (14, 22)] and source == "threshold"  # "very bad" is one span
    shares = [0.1, 0.5, -0.2, 0.3, 0.05, 0.0]
    assert leaky_spans(words, set(), shares) == ([], "none")  # no fallback unless asked
    spans, source = leaky_spans(words, set(), shares, fallback_top_k=2)
    assert source == "fallback" and spans == [(4, 10), (14, 18)]  # "answer" and "very", never a negative word


def test_global_attribution_ranks_the_planted_word_first():
    texts, labels = planted(600)
    cands = [LABELS] * len(texts)
    model = train_rationale_model(texts, labels, cands, RationaleModelConfig(seed=1))
    assert model.meta["history"][-1]["train_accuracy"] > 0.95
    table, per_row = detect_leakage(model, texts, labels, cands, LeakageDetectionConfig(n_steps=16))
    assert set(table["word"][:3]) == {"zork", "blip", "frob"}
    assert set(table.filter(pl.col("leaky"))["word"]) == {"zork", "blip", "frob"}
    # every rationale gets exactly the span of its planted word
    for text, spans in zip(texts, per_row["spans"].to_list()):
        assert len(spans) == 1 and text[spans[0][0]:spans[0][1]] in {"zork", "blip", "frob"}
    assert set(per_row["span_source"]) == {"threshold"}
    assert predict(model, ["the zork man.", "a blip dog."], [LABELS, LABELS]) == ["contradiction", "entailment"]


def test_encoder_kind_trains_and_model_round_trips(tmp_path):
    texts, labels = planted(120)
    model = train_rationale_model(texts, labels, [LABELS] * len(texts),
                                  RationaleModelConfig(kind="encoder", dim=16, epochs=2))
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    loaded = load_rationale_model(save_rationale_model(model, tmp_path / "m"))
    assert loaded.vocab == model.vocab and loaded.config == model.config
    for k, v in loaded.net.state_dict().items():
        assert torch.equal(v, before[k])
    assert predict(loaded, texts[:5], [LABELS] * 5) == predict(model, texts[:5], [LABELS] * 5)


def test_per_row_label_sets_for_qa():
    texts = ["bread is baked", "a hammer drives nails"] * 20
    labels = ["bakery", "toolbox"] * 20
    cands = [["bakery", "toolbox", "garden"]] * 40
    model = train_rationale_model(texts, labels, cands, RationaleModelConfig(epochs=8, min_count=1))
    assert predict(model, ["bread is baked"], [["garden", "bakery"]]) == ["bakery"]
    with pytest.raises(ValueError, match="not among its candidates"):
        train_rationale_model(["x"], ["nope"], [["a", "b"]], RationaleModelConfig())


def test_batches_pad_label_sets_of_different_sizes_and_reuse_encodings():
    from larev.leakage.rationale_model import _batch

    texts = ["the big dog runs", "a cat", "red apple pie"]
    cands = [["dog", "big cat"], ["cat", "dog", "red apple pie"], ["pie"]]
    model = train_rationale_model(texts, ["dog", "cat", "pie"], cands, RationaleModelConfig(epochs=1, min_count=1))
    ids, mask, lab_ids, lab_tok_mask, lab_mask, target = _batch(model, texts, cands, ["dog", "cat", "pie"])
    assert lab_ids.shape == (3, 3, 3) and lab_tok_mask.dtype == torch.float32
    v = model.vocab
    assert lab_ids[0].tolist() == [[v["dog"], 0, 0], [v["big"], v["cat"], 0], [0, 0, 0]]
    assert lab_ids[1, 2].tolist() == [v["red"], v["apple"], v["pie"]]
    assert lab_tok_mask[0].tolist() == [[1, 0, 0], [1, 1, 0], [0, 0, 0]]
    assert lab_mask.tolist() == [[1, 1, 0], [1, 1, 1], [1, 0, 0]] and target.tolist() == [0, 0, 0]
    encoded = [model.encode(t)[0] for t in texts]
    again = _batch(model, texts, cands, None, encoded)
    assert torch.equal(again[0], ids) and torch.equal(again[1], mask) and again[5] is None


def test_copy_term_resolves_from_the_label_sets_and_old_models_load_without_it(tmp_path):
    from larev.leakage.rationale_model import RationaleClassifier, resolve_copy

    auto = RationaleModelConfig()
    assert resolve_copy(auto, [LABELS, LABELS]).copy_term == "off"  # one fixed label set (NLI)
    assert resolve_copy(auto, [["a", "b"], ["c", "d"]]).copy_term == "on"  # per-row choices (QA)
    assert resolve_copy(auto.model_copy(update={"copy_term": "off"}), [["a"], ["b"]]).copy_term == "off"
    with pytest.raises(ValueError, match="resolve 'auto'"):
        RationaleClassifier(10, auto)
    texts, labels = planted(30)
    model = train_rationale_model(texts, labels, [LABELS] * 30, RationaleModelConfig(epochs=1))
    assert model.config.copy_term == "off" and model.net.copy_weight is None
    out = save_rationale_model(model, tmp_path / "m")
    payload = json.loads((out / "rationale_model.json").read_text())
    del payload["config"]["copy_term"]  # as written before the copy term existed
    (out / "rationale_model.json").write_text(json.dumps(payload))
    assert load_rationale_model(out).config.copy_term == "off"


def test_copy_term_by_hand():
    """Candidate k scores <h(r), u_k + w v_k>: with u = 0 and w = 1, a candidate word found in r adds |e_w|^2 / n."""
    from larev.leakage.rationale_model import RationaleClassifier

    net = RationaleClassifier(4, RationaleModelConfig(dim=4, copy_term="on"))
    with torch.no_grad():
        net.embed.weight.copy_(torch.tensor([[0.0] * 4, [5.0] * 4, [1.0, 0, 0, 0], [0, 2.0, 0, 0]]))
        net.label_embed.weight.zero_()
    # r = the words 2 and 3 (h = [0.5, 1.0, 0, 0]); candidates: word 2, word 3, and <unk> (id 1), which never matches
    embeds, mask = net.embed(torch.tensor([[2, 3]])), torch.ones(1, 2)
    lab_ids = torch.tensor([[[2], [3], [1]]])
    vecs = net.label_vectors(lab_ids, torch.ones(1, 3, 1))
    logits = net.logits_from_embeddings(embeds, mask, vecs, torch.ones(1, 3))
    assert logits.tolist() == [[0.5, 2.0, 0.0]]  # 1*1/2, 2*2/2, and <unk>'s copy vector is 0


def restating_qa(n: int, answers: list[str], others: list[str], seed: int):
    """QA rows whose rationale restates the answer (drawn from `answers`) among filler words; the other two
    choices come from `answers` and `others`."""
    rng = random.Random(seed)
    texts, labels, cands = [], [], []
    for _ in range(n):
        y, other = rng.sample(answers, 2)
        choices = [y, other, rng.choice([w for w in others if w not in (y, other)])]
        rng.shuffle(choices)
        words = rng.sample(FILLER, 6)
        words.insert(rng.randrange(len(words) + 1), y)
        texts.append(" ".join(words))
        labels.append(y)
        cands.append(choices)
    return texts, labels, cands


def test_copy_term_reads_an_answer_never_seen_as_one():
    """The claim: with the copy term the rationale-only model finds a restated answer among the choices even when
    no training row had that answer (the test answers were only ever wrong choices in training, so they are in
    the vocabulary); without it the same model cannot read them."""
    from larev.leakage.rationale_model import accuracy_of

    seen, unseen = [f"thing{i}" for i in range(30)], [f"item{i}" for i in range(30)]
    train = restating_qa(900, seen, unseen, seed=0)
    test = restating_qa(300, unseen, unseen, seed=1)
    accuracy = {}
    for mode in ("off", "on"):
        model = train_rationale_model(*train, RationaleModelConfig(copy_term=mode, epochs=5))
        assert accuracy_of(model, *train) > 0.9  # both learn the answers they were trained on
        accuracy[mode] = accuracy_of(model, *test)
    assert accuracy["on"] > 0.7, accuracy  # measured 0.847 (chance 1/3)
    assert accuracy["off"] < 0.45, accuracy  # measured 0.327
