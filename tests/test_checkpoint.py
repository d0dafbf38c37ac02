"""Per-epoch checkpoints: RNG and state round trips, and training that resumes to the same weights."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from larev.models.checkpoint import (DirectoryCheckpointer, TrainingState, capture_rng, read_state, restore_rng,
                              write_state)
from larev.config import TrainConfig
from larev.formats import baseline_input, rationale_input
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.methods.leakage_aware.objective import probe_from
from larev.methods.leakage_aware.training import LAInstance, train_leakage_aware
from larev.models.train import train_evaluator
from tests.helpers import tiny_evaluator

LABELS = ["entailment", "contradiction", "neutral"]
WORDS = ["a", "man", "dog", "implies", "contradicts", "unrelated", "<mask>", "fruit", "tool", "rationale",
         "baseline", ":", "."]
CUE = {"entailment": "implies", "contradiction": "contradicts", "neutral": "unrelated"}


class Interrupted(Exception):
    pass


def _draws(generator: torch.Generator) -> tuple:
    return (torch.randperm(10, generator=generator).tolist(), torch.rand(3).tolist(), random.random(),
            float(np.random.rand()))


def test_rng_states_round_trip_through_a_checkpoint(tmp_path):
    generator = torch.Generator().manual_seed(3)
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    _draws(generator)
    rng = capture_rng(generator)
    expected = _draws(generator)
    model = torch.nn.Linear(2, 2)
    state = TrainingState(epoch=1, model=model.state_dict(), optimizer={}, scheduler={}, rng=rng, best_score=-1.5,
                          best_epoch=1, best_model=None, progress={"history": [{"loss": 0.5}]})
    write_state(state, tmp_path)
    loaded = read_state(tmp_path)
    _draws(generator)  # move every generator on
    restore_rng(generator, loaded.rng)
    assert _draws(generator) == expected
    assert loaded.progress == {"history": [{"loss": 0.5}]} and loaded.best_epoch == 1
    assert torch.equal(loaded.model["weight"], model.weight)


def _planted(n: int) -> tuple[list[str], list[str]]:
    labels = [LABELS[i % 3] for i in range(n)]
    return [f"a man {CUE[y]} a {'dog' if i % 2 else 'fruit'}" for i, y in enumerate(labels)], labels


def _stop_after(epoch: int):
    def hook(done, *_):
        if done == epoch:
            raise Interrupted

    return hook


def test_train_evaluator_resumes_to_the_uninterrupted_weights(tmp_path, caplog):
    inputs, labels = _planted(48)
    config = TrainConfig(epochs=3, batch_size=8, learning_rate=3e-3, seed=7)
    args = (inputs[:40], labels[:40], inputs[40:], labels[40:], [LABELS] * 8, config)
    straight = tiny_evaluator(WORDS + LABELS, seed=1)
    train_evaluator(straight, *args, progress=False)

    checkpoints = DirectoryCheckpointer(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        train_evaluator(tiny_evaluator(WORDS + LABELS, seed=1), *args, progress=False, checkpointer=checkpoints,
                        on_epoch_end=_stop_after(2))
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["epoch-0002"]  # only the latest is kept
    resumed = tiny_evaluator(WORDS + LABELS, seed=99)  # different init: everything must come from the checkpoint
    with caplog.at_level("INFO"):
        result = train_evaluator(resumed, *args, progress=False, checkpointer=checkpoints)
    assert "resuming from the checkpoint after epoch 2 of 3" in caplog.text
    assert [h.epoch for h in result.history] == [1, 2, 3]
    assert straight.meta["training"] == {**resumed.meta["training"],
                                         "history": straight.meta["training"]["history"]}
    for name, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_leakage_aware_training_resumes_to_the_uninterrupted_weights(tmp_path):
    data = [LAInstance(inputs=tuple(rationale_input(f"a {w}", f"a man {t} a dog") for t in (CUE[y], "<mask>", "implies")),
                       probe_input=baseline_input("a man <mask> a dog"), label=y, candidates=tuple(LABELS))
            for y, w in zip(LABELS * 6, ["fruit", "tool", "dog"] * 6)]
    config = TrainConfig(epochs=3, batch_size=4, learning_rate=3e-3, seed=5)
    psi = probe_from(tiny_evaluator(WORDS + LABELS, seed=0))

    def train(checkpointer=None, seed=2):
        model = tiny_evaluator(WORDS + LABELS, seed=seed)
        every_term = LeakageAwareConfig(lambda_irm=1.0, lambda_probe=0.005)  # the IRM and probe terms both on
        result = train_leakage_aware(model, psi, data[:15], data[15:], [LABELS] * 3, config, every_term,
                                     "nli", progress=False, log_every=2, checkpointer=checkpointer)
        return model, result

    straight, straight_result = train()
    checkpoints = DirectoryCheckpointer(tmp_path)
    original_save = checkpoints.save

    def save_then_stop(state):
        original_save(state)
        if state.epoch == 1:
            raise Interrupted

    checkpoints.save = save_then_stop
    with pytest.raises(Interrupted):
        train(checkpoints)
    checkpoints.save = original_save
    resumed, resumed_result = train(checkpoints, seed=11)
    assert resumed_result.trace == straight_result.trace  # the warm-up step counter carried over
    assert [h["epoch"] for h in resumed_result.history] == [1, 2, 3]
    for name, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name
