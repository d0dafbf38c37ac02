"""One typed config per generator kind, the `--generators` specs that name them, and the default set.

A generator writes one rationale per test example under its `name` (the rationale file's `source`). Kinds:

  embedded         the embedded T5 trained here on (label, input) -> gold rationale, on a budget of the training
                   rows (`fraction`), or on shuffled pairs (`pairs='shuffled'`: a known defect)
  label-only       states the label and nothing else (a known defect)
  hypothesis-copy  copies the hypothesis (QA: the question) (a known defect)
  gemini           Gemini through google-genai with the thesis's C.3 prompt
  hf-seq2seq       a Hugging Face seq2seq model (Flan-T5, BART) by name or local path, C.3 prompt
  hf-causal        a Hugging Face causal model (Llama, Qwen) by name or local path, C.3 prompt (its chat template)

Each config is frozen and refuses unknown fields, is validated when built (before any step runs), and is stored
in the provenance of every file it generated.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from larev.config import ModelConfig, TrainConfig, _Config
from larev.data.variants import VARIANTS
from larev.errors import ConfigError

#: What a source name may look like (it names rows, leaderboard entries and `larev compare` arguments).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"

#: The default offline generators, in their expected order of quality, best first (docs/methods.md, "Generated
#: rationales"): the embedded T5 on all, a half and an eighth of the training rows, then the known defects.
DEFAULT_GENERATOR_SPECS = ("embedded:1", "embedded:1/2", "embedded:1/8", "shuffled-pairs", "hypothesis-copy",
                           "label-only")


class _Generator(_Config):
    """What every generator config has: its name (the source of its rows); a default is derived from the config."""

    name: str = Field(..., pattern=NAME_PATTERN, description="the source name of its rows in the rationale file")

    @field_validator("name")
    @classmethod
    def _not_a_variant(cls, name: str) -> str:
        if name in VARIANTS:
            raise ValueError(f"{name!r} is one of a run's own rationale variants ({', '.join(VARIANTS)}); a "
                             "generated source under that name would be mistaken for it: choose another")
        return name

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data):
        if isinstance(data, dict) and not data.get("name"):
            data = {**data, "name": cls.default_name(data)}
        return data

    @classmethod
    def default_name(cls, data: dict) -> str:
        raise NotImplementedError


def _safe_name(text: str) -> str:
    """`text` as a source name: characters other than letters, digits, '.', '_' and '-' become '-'."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return name or "generator"


def fraction_label(fraction: float) -> str:
    """'all' for 1, else 'PofQ' (1/8 -> '1of8'): a budget as a source name reads it."""
    share = Fraction(fraction).limit_denominator(1000)
    return "all" if share == 1 else f"{share.numerator}of{share.denominator}"


class DecodingConfig(_Config):
    """How the embedded generator decodes (deterministic: greedy or beam search, never sampled)."""

    max_new_tokens: int = Field(48, ge=2, description="at most this many tokens per rationale")
    num_beams: int = Field(1, ge=1, description="1: greedy decoding; more: beam search")
    no_repeat_ngram_size: int = Field(3, ge=0, description="no n-gram of this size twice in a rationale (0: off); "
                                                           "a small model's greedy output loops without it")
    batch_size: int = Field(64, ge=1, description="rows per generate call")


