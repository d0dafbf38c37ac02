"""Text generation clients shared by every model-backed rewriter: Gemini, a prompt cache, local HF seq2seq and
causal models.

A client is anything with `generate(prompt) -> str` (`TextGenerator`); clients name their model in a `model`
attribute, which goes into cache keys and provenance strings. Also here: `Rewritten` (a generated text with its
provenance) and the prompt/reply helpers `as_data` and `single_line`. Heavy imports (google.genai,
transformers, torch) happen inside the classes, so importing this module is cheap.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from larev.errors import ConfigError, LarevError
from larev.progress import quiet_weight_loading

T = TypeVar("T")

log = logging.getLogger(__name__)

API_KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_RETRYABLE_CODES = frozenset({408, 429})  # plus every 5xx


@runtime_checkable
class TextGenerator(Protocol):
    """Turns one prompt into one completion.

    Implementations should also expose `model: str` naming the model (see `model_name`).
    """

    def generate(self, prompt: str) -> str: ...


def model_name(generator: object) -> str:
    """The model a generator uses (its `model` attribute), else its class name; used in cache keys/provenance."""
    name = getattr(generator, "model", None)
    return name if isinstance(name, str) and name else type(generator).__name__


@dataclass(frozen=True)
class Rewritten:
    """A generated text and the backend that produced it (provenance such as 'offline' or 'llm:<model>')."""

    text: str
    backend: str


def single_line(raw: str | None) -> str | None:
    """A model's reply as one clean line, or None when it is empty or spans several lines.

    Strips surrounding whitespace and one pair of wrapping quotes or backticks.
    """
    if raw is None:
        return None
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1].strip()
    if not text or "\n" in text or "\r" in text:
        return None
    return re.sub(r"\s+", " ", text)


def as_data(text: str, tag: str = "text") -> str:
    """Text safe to place between <tag> and </tag> in a prompt: tag-like sequences inside it are defused."""
    return re.sub(rf"<\s*/?\s*{re.escape(tag)}\s*>", lambda m: m.group(0).replace("<", "(").replace(">", ")"),
                  text, flags=re.IGNORECASE)


def describe_failure(exc: BaseException | None) -> str:
    """A failed request's error on one line, with any API key from the environment redacted."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for variable in API_KEY_VARIABLES:
        key = os.environ.get(variable)
        if key:
            text = text.replace(key, "<redacted>")
    return text



class GenerationError(LarevError):
    """A generation request that failed for good (after retries for transient errors)."""


class GeminiGenerator:
    """Gemini through the Google Gen AI SDK, with retries on rate limits, server errors and timeouts.

    The API key comes from `api_key`, else the GEMINI_API_KEY or GOOGLE_API_KEY environment variable.
    Transient failures (HTTP 408, 429, 5xx, client timeouts) are retried `max_retries` times with exponential
    backoff plus jitter; any other error is raised at once as `GenerationError`. The key never appears in
    messages or logs.
    """

    def __init__(self, model: str = "gemini-2.5-flash-lite", api_key: str | None = None, temperature: float = 0.0,
                 base_url: str | None = None, max_retries: int = 4, timeout_s: float = 60,
                 backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        key = api_key or next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)
        if not key:
            raise ConfigError(f"no Gemini API key for model {model!r}: set the GEMINI_API_KEY environment variable "
                              "(GOOGLE_API_KEY also works) or pass api_key")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
        from google import genai
        from google.genai import types

        self.model = model
        self.temperature = temperature
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._key = key
        self._types = types
        # The SDK does not retry unless told to (retry_options=None); the retries here are the only ones.
        self._client = genai.Client(api_key=key, vertexai=False, http_options=types.HttpOptions(
            base_url=base_url, timeout=int(timeout_s * 1000)))

    def __repr__(self) -> str:
        return f"GeminiGenerator(model={self.model!r}, temperature={self.temperature})"

    def generate(self, prompt: str) -> str:
        """The model's text reply ('' when the reply has no text, e.g. blocked by safety filters)."""
        config = self._types.GenerateContentConfig(temperature=self.temperature)
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                response = self._client.models.generate_content(model=self.model, contents=prompt, config=config)
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised when not transient
                reason = self._transient_reason(exc)
                if reason is None:
                    raise GenerationError(f"Gemini model {self.model!r}: {self._describe(exc)}") from exc
                if attempt + 1 == attempts:
                    raise GenerationError(f"Gemini model {self.model!r}: gave up after {attempts} attempts; "
                                          f"last error: {self._describe(exc)}") from exc
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
                delay += self._rng.uniform(0, delay / 2)
                log.warning("Gemini %s: %s (attempt %d/%d); retrying in %.1fs", self.model, reason, attempt + 1,
                            attempts, delay)
                self._sleep(delay)
                continue
            text = response.text
            if text is None:
                log.warning("Gemini %s returned no text (finish reason %s)", self.model, _finish_reason(response))
            return text or ""
        raise AssertionError("unreachable")

    @staticmethod
    def _transient_reason(exc: BaseException) -> str | None:
        """Why `exc` is worth retrying ('HTTP 429', 'timeout'), or None when it is not."""
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            code = exc.code if isinstance(exc.code, int) else 0
            return f"HTTP {code}" if code in _RETRYABLE_CODES or 500 <= code < 600 else None
        return "timeout" if isinstance(exc, _timeout_types()) else None

    def _describe(self, exc: BaseException) -> str:
        """A one-line description of an error with the API key redacted."""
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            text = f"HTTP {exc.code} {exc.status or ''}: {exc.message or ''}".strip()
        else:
            text = f"{type(exc).__name__}: {exc}"
        return text.replace(self._key, "<redacted>")


