"""RORA's configuration, and which rationale source's models score a source."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from larev.config import TrainConfig, _Config
from larev.data.variants import TEST_ONLY_VARIANTS
from larev.leakage.spans import LeakageDetectionConfig
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.methods.rora.infill import InfillerConfig
from larev.stress.addtext.perturb import SOURCE_TAG as ADDTEXT_TAG


class RoraConfig(_Config):
    """Everything RORA needs beyond the evaluator backbone; also switches the RQ and LAS baselines."""

    enabled: bool = Field(True, description="train RORA's models and score RORA, RQ and LAS")
    train_on: Literal["each_source", "gold"] = Field(
        "gold", description="gold: one set of models from the gold rationales scores every source (default: 4x "
                            "less work, and how a model's own rationales are scored anyway); each_source: models "
                            "per rationale source with training rationales (the paper's protocol)")
    detection: LeakageDetectionConfig = Field(default_factory=LeakageDetectionConfig,
                                              description="the rationale-only model and the leaky-word threshold")
    infiller: InfillerConfig = Field(default_factory=InfillerConfig, description="counterfactual infilling")
    objective: LeakageAwareConfig = Field(
        default_factory=lambda: LeakageAwareConfig(lambda_irm=1.0, lambda_probe=0.0, irm_on="label_set",
                                                   empty_rationales=False, lambda_borrowed=0.0,
                                                   zero_terms_start=0.0),
        description="Phi's eq. 8: IRMv1 weight on the label-set scores (no probe term and none of LAREV's zero "
                    "terms in RORA)")
    phi_train: TrainConfig = Field(default_factory=lambda: TrainConfig(epochs=2, batch_size=16),
                                   description="Phi: batch_size counts examples, each with all its environments")

    def sources(self, variants: list[str]) -> list[str]:
        """The rationale sources that get their own RORA models ('gold' always: it scores every other source)."""
        if self.train_on == "gold":
            return ["gold"]
        return training_sources(variants)


def training_sources(variants: list[str]) -> list[str]:
    """Every built-in rationale source with training rationales, gold first: RQ / LAS train a proxy on each (their
    definition: how well that source's rationales let a simulator predict the label), whatever RORA trains on.
    The test-only variants (borrowed, borrowed_other, empty) probe the evaluators and are no training source: the
    gold rationales' models score them."""
    return ["gold", *[v for v in variants if v != "gold" and v not in TEST_ONLY_VARIANTS]]


def model_source(source: str, trained: list[str]) -> str:
    """The source whose models score `source`: its own when trained, else gold's. An AddText copy
    (`gold+addtext-rand-end`) is scored with its original source's models."""
    if source in trained:
        return source
    base = source.split(ADDTEXT_TAG, 1)[0]
    return base if base in trained else "gold"
