"""Integrated Gradients leakage-term detection (larev/leakage/attribution.py)."""

from __future__ import annotations

import math
import random

import polars as pl
import pytest
import torch
from pydantic import ValidationError

from larev.leakage.attribution import (AttributionConfig, LeakageTerm, TokenAttribution, attribute, baseline_span,
                               encoder_input_embeddings, label_logprob_forward, leakage_term, leakage_terms,
                               tokenize_with_offsets)
from larev.config import ModelConfig, TrainConfig
from larev.formats import baseline_input
from larev.models.evaluator import candidate_logprobs, pad_batch, tokenize
from larev.models.train import train_evaluator
from tests.helpers import tiny_evaluator

CUES = {"implies": "entailment", "contradicts": "contradiction", "unrelated": "neutral"}
LABELS = list(CUES.values())
FILLERS = ("red blue green big small old young happy sad fast slow tall short park street house car tree river hill "
           "boy girl runs sits walks eats sleeps").split()
# Two layers, d_model 64: the 1-layer TINY_MODEL learns the task too, but its attributions are noisier.
SMALL_MODEL = ModelConfig(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, dropout=0.0)


def planted(n: int, seed: int, p_no_cue: float) -> tuple[list[str], list[str]]:
    """Baselines 'the man <cue> the dog <fillers>.' whose cue word alone sets the label.

    With probability p_no_cue the cue slot holds a filler word and the label is random: the model then learns
    that a row without a cue carries no label information, so the IG reference (all pad) is not already confident
    in one label. Without such rows the model can learn one label as its default (no cue of the other two), and
    that label's cue then earns ~no attribution from an all-pad reference (IG explains f(x) - f(x') only).
    """
    rng = random.Random(seed)
    baselines, labels = [], []
    for _ in range(n):
        if rng.random() < p_no_cue:
            cue, label = rng.choice(FILLERS), rng.choice(LABELS)
        else:
            cue = rng.choice(list(CUES))
            label = CUES[cue]
        fill = " ".join(rng.choice(FILLERS) for _ in range(rng.randint(2, 6)))
        baselines.append(f"the man {cue} the dog {fill}.")
        labels.append(label)
    return baselines, labels


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread; two threads on a busy 2-CPU machine made training ~20x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained(one_thread):
    """A small evaluator trained on the planted-cue task (about 2 s on one CPU thread) and 40 held-out rows."""
    train_b, train_y = planted(400, seed=0, p_no_cue=0.3)
    test_b, test_y = planted(40, seed=100, p_no_cue=0.0)
    ev = tiny_evaluator([baseline_input(b) for b in train_b + test_b] + LABELS, seed=0, config=SMALL_MODEL)
    train_evaluator(ev, [baseline_input(b) for b in train_b], train_y, [], [], [],
                    TrainConfig(epochs=3, batch_size=16, learning_rate=3e-3, seed=0, device="cpu"), progress=False)
    return ev, test_b, test_y


# ----------------------------------------------------------------------------------------------- forward function


def _batch(ev, texts, labels):
    ids, mask = pad_batch(tokenize(ev.tokenizer, texts, ev.config.max_input_tokens, ev.eos_id)[0], ev.pad_id)
    lab, lab_mask = pad_batch(tokenize(ev.tokenizer, labels, ev.config.max_target_tokens, ev.eos_id)[0], ev.pad_id)
    return ids, mask, lab, lab_mask


def test_forward_equals_candidate_logprobs():
    texts = ["baseline: the man implies the dog", "baseline: a cat sat .", "baseline: the dog runs fast and far ."]
    labels = ["entailment", "not related at all", "contradiction"]  # label lengths differ: label padding too
    ev = tiny_evaluator(texts + labels, seed=1)
    ev.model.eval()
    ids, mask, lab, lab_mask = _batch(ev, texts, labels)
    with torch.no_grad():
        ours = label_logprob_forward(ev.model, encoder_input_embeddings(ev.model, ids), mask, lab, lab_mask)
        ref = candidate_logprobs(ev.model, ids, mask, lab, lab_mask, torch.arange(len(texts)))
    assert ours.shape == (3,)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=0)