def _timeout_types() -> tuple[type[BaseException], ...]:
    """Client-side timeout exceptions of the HTTP libraries the SDK may use."""
    types_: list[type[BaseException]] = [TimeoutError]
    for module in ("httpx", "httpx2"):
        try:
            types_.append(__import__(module).TimeoutException)
        except (ImportError, AttributeError):
            pass
    return tuple(types_)


def _finish_reason(response: Any) -> str:
    try:
        return str(response.candidates[0].finish_reason)
    except (AttributeError, IndexError, TypeError):
        return "unknown"


class CachedGenerator:
    """Wraps a generator so each (model, prompt) is generated once; replies live in `cache`.

    `cache` is any mutable mapping from a sha256 hex key to the reply (a dict, or a persistent store), so a
    rerun over the same prompts never calls the model again.
    """

    def __init__(self, inner: TextGenerator, cache: MutableMapping[str, str]):
        self.inner = inner
        self.cache = cache
        self.model = model_name(inner)
        self.hits = 0
        self.misses = 0

    def key(self, prompt: str) -> str:
        return hashlib.sha256(f"{self.model}\x00{prompt}".encode()).hexdigest()

    def generate(self, prompt: str) -> str:
        key = self.key(prompt)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        reply = self.inner.generate(prompt)
        self.cache[key] = reply
        return reply


def cached_gemini(model: str, *, api_key: str | None = None,
                  cache: MutableMapping[str, str] | None = None) -> CachedGenerator:
    """Gemini `model` at temperature 0 behind a prompt cache (`cache`, e.g. a storage.kv.StoreMapping; in-memory
    when None): what every LLM step of larev calls. The key comes from `api_key`, else GEMINI_API_KEY /
    GOOGLE_API_KEY (GeminiGenerator raises a ConfigError naming them when neither is set)."""
    return CachedGenerator(GeminiGenerator(model, api_key=api_key, temperature=0.0), cache if cache is not None else {})


def _looks_like_path(name: str) -> bool:
    """Whether a model name is meant as a local path (hub ids are 'name' or 'owner/name')."""
    return os.path.exists(name) or name.startswith((".", "/", "~")) or name.count("/") > 1


def load_local_first(model: str, from_pretrained: Callable[[bool], T],
                     load_error: Callable[[Exception], Exception]) -> T:
    """`from_pretrained(local_only)` for a Hugging Face model: a directory or a cached hub copy without network;
    other hub names from the hub (unless HF_HUB_OFFLINE is set), which offline fails only after the hub client's
    retries. Every failure is raised as `load_error(exc)`."""
    if _looks_like_path(model) and not os.path.isdir(os.path.expanduser(model)):
        raise ConfigError(f"no model directory {model!r}: give a directory saved with save_pretrained "
                          "(the Hugging Face hub is not reachable offline)")
    with quiet_weight_loading():
        try:
            return from_pretrained(True)
        except Exception as exc:  # noqa: BLE001 - any loading failure means the same fix
            if _looks_like_path(model) or os.environ.get("HF_HUB_OFFLINE"):
                raise load_error(exc) from exc
            try:
                return from_pretrained(False)
            except Exception as hub_exc:  # noqa: BLE001
                raise load_error(hub_exc) from hub_exc