class EmbeddedGeneratorConfig(_Generator):
    """The embedded T5 trained here as a rationale generator: input the label and the task input (the C.3 prompt's
    question and answer, as larev's evaluators read them), target the gold rationale."""

    kind: Literal["embedded"] = "embedded"
    fraction: float = Field(1.0, gt=0, le=1, description="share of the training rows it trains on (at least one "
                                                          "row); the rows of a smaller share are among those of a "
                                                          "larger one (the same budget_seed)")
    pairs: Literal["aligned", "shuffled"] = Field(
        "aligned", description="aligned: each input with its own gold rationale; shuffled: each input with another "
                               "row's rationale (a seeded derangement, per split): the known defect 'shuffled-pairs'")
    budget_seed: int = Field(0, description="draws which training rows a budget keeps, and the shuffled pairing")
    model: ModelConfig = Field(default_factory=lambda: ModelConfig(max_target_tokens=48),
                               description="the network (backbone 'embedded'; max_target_tokens: rationales are cut "
                                           "to this many tokens in training); its vocabulary is the run's tokenizer")
    train: TrainConfig = Field(default_factory=lambda: TrainConfig(epochs=20, select_by="sum"),
                               description="training loop (a network trained from scratch needs many passes before "
                                           "its rationales follow the input rather than the commonest one); the "
                                           "kept epoch has the highest log-likelihood of the validation rationales "
                                           "(select_by sum or mean)")
    decoding: DecodingConfig = Field(default_factory=DecodingConfig)

    @field_validator("model", "train", "decoding", mode="before")
    @classmethod
    def _over_defaults(cls, value, info):
        """A section given in part keeps this generator's defaults for the rest (`train: {epochs: 30}` still
        selects by the rationales' log-likelihood)."""
        if isinstance(value, dict):
            default = cls.model_fields[info.field_name].get_default(call_default_factory=True)
            return {**default.model_dump(), **value}
        return value

    @classmethod
    def default_name(cls, data: dict) -> str:
        fraction = float(data.get("fraction", 1.0))
        if data.get("pairs") == "shuffled":
            return "shuffled-pairs" + ("" if fraction == 1 else f"-{fraction_label(fraction)}")
        return f"embedded-{fraction_label(fraction)}"

    @model_validator(mode="after")
    def _trainable(self):
        if self.model.backbone != "embedded":
            raise ValueError(f"a trained generator is built on the embedded backbone, got {self.model.backbone!r}; "
                             "use kind 'hf-seq2seq' for a Hugging Face model")
        if self.train.select_by == "label_set":
            raise ValueError("train.select_by must be 'sum' or 'mean' for a generator: a rationale has no label set "
                             "to normalise over")
        return self


class LabelOnlyConfig(_Generator):
    """States the label and nothing else (larev.generate.defects.LABEL_ONLY_TEMPLATE): a known defect."""

    kind: Literal["label-only"] = "label-only"

    @classmethod
    def default_name(cls, data: dict) -> str:
        return "label-only"


class HypothesisCopyConfig(_Generator):
    """Copies the hypothesis (QA: the question): a known defect."""

    kind: Literal["hypothesis-copy"] = "hypothesis-copy"

    @classmethod
    def default_name(cls, data: dict) -> str:
        return "hypothesis-copy"


class GeminiGeneratorConfig(_Generator):
    """Gemini through google-genai at temperature 0 with the C.3 prompt. The key comes from GEMINI_API_KEY /
    GOOGLE_API_KEY (or the Prefect Secret block `gemini-api-key`); every reply is kept in the store's prompt
    cache, so a rerun asks the model nothing it answered before."""

    kind: Literal["gemini"] = "gemini"
    model: str = Field("gemini-2.5-pro", min_length=1, description="the Gemini model (the thesis's table 5.8 used "
                                                                   "Gemini-2.5-Pro)")
    max_retries: int = Field(4, ge=0, description="retries of a transient error (HTTP 408, 429, 5xx, timeouts)")
    timeout_s: float = Field(60.0, gt=0, description="seconds per request")
    backoff_s: float = Field(1.0, ge=0, description="first retry's wait; doubled per retry, plus jitter")

    @classmethod
    def default_name(cls, data: dict) -> str:
        return _safe_name(str(data.get("model") or cls.model_fields["model"].default))


class _HFGenerator(_Generator):
    model: str = Field(..., min_length=1, description="a Hugging Face model name or a local directory "
                                                      "(safetensors weights)")

    @classmethod
    def default_name(cls, data: dict) -> str:
        model = str(data.get("model") or "")
        return _safe_name(model.rstrip("/").rsplit("/", 1)[-1])


class HFSeq2SeqGeneratorConfig(_HFGenerator):
    """A Hugging Face seq2seq model (larev.llm.HFSeq2SeqGenerator) with the C.3 prompt."""

    kind: Literal["hf-seq2seq"] = "hf-seq2seq"
    num_beams: int = Field(4, ge=1, description="beam search width (1: greedy)")
    max_new_tokens: int = Field(96, ge=1, description="at most this many tokens per rationale")
    max_input_tokens: int = Field(256, ge=8, description="prompts are cut to this many tokens")
    batch_size: int = Field(16, ge=1, description="prompts per generate call")