def test_forward_equals_candidate_logprobs_with_scaled_embeddings():
    """A BART encoder scales its embeddings by sqrt(d_model): encoder_input_embeddings must include the scale."""
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                     decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
                     scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                     decoder_start_token_id=2, forced_eos_token_id=None)
    torch.manual_seed(0)
    model = BartForConditionalGeneration(cfg).eval()
    ids = torch.tensor([[0, 5, 6, 7, 2], [0, 8, 9, 2, 1]])
    mask = (ids != 1).long()
    lab, lab_mask = torch.tensor([[10, 11, 2], [12, 2, 1]]), torch.tensor([[1, 1, 1], [1, 1, 0]])
    with torch.no_grad():
        ours = label_logprob_forward(model, encoder_input_embeddings(model, ids), mask, lab, lab_mask)
        ref = candidate_logprobs(model, ids, mask, lab, lab_mask, torch.arange(2))
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=0)


def test_tokenize_with_offsets_matches_evaluator_tokenize():
    texts = ["baseline: the man implies the dog .", "baseline: " + " ".join(["dog"] * 30)]
    ev = tiny_evaluator(texts)
    for max_len in (128, 8):
        ids, offsets = tokenize_with_offsets(ev.tokenizer, texts, max_len, ev.eos_id)
        assert ids == tokenize(ev.tokenizer, texts, max_len, ev.eos_id)[0]
        assert [len(o) for o in offsets] == [len(i) for i in ids]
        assert all(o[-1] == (0, 0) for o in offsets)  # the final </s>, kept when cut
    assert texts[0][slice(*offsets[0][4])] == "implies"


# ----------------------------------------------------------------------------------------------- planted cue


def test_ig_finds_the_planted_cue(trained):
    ev, baselines, labels = trained
    rows, table = leakage_terms(ev, baselines, labels, AttributionConfig())
    assert rows.columns == ["row", "term", "start", "end", "score", "delta", "tokens", "attributions"]
    assert rows.height == len(baselines)
    hits = 0
    for b, r in zip(baselines, rows.iter_rows(named=True)):
        cue = b.split()[2]
        if r["term"] == cue:
            hits += 1
            assert (r["start"], r["end"]) == (len("the man "), len("the man ") + len(cue))
            assert b[r["start"]: r["end"]] == cue
            assert r["score"] == max(r["attributions"][2:-1])  # the top token of b
    assert hits >= 0.9 * len(baselines), f"planted cue top-1 in only {hits}/{len(baselines)} rows"
    # The global table: the three cue words on top, lower-cased surface tokens of b only (no prefix, no </s>).
    assert set(table["token"][:3]) == set(CUES)
    assert "baseline" not in table["token"].to_list() and "</s>" not in table["token"].to_list()
    assert table["mean_attribution"].is_sorted(descending=True)
    assert table.filter(pl.col("token") == "the")["count"].item() == 2 * len(baselines)


def test_shapes_delta_and_reference(trained):
    ev, baselines, labels = trained
    texts = [baseline_input(b) for b in baselines[:6]]
    attrs = attribute(ev, texts, labels[:6], AttributionConfig(batch_size=4))
    n_tokens = [len(r) for r in tokenize(ev.tokenizer, texts, ev.config.max_input_tokens, ev.eos_id)[0]]
    assert [len(a.scores) for a in attrs] == n_tokens  # padding positions excluded
    for a, text, y in zip(attrs, texts, labels):
        assert len(a.tokens) == len(a.offsets) == len(a.special) == len(a.scores)
        assert a.text == text and a.label == y
        assert math.isfinite(a.delta)
        assert a.tokens[-1] == "</s>" and a.special[-1] and a.scores[-1] == 0.0  # kept in the reference
    # Convergence delta as captum defines it: f(x) - f(x') ~ sum of attributions, small next to that difference.
    ids, mask, lab, lab_mask = _batch(ev, texts, labels[:6])
    with torch.no_grad():
        embeds = encoder_input_embeddings(ev.model, ids)
        ref = encoder_input_embeddings(ev.model, torch.where((ids == ev.eos_id) | (mask == 0), ids, ev.pad_id))
        gap = (label_logprob_forward(ev.model, embeds, mask, lab, lab_mask)
               - label_logprob_forward(ev.model, ref, mask, lab, lab_mask))
    for a, g in zip(attrs, gap.tolist()):
        assert sum(a.scores) - g == pytest.approx(a.delta, abs=1e-4)
        assert abs(a.delta) < 0.1 * abs(g) + 0.05


