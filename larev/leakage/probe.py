"""Residual leakage: how much label information a text still carries once its leaky spans are masked, measured by
a fresh rationale-only model trained on the masked texts (compare with chance, 1/K, and with the unmasked model)."""

from __future__ import annotations

from types import SimpleNamespace

from larev.leakage.rationale_model import (RationaleModelConfig, accuracy_of, train_rationale_model, word_attributions,
                                           words_with_offsets)


def residual_leakage(train_texts: list[str], train_labels: list[str], train_candidates: list[list[str]],
                     val_texts: list[str], val_labels: list[str], val_candidates: list[list[str]],
                     config: RationaleModelConfig) -> float:
    """Validation accuracy of a fresh rationale-only model trained on the MASKED training rationales: how much
    label information the masking left behind (compare with chance, 1/K, and with the unmasked model)."""
    model = train_rationale_model(train_texts, train_labels, train_candidates, config)
    return accuracy_of(model, val_texts, val_labels, val_candidates)


def probe_attributions(texts: list[str], labels: list[str], candidates: list[list[str]], config: RationaleModelConfig,
                       n_steps: int = 16) -> tuple[list[list[tuple[str, int, int]]], list[list[float]]]:
    """What a fresh probe trained on `texts` reads the label from: its words (`words_with_offsets`, cut to
    max_words) and each word's IG attribution to log p(label) (the RORA Phi_small attribution), per text."""
    model = train_rationale_model(texts, labels, candidates, config)
    scores = word_attributions(model, texts, labels, candidates, SimpleNamespace(n_steps=n_steps, batch_size=128))
    words = [words_with_offsets(t)[: config.max_words] for t in texts]
    return words, scores
