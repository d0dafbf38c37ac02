"""Small builders shared by tests: a tiny embedded evaluator over a given vocabulary."""

from __future__ import annotations

from larev.config import ModelConfig
from larev.models.evaluator import new_evaluator
from larev.models.tokenizer import train_word_tokenizer

TINY_MODEL = ModelConfig(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, dropout=0.0)


def tiny_evaluator(texts: list[str], seed: int = 0, config: ModelConfig = TINY_MODEL):
    return new_evaluator(config, tokenizer=train_word_tokenizer(texts), seed=seed)
