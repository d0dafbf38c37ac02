"""FTC's configuration and the factories that turn it into an extractor and a task model."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Literal

from pydantic import Field

from larev.config import _Config
from larev.stress.ftc.distances import DEFAULT_ALPHA


class FtcConfig(_Config):
    """How FTC (Faithfulness-Through-Counterfactuals, NLI only) is computed for a rationale file."""

    extractor: Literal["rules", "llm"] = Field(
        "rules", description="rules: regular expressions over the common explanation templates (section 3.2's "
                             "extract-and-transform baseline); llm: a few-shot LLM extractor, the rules as fallback")
    llm_model: str = Field("gemini-2.5-flash-lite", description="LLM for extractor='llm' (same client, prompt cache "
                                                                "and retries as the antonym step)")
    task_model: str | None = Field(
        None, description="the NLI model f whose faithfulness is measured: a Hugging Face sequence-classification "
                          "checkpoint (name or local path, id2label naming the three NLI labels); empty: the run's "
                          "own no-rationale evaluator theta (trained when RORA is on)")
    alpha: float = Field(DEFAULT_ALPHA, gt=0, le=1, description="FTC-W ground distance between neutral and the "
                                                                "other labels (entailment-contradiction is 1)")
    batch_size: int = Field(32, ge=1, description="pairs per forward pass of an HF task model")


def make_extractor(config: FtcConfig, *, api_key: str | None = None,
                   cache: MutableMapping[str, str] | None = None):
    """The rule extractor, or the LLM extractor (Gemini behind a prompt cache) with the rules as fallback."""
    from larev.stress.ftc.extract import RuleExtractor

    if config.extractor == "rules":
        return RuleExtractor()
    from larev.stress.ftc.llm_extract import LlmRelationExtractor
    from larev.llm import cached_gemini

    return LlmRelationExtractor(cached_gemini(config.llm_model, api_key=api_key, cache=cache))


def make_task_model(config: FtcConfig, *, evaluator=None, device: str = "auto", score_config=None):
    """`config.task_model` as an HF sequence classifier, else `evaluator` (the run's theta) as the task model."""
    from larev.errors import ConfigError
    from larev.stress.ftc.task_model import EvaluatorTaskModel, HFSequenceClassifier

    if config.task_model:
        return HFSequenceClassifier(config.task_model, device=device, batch_size=config.batch_size)
    if evaluator is None:
        raise ConfigError("FTC needs a task model: this run has no no-rationale evaluator theta (it was trained "
                          "without RORA); rerun with RORA on, or give ftc.task_model (an HF NLI classifier)")
    return EvaluatorTaskModel(evaluator, score_config=score_config)
