"""Evaluator models: normalisation by hand, batched scoring vs the model's own loss, training, save/load."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from larev.config import ModelConfig, ScoreConfig, TrainConfig
from larev.errors import ConfigError
from larev.models.evaluator import (candidate_logprobs, load_evaluator, load_hf_checkpoint, normalise_label_scores,
                                    pad_batch, save_evaluator, score_labels, tokenize)
from larev.models.tokenizer import SPECIAL_TOKENS, train_word_tokenizer
from larev.models.train import (LENGTH_GROUP_BATCHES, epoch_order, linear_warmup_decay, train_evaluator,
                               warn_if_at_chance)
from tests.helpers import TINY_MODEL, tiny_evaluator

LABELS = ["entailment", "contradiction", "neutral"]


def test_normalise_label_scores_by_hand():
    # Two rows; row 1 has only two candidates (third is padding, -inf).
    seq = torch.tensor([[math.log(0.2), math.log(0.1), math.log(0.1)],
                        [math.log(0.5), math.log(0.25), -math.inf]])
    ntok = torch.tensor([[2.0, 2.0, 4.0], [1.0, 2.0, 1.0]])
    target = torch.tensor([0, 1])
    logp, pred = normalise_label_scores(seq, ntok, target, "label_set")
    # row 0: 0.2 / (0.2 + 0.1 + 0.1) = 0.5 ; row 1: 0.25 / 0.75 = 1/3
    assert logp.tolist() == pytest.approx([math.log(0.5), math.log(1 / 3)])
    assert pred.tolist() == [0, 0]
    logp, _ = normalise_label_scores(seq, ntok, target, "sum")
    assert logp.tolist() == pytest.approx([math.log(0.2), math.log(0.25)])
    logp, pred = normalise_label_scores(seq, ntok, target, "mean")
    assert logp.tolist() == pytest.approx([math.log(0.2) / 2, math.log(0.25) / 2])
    # mean favours the 4-token candidate of row 0: log(0.1)/4 > log(0.2)/2
    assert pred.tolist() == [2, 0]
    with pytest.raises(ConfigError):
        normalise_label_scores(seq, ntok, target, "softmax")


def test_tokenizer_specials_and_truncation():
    tok = train_word_tokenizer(["the cat sat on the mat .", "a dog ran"])
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    ids = tok("The cat flew")["input_ids"]
    assert ids[-1] == tok.eos_token_id and tok.unk_token_id in ids  # lower-cased; unknown word -> <unk>
    rows, n_cut = tokenize(tok, ["the cat sat on the mat", "a dog"], max_len=4, eos_id=tok.eos_token_id)
    assert n_cut == 1 and rows[0][-1] == tok.eos_token_id and len(rows[0]) == 4 and len(rows[1]) == 3
    ids, mask = pad_batch(rows, tok.pad_token_id)
    assert ids.shape == (2, 4) and mask.sum().item() == 7


def test_candidate_logprobs_match_model_loss():
    ev = tiny_evaluator(["premise hypothesis yes no maybe"] + LABELS)
    rows, _ = tokenize(ev.tokenizer, ["premise yes", "hypothesis no maybe"], 32, ev.eos_id)
    ids, mask = pad_batch(rows, ev.pad_id)
    lab_rows, _ = tokenize(ev.tokenizer, ["neutral", "entailment"], 8, ev.eos_id)
    lab, lab_mask = pad_batch(lab_rows, ev.pad_id)
    with torch.no_grad():
        got = candidate_logprobs(ev.model.eval(), ids, mask, lab, lab_mask, torch.tensor([0, 1]))
        for i in range(2):
            out = ev.model(input_ids=ids[i:i + 1], attention_mask=mask[i:i + 1], labels=lab[i:i + 1])
            # HF loss is the token mean of -log p; our sum over the 2 label tokens = -2 * loss
            assert got[i].item() == pytest.approx(-2 * out.loss.item(), rel=1e-5)


def _planted_task(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    inputs, labels = [], []
    for _ in range(n):
        y = LABELS[rng.integers(3)]
        filler = " ".join(rng.choice(words, size=6))
        inputs.append(f"{filler} cue{LABELS.index(y)} {filler}")
        labels.append(y)
    return inputs, labels


def test_training_learns_a_planted_cue_and_changes_parameters():
    inputs, labels = _planted_task(240)
    ev = tiny_evaluator(inputs + LABELS)
    before = {k: v.clone() for k, v in ev.model.state_dict().items()}
    result = train_evaluator(ev, inputs[:200], labels[:200], inputs[200:], labels[200:], [LABELS] * 40,
                             TrainConfig(epochs=8, batch_size=16, learning_rate=5e-3, seed=1), progress=False)
    changed = [k for k, v in ev.model.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) == len(before)
    assert len(result.history) == 8 and 1 <= result.best_epoch <= 8
    scores = score_labels(ev, inputs[200:], labels[200:], [LABELS] * 40)
    assert scores.logp.shape == (40,) and np.all(scores.logp <= 0)
    assert scores.correct.mean() >= 0.9
    best = result.history[result.best_epoch - 1]
    assert best.val_logp == max(h.val_logp for h in result.history)
    assert scores.logp.mean() == pytest.approx(best.val_logp, abs=1e-6)  # the best epoch was restored


def test_training_is_deterministic_for_a_seed():
    inputs, labels = _planted_task(64)
    results = []
    for _ in range(2):
        ev = tiny_evaluator(inputs + LABELS, seed=3)
        train_evaluator(ev, inputs, labels, [], [], [], TrainConfig(epochs=1, batch_size=16, seed=5), progress=False)
        results.append(score_labels(ev, inputs[:10], labels[:10], [LABELS] * 10).logp)
    np.testing.assert_array_equal(results[0], results[1])


def test_scoring_is_batch_size_invariant_and_checks_candidates():
    inputs, labels = _planted_task(30)
    ev = tiny_evaluator(inputs + LABELS + ["yes", "no"])
    cands = [LABELS if i % 2 else ["yes", "no", y] for i, y in enumerate(labels)]  # mixed candidate sets
    inputs = [x + " and so on" * (i % 5) for i, x in enumerate(inputs)]  # lengths vary: batches are length-sorted
    a = score_labels(ev, inputs, labels, cands, ScoreConfig(batch_size=4))
    b = score_labels(ev, inputs, labels, cands, ScoreConfig(batch_size=64))
    np.testing.assert_allclose(a.logp, b.logp, atol=1e-5)
    assert a.predicted == b.predicted
    # one row at a time (no padding, no reordering) is the reference each row must match, in input order
    one = [score_labels(ev, [x], [y], [c]) for x, y, c in zip(inputs, labels, cands)]
    np.testing.assert_allclose(a.logp, [o.logp[0] for o in one], atol=1e-5)
    assert a.predicted == [o.predicted[0] for o in one]
    assert list(a.correct) == [p == y for p, y in zip(a.predicted, labels)]
    with pytest.raises(ValueError, match="not among its candidates"):
        score_labels(ev, inputs[:1], ["neutral"], [["yes", "no"]])


def test_save_load_round_trip_and_hf_path(tmp_path):
    inputs, labels = _planted_task(20)
    ev = tiny_evaluator(inputs + LABELS)
    save_evaluator(ev, tmp_path / "m", role="phi")
    assert (tmp_path / "m" / "model.safetensors").exists()
    loaded = load_evaluator(tmp_path / "m", device="cpu")
    assert loaded.config == TINY_MODEL and loaded.meta["role"] == "phi"
    a = score_labels(ev, inputs, labels, [LABELS] * 20)
    np.testing.assert_allclose(a.logp, score_labels(loaded, inputs, labels, [LABELS] * 20).logp, atol=1e-6)
    # The Hugging Face checkpoint path (as for t5-large) loads the same directory by path.
    hf = load_hf_checkpoint(ModelConfig(backbone=str(tmp_path / "m")))
    hf.model.eval()
    np.testing.assert_allclose(a.logp, score_labels(hf, inputs, labels, [LABELS] * 20).logp, atol=1e-6)


def test_missing_checkpoint_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="local directory"):
        load_hf_checkpoint(ModelConfig(backbone=str(tmp_path / "nowhere")))
    with pytest.raises(ConfigError, match="not a larev evaluator"):
        load_evaluator(tmp_path)


def _padded_tokens(order: list[int], lengths: list[int], batch_size: int) -> int:
    batches = [order[k: k + batch_size] for k in range(0, len(order), batch_size)]
    return sum(max(lengths[i] for i in b) * len(b) for b in batches)


def test_length_grouped_order_is_a_permutation_of_sorted_batches_with_less_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 60, size=3 * 32 * LENGTH_GROUP_BATCHES + 17).tolist()  # three chunks, a short batch
    grouped = epoch_order(lengths, 32, torch.Generator().manual_seed(1), group_by_length=True)
    plain = epoch_order(lengths, 32, torch.Generator().manual_seed(1), group_by_length=False)
    assert sorted(grouped) == sorted(plain) == list(range(len(lengths)))
    batches = [grouped[k: k + 32] for k in range(0, len(grouped), 32)]
    assert all(len(b) == 32 for b in batches[:-1]) and len(batches[-1]) == 17  # the short batch comes last
    # within a 1,600-row chunk of lengths 5..59 a batch of 32 neighbours spans a few length units (the short
    # batch is a 17-row chunk of its own)
    assert max(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches[:-1]) <= 6
    # the batch order is shuffled: not the chunks' descending runs one after another
    firsts = [lengths[b[0]] for b in batches[:LENGTH_GROUP_BATCHES]]
    assert firsts != sorted(firsts, reverse=True)
    assert _padded_tokens(grouped, lengths, 32) < 0.7 * _padded_tokens(plain, lengths, 32)
    again = epoch_order(lengths, 32, torch.Generator().manual_seed(1), group_by_length=True)
    other = epoch_order(lengths, 32, torch.Generator().manual_seed(2), group_by_length=True)
    assert grouped == again and grouped != other


def test_length_grouped_order_of_fewer_rows_than_a_batch_is_a_plain_permutation():
    assert sorted(epoch_order([3, 1, 2], 32, torch.Generator().manual_seed(0), group_by_length=True)) == [0, 1, 2]


def test_warmup_then_linear_decay():
    assert [linear_warmup_decay(s, total=10, warmup=2) for s in range(10)] == pytest.approx(
        [0.5, 1.0, 1.0, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8])


def test_scoring_a_very_long_input_truncates_it_and_logs_the_count(caplog):
    import logging

    from larev.models.evaluator import score_labels

    words = "a cat sat on the mat".split()
    evaluator = tiny_evaluator([" ".join(words), "entailment neutral contradiction"])
    long_text = " ".join(words * 200)  # 1,200 words, far past max_input_tokens (128)
    labels = ["entailment", "neutral"]
    with caplog.at_level(logging.INFO, logger="larev"):
        out = score_labels(evaluator, [long_text, "a cat"], labels, [["entailment", "neutral", "contradiction"]] * 2)
    assert out.n_truncated == 1 and np.isfinite(out.logp).all()
    assert "1 of 2 inputs were longer than 128 tokens and were truncated" in caplog.text
    # truncation keeps the first max_input_tokens tokens: the long text scores as its first 128 tokens do
    head = " ".join((words * 200)[:127])
    same = score_labels(evaluator, [head], labels[:1], [["entailment", "neutral", "contradiction"]])
    assert out.logp[0] == pytest.approx(same.logp[0], abs=1e-6)


def test_saving_and_loading_print_no_hugging_face_bars(tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    from larev.models.evaluator import save_evaluator

    hf_logging.enable_progress_bar()  # as in a worker's flow-run process, where nobody turned them off
    try:
        ev = tiny_evaluator(["premise hypothesis"] + LABELS)
        save_evaluator(ev, tmp_path / "ev")
        load_evaluator(tmp_path / "ev", device="cpu")
        printed = capfd.readouterr()
        assert "Loading weights" not in printed.err + printed.out
        assert "Writing model shards" not in printed.err + printed.out
        assert hf_logging.is_progress_bar_enabled()  # the library's own setting is left as it was
    finally:
        hf_logging.disable_progress_bar()


def test_a_model_kept_at_chance_is_warned_about(caplog):
    """Three choices on 100 validation rows: chance 1/3, two standard errors 0.094. 0.40 is within it; 0.45 is
    not; a single-candidate task (the infiller) has nothing to warn about."""
    import logging

    three = [["a", "b", "c"]] * 100
    with caplog.at_level(logging.WARNING, logger="larev.models.train"):
        warn_if_at_chance("phi", 0.40, 2, three)
        assert "phi: validation accuracy 0.400 after 2 epochs is within chance (0.333 + 0.094)" in caplog.text
        assert "--backbone minilm" in caplog.text
        caplog.clear()
        warn_if_at_chance("phi", 0.40, 2, three, backbone="minilm")  # already pretrained: other advice
        assert "--learning-rate" in caplog.text and "--backbone" not in caplog.text
        caplog.clear()
        # phi_LA trains with larev.la_train, which --epochs / --learning-rate do not set; IRM can be the cause
        warn_if_at_chance("phi_LA", 0.33, 2, three, backbone="minilm", settings="larev.la_train",
                          irm_option="--lambda-irm")
        assert ("Try: train longer (--set larev.la_train.epochs=N); lower the IRM weight (--lambda-irm); change the "
                "learning rate (--set larev.la_train.learning_rate=X).") in caplog.text
        caplog.clear()
        warn_if_at_chance("phi", 0.45, 2, three)
        warn_if_at_chance("infiller", 0.0, 2, [["only"]] * 100)
        assert caplog.text == ""