class HFCausalGeneratorConfig(_HFGenerator):
    """A Hugging Face causal model (larev.llm.HFCausalGenerator) with the C.3 prompt, greedy."""

    kind: Literal["hf-causal"] = "hf-causal"
    chat_template: bool = Field(True, description="send the prompt as a user turn through the tokenizer's chat "
                                                  "template when it has one (instruction-tuned models)")
    max_new_tokens: int = Field(96, ge=1, description="at most this many new tokens per rationale")
    max_input_tokens: int = Field(512, ge=8, description="prompts are cut to this many tokens")
    batch_size: int = Field(8, ge=1, description="prompts per generate call")


GeneratorConfig = Annotated[EmbeddedGeneratorConfig | LabelOnlyConfig | HypothesisCopyConfig | GeminiGeneratorConfig
                            | HFSeq2SeqGeneratorConfig | HFCausalGeneratorConfig, Field(discriminator="kind")]
#: Kinds whose rationales come from the C.3 prompt.
PROMPTED_KINDS = ("gemini", "hf-seq2seq", "hf-causal")

_SPEC = re.compile(r"^(?:(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)=)?(?P<kind>[a-z0-9-]+)(?::(?P<arg>.+))?$")
_SPEC_HELP = ("expected [NAME=]KIND[:ARG]: embedded[:FRACTION], shuffled-pairs[:FRACTION], label-only, "
              "hypothesis-copy, gemini[:MODEL], hf-seq2seq:MODEL or hf-causal:MODEL (FRACTION e.g. 1/8)")


def _fraction(text: str, spec: str) -> float:
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise ConfigError(f"generator {spec!r}: {text!r} is not a fraction of the training rows such as 1/8 or "
                          "0.5") from None
    if not 0 < value <= 1:
        raise ConfigError(f"generator {spec!r}: the fraction of the training rows must lie in (0, 1], got {text}")
    return float(value)


def parse_generator_spec(spec: str) -> dict:
    """A `--generators` item as the fields of its config (validated by `generator_configs`): see _SPEC_HELP."""
    match = _SPEC.match(spec.strip())
    if match is None:
        raise ConfigError(f"generator {spec!r}: {_SPEC_HELP}")
    kind, arg = match["kind"], match["arg"]
    fields: dict = {"name": match["name"]} if match["name"] else {}
    if kind in ("embedded", "shuffled-pairs"):
        fields |= {"kind": "embedded", "pairs": "shuffled" if kind == "shuffled-pairs" else "aligned"}
        if arg is not None:
            fields["fraction"] = _fraction(arg, spec)
    elif kind in ("label-only", "hypothesis-copy"):
        if arg is not None:
            raise ConfigError(f"generator {spec!r}: {kind} takes no argument")
        fields["kind"] = kind
    elif kind == "gemini":
        fields |= {"kind": kind, **({"model": arg} if arg else {})}
    elif kind in ("hf-seq2seq", "hf-causal"):
        if not arg:
            raise ConfigError(f"generator {spec!r}: {kind} needs a model name or path ({kind}:MODEL)")
        fields |= {"kind": kind, "model": arg}
    else:
        raise ConfigError(f"generator {spec!r}: unknown kind {kind!r}; {_SPEC_HELP}")
    return fields


def as_generator_fields(items: list) -> list:
    """Generator entries with every spec string replaced by its config's fields (mappings and configs kept)."""
    return [parse_generator_spec(item) if isinstance(item, str) else item for item in items]


_CONFIGS = TypeAdapter(list[GeneratorConfig])


def generator_configs(items: list) -> list:
    """Validated generator configs from specs, mappings or configs; a ConfigError names the first bad one, and
    two generators may not share a name."""
    try:
        configs = _CONFIGS.validate_python(as_generator_fields(list(items)))
    except ValidationError as exc:
        raise ConfigError(f"generators: {exc}") from None
    check_distinct_names(configs)
    return configs


def check_distinct_names(configs: list) -> None:
    """At least one generator, no two with the same name (each is one source of the file)."""
    if not configs:
        raise ConfigError("no generator given; name at least one (e.g. --generators embedded:1,label-only)")
    names = [c.name for c in configs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"generators share the source name(s) {repeated}; give each its own with NAME=SPEC")


def default_generators() -> list:
    """The default offline generators (DEFAULT_GENERATOR_SPECS), in their expected order of quality."""
    return generator_configs(list(DEFAULT_GENERATOR_SPECS))