def test_delta_matches_captum(trained):
    from captum.attr import IntegratedGradients

    ev, baselines, labels = trained
    texts = [baseline_input(b) for b in baselines[:3]]
    ids, mask, lab, lab_mask = _batch(ev, texts, labels[:3])
    embeds = encoder_input_embeddings(ev.model, ids).detach()
    ref = encoder_input_embeddings(ev.model, torch.where((ids == ev.eos_id) | (mask == 0), ids, ev.pad_id)).detach()
    ig = IntegratedGradients(lambda e, m, y, ym: label_logprob_forward(ev.model, e, m, y, ym))
    attr, delta = ig.attribute(embeds, baselines=ref, additional_forward_args=(mask, lab, lab_mask), n_steps=16,
                               return_convergence_delta=True)
    ours = attribute(ev, texts, labels[:3], AttributionConfig(n_steps=16))
    # The same attributions up to float32 summation order: on an AMD EPYC CPU (torch 2.13) the row that ours runs
    # in a batch of another shape differs from captum's by up to 2.3e-4 (captum against itself, batched or by
    # row: 2e-7); a wrong path or reference would be off by 1e-2 and more (attributions here are ~0.1).
    for i, a in enumerate(ours):
        n = len(a.scores)
        assert a.scores == pytest.approx(attr[i, :n].sum(-1).tolist(), abs=5e-4)
        assert a.delta == pytest.approx(float(delta[i]), abs=5e-4)


def test_batched_equals_one_by_one(trained):
    ev, baselines, labels = trained
    texts = [baseline_input(b) for b in baselines[:8]]  # lengths differ: padding inside each batch
    assert len({len(t.split()) for t in texts}) > 1
    cfg = AttributionConfig(n_steps=16)
    batched = attribute(ev, texts, labels[:8], cfg.model_copy(update={"batch_size": 8, "internal_batch_size": 40}))
    single = attribute(ev, texts, labels[:8], cfg.model_copy(update={"batch_size": 1}))
    for a, b in zip(batched, single):
        assert a.tokens == b.tokens and a.offsets == b.offsets
        assert a.scores == pytest.approx(b.scores, abs=1e-4)
        assert a.delta == pytest.approx(b.delta, abs=1e-4)


@pytest.mark.parametrize("update", [{"reference": "mask"}, {"reference": "zero"}, {"method": "riemann_trapezoid"}])
def test_other_references_and_methods_run(trained, update):
    ev, baselines, labels = trained
    attrs = attribute(ev, [baseline_input(b) for b in baselines[:4]], labels[:4],
                      AttributionConfig(n_steps=8, **update))
    assert len(attrs) == 4 and all(math.isfinite(a.delta) and a.scores[-1] == 0.0 for a in attrs)


def test_eval_mode_during_ig_and_training_state_restored():
    texts = ["baseline: the man implies the dog .", "baseline: a cat ."]
    ev = tiny_evaluator(texts + LABELS, config=SMALL_MODEL.model_copy(update={"dropout": 0.5}))
    ev.model.train()
    first = attribute(ev, texts, LABELS[:2], AttributionConfig(n_steps=4))
    second = attribute(ev, texts, LABELS[:2], AttributionConfig(n_steps=4))
    assert [a.scores for a in first] == [a.scores for a in second]  # no dropout
    assert ev.model.training


def test_config_validates():
    with pytest.raises(ValidationError):
        AttributionConfig(n_step=3)
    with pytest.raises(ValidationError):
        AttributionConfig(reference="unk")
    assert AttributionConfig() != AttributionConfig(skip_stopwords=False)
    assert AttributionConfig().method == "gausslegendre"


def test_leading_whitespace_offsets_refer_to_b_as_given(trained):
    ev, baselines, labels = trained
    b = "  " + baselines[0]
    rows, _ = leakage_terms(ev, [b], labels[:1], AttributionConfig(n_steps=8))
    r = rows.row(0, named=True)
    assert b[r["start"]: r["end"]] == r["term"]


# ----------------------------------------------------------------------------------------------- leakage_term


def _hand_made(text: str, pieces: list[tuple[str, float]], special_last: bool = True) -> TokenAttribution:
    """Tokens given as (surface substring, score), located left to right in text; a trailing </s> at (0, 0)."""
    tokens, offsets, scores, pos = [], [], [], 0
    for piece, score in pieces:
        start = text.index(piece, pos)
        pos = start + len(piece)
        tokens.append(piece)
        offsets.append((start, pos))
        scores.append(score)
    if special_last:
        tokens.append("</s>")
        offsets.append((0, 0))
        scores.append(9.0)  # specials are never chosen, whatever their score
    return TokenAttribution(tokens=tokens, offsets=offsets, scores=scores, delta=0.0, label="x", text=text)


