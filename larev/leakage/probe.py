"""Residual leakage: how much label information a text still carries once its leaky spans are masked, measured by
a fresh rationale-only model trained on the masked texts (compare with chance, 1/K, and with the unmasked model)."""

from __future__ import annotations

from larev.leakage.rationale_model import RationaleModelConfig, accuracy_of, train_rationale_model


def residual_leakage(train_texts: list[str], train_labels: list[str], train_candidates: list[list[str]],
                     val_texts: list[str], val_labels: list[str], val_candidates: list[list[str]],
                     config: RationaleModelConfig) -> float:
    """Validation accuracy of a fresh rationale-only model trained on the MASKED training rationales: how much
    label information the masking left behind (compare with chance, 1/K, and with the unmasked model)."""
    model = train_rationale_model(train_texts, train_labels, train_candidates, config)
    return accuracy_of(model, val_texts, val_labels, val_candidates)