class HFGenerator:
    """What the local Hugging Face generators share: the model named by `model_name_or_path` (a directory saved with
    `save_pretrained`, or a hub name read from the local HF cache first; downloading is impossible offline;
    safetensors weights only), loaded once on first use on `device`, and deterministic generation in batches of
    `batch_size`. A subclass says how the model and tokenizer load (`KIND`, `_from_pretrained`), how a batch of
    prompts is encoded and decoded (`_encode`, `_replies`) and which `generate` options it passes."""

    KIND = "model"

    def __init__(self, model_name_or_path: str, device: str, batch_size: int, max_new_tokens: int,
                 max_input_tokens: int):
        if batch_size < 1 or max_new_tokens < 1:
            raise ConfigError("batch_size and max_new_tokens must both be >= 1")
        self.model = model_name_or_path
        self.device = device
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.max_input_tokens = max_input_tokens
        self._loaded: tuple[Any, Any, Any] | None = None

    def _from_pretrained(self, local_only: bool) -> tuple[Any, Any]:
        raise NotImplementedError

    def _load_error(self, exc: Exception) -> ConfigError:
        return ConfigError(
            f"cannot load the Hugging Face {self.KIND} {self.model!r} ({type(exc).__name__}: {exc}). The Hugging "
            "Face hub is not reachable offline: give a local directory holding the model (saved with "
            "save_pretrained, safetensors weights) or a name already in the local HF cache")

    def _prepare(self, tokenizer) -> None:
        """Tokenizer settings a subclass needs before its first batch (none by default)."""

    def _load(self) -> tuple[Any, Any, Any]:
        """Load once: a directory or cached hub copy without network; other hub names from the hub (unless
        HF_HUB_OFFLINE is set), which offline fails only after the hub client's retries."""
        if self._loaded is None:
            from larev.device import resolve_device

            tokenizer, model = load_local_first(self.model, self._from_pretrained, self._load_error)
            self._prepare(tokenizer)
            device = resolve_device(self.device)
            model.to(device).eval()
            self._loaded = (tokenizer, model, device)
        return self._loaded

    def _encode(self, tokenizer, prompts: list[str]):
        return tokenizer(prompts, return_tensors="pt", padding=True, truncation=True,
                         max_length=self.max_input_tokens)

    def _generate_options(self, tokenizer) -> dict:
        return {}

    def _replies(self, ids, encoded):
        """The generated token ids that are the reply (all of them for a seq2seq model)."""
        return ids

    def generate_batch(self, prompts: Sequence[str]) -> list[str]:
        """One decoded reply per prompt, in order, in batches of `batch_size`."""
        import torch

        tokenizer, model, device = self._load()
        out: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            enc = self._encode(tokenizer, list(prompts[start:start + self.batch_size])).to(device)
            with torch.no_grad():
                ids = model.generate(**enc, do_sample=False, max_new_tokens=self.max_new_tokens,
                                     **self._generate_options(tokenizer))
            out.extend(t.strip() for t in tokenizer.batch_decode(self._replies(ids, enc), skip_special_tokens=True))
        return out

    def generate(self, prompt: str) -> str:
        return self.generate_batch([prompt])[0]


class HFSeq2SeqGenerator(HFGenerator):
    """A local Hugging Face seq2seq model (T5 family) generating deterministically (greedy or beam search)."""

    KIND = "seq2seq model"

    def __init__(self, model_name_or_path: str, device: str = "auto", batch_size: int = 16, num_beams: int = 4,
                 max_new_tokens: int = 96, max_input_tokens: int = 256):
        if num_beams < 1:
            raise ConfigError("num_beams must be >= 1")
        super().__init__(model_name_or_path, device, batch_size, max_new_tokens, max_input_tokens)
        self.num_beams = num_beams

    def _from_pretrained(self, local_only: bool) -> tuple[Any, Any]:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        return (AutoTokenizer.from_pretrained(self.model, local_files_only=local_only),
                # safetensors weights only: a pickled pytorch_model.bin is refused, never unpickled
                AutoModelForSeq2SeqLM.from_pretrained(self.model, local_files_only=local_only, use_safetensors=True))

    def _generate_options(self, tokenizer) -> dict:
        return {"num_beams": self.num_beams}


class HFCausalGenerator(HFGenerator):
    """A local Hugging Face causal language model (Llama, Qwen, GPT-2 family) generating greedily.

    With `chat_template` and a tokenizer that has one, each prompt is sent as one user turn through it; otherwise
    as plain text. The reply is the text generated after the prompt. Prompts are padded on the left, so every row's
    reply starts at the same position.
    """

    KIND = "causal model"

    def __init__(self, model_name_or_path: str, device: str = "auto", batch_size: int = 8, max_new_tokens: int = 96,
                 max_input_tokens: int = 512, chat_template: bool = True):
        super().__init__(model_name_or_path, device, batch_size, max_new_tokens, max_input_tokens)
        self.chat_template = chat_template

    def _from_pretrained(self, local_only: bool) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return (AutoTokenizer.from_pretrained(self.model, local_files_only=local_only, padding_side="left"),
                AutoModelForCausalLM.from_pretrained(self.model, local_files_only=local_only, use_safetensors=True))

    def _prepare(self, tokenizer) -> None:
        if tokenizer.pad_token_id is None:  # most causal tokenizers have none: pad with the end token
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.truncation_side = "left"  # a long prompt loses its start, never the turn it is answered in

    def uses_chat_template(self) -> bool:
        """Whether prompts go through the tokenizer's chat template (asked for, and the tokenizer has one)."""
        return self.chat_template and bool(getattr(self._load()[0], "chat_template", None))

    def formatted(self, prompt: str) -> str:
        """The text the model reads for `prompt`: one user turn of its chat template, or the prompt itself."""
        tokenizer = self._load()[0]
        if self.uses_chat_template():
            return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                 add_generation_prompt=True)
        return prompt

    def _encode(self, tokenizer, prompts: list[str]):
        return tokenizer([self.formatted(p) for p in prompts], return_tensors="pt", padding=True, truncation=True,
                         max_length=self.max_input_tokens,
                         add_special_tokens=not self.uses_chat_template())  # a template has its own

    def _generate_options(self, tokenizer) -> dict:
        return {"num_beams": 1, "pad_token_id": tokenizer.pad_token_id}

    def _replies(self, ids, encoded):
        return ids[:, encoded["input_ids"].shape[1]:]