def test_leakage_term_expands_subwords_to_the_whole_word():
    text = baseline_input("the cyclists didn't un-related wait.")
    attr = _hand_made(text, [("baseline", 5.0), (":", 0.1), ("the", 0.2), ("cycl", 0.1), ("ists", 0.9),
                             ("didn", 0.3), ("'", 0.0), ("t", 0.1), ("un", 0.2), ("-", 0.0), ("related", 0.3),
                             ("wait", 0.1), (".", 0.5)])
    span = baseline_span(text)
    assert span == (len("baseline: "), len(text))
    term = leakage_term(attr, span, skip_stopwords=False)
    assert term == LeakageTerm(text="cyclists", start=4, end=12, score=0.9)  # "baseline" is outside b
    b = text[span[0]:]
    assert b[term.start: term.end] == "cyclists"
    attr.scores[4] = 0.0
    term = leakage_term(attr, span, skip_stopwords=False)
    assert (term.text, b[term.start: term.end]) == ("didn't", "didn't")
    attr.scores[5] = 0.0
    assert leakage_term(attr, span, skip_stopwords=False).text == "un-related"


def test_leakage_term_skips_punctuation_specials_and_stopwords():
    text = baseline_input("He said \"no\" -- she implies it!")
    attr = _hand_made(text, [("He", 3.0), ("said", 0.5), ('"', 9.0), ("no", 1.0), ('"', 9.0), ("--", 9.0),
                             ("she", 2.0), ("implies", 1.5), ("it", 2.5), ("!", 9.0)])
    span = baseline_span(text)
    assert leakage_term(attr, span, skip_stopwords=False).text == "He"
    term = leakage_term(attr, span, skip_stopwords=True)
    assert term == LeakageTerm(text="implies", start=20, end=27, score=1.5)
    attr.scores[7] = -0.1
    assert leakage_term(attr, span, skip_stopwords=True).text == "no"  # negations are kept: a known NLI cue
    # by_abs picks the largest magnitude; the signed choice is the default
    attr.scores[1] = -4.0
    assert leakage_term(attr, span, skip_stopwords=True).text == "no"
    assert leakage_term(attr, span, skip_stopwords=True, by_abs=True) == LeakageTerm("said", 3, 7, -4.0)


def test_leakage_term_special_flags_and_empty():
    text = baseline_input("<mask> bedroom")
    attr = _hand_made(text, [("<mask>", 5.0), ("bedroom", 1.0)], special_last=False)
    span = baseline_span(text)
    assert leakage_term(attr, span).text == "mask"  # without flags only (0, 0) offsets mark specials
    attr.special = [True, False]
    assert leakage_term(attr, span) == LeakageTerm("bedroom", 7, 14, 1.0)
    only_punct = _hand_made(baseline_input("..."), [("...", 1.0)])
    assert leakage_term(only_punct, baseline_span(only_punct.text)) is None
    with pytest.raises(ValueError):
        baseline_span("rationale: x baseline: y")


def test_span_rule_on_real_ig_masks_the_planted_cues_down_to_chance(trained):
    """The span rule end to end on the trained evaluator's IG: the cue words are chosen and masked, and the fresh
    probe's residual accuracy falls from ~1 to within the binomial margin of chance."""
    from larev.leakage.rationale_model import RationaleModelConfig
    from larev.leakage.spans import SpanRuleConfig
    from larev.methods.leakage_aware.leakage_spans import find_baseline_spans

    ev, _, _ = trained
    b, y = planted(240, seed=7, p_no_cue=0.0)
    frame = pl.DataFrame({"id": [f"r{i}" for i in range(len(b))], "task": ["nli"] * len(b),
                          "premise": ["the man"] * len(b), "hypothesis": ["the dog"] * len(b),
                          "question": [None] * len(b), "choices": [None] * len(b), "label": y, "baseline": b},
                         schema_overrides={"question": pl.String, "choices": pl.List(pl.String)})
    config = AttributionConfig(n_steps=16, spans=SpanRuleConfig(probe=RationaleModelConfig(epochs=4)))
    rows, _, summary = find_baseline_spans(ev, frame, 180, config)
    assert summary["residual_before"] > 0.9
    assert summary["converged"] and summary["residual_after"] < 1 / 3 + 0.15
    assert set(CUES) <= set(summary["chosen"].split(", "))
    cue_masked = sum(text[2] in (term or "") for text, term in zip((x.split() for x in b), rows["term"]))
    assert cue_masked == len(b)
