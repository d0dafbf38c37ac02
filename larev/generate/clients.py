"""The model-backed generators over the thesis's C.3 prompt (larev/generate/prompt.py): Gemini, a Hugging Face
seq2seq model, a Hugging Face causal model. The clients themselves are larev/llm.py's."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

from larev.generate.config import GeminiGeneratorConfig, HFCausalGeneratorConfig, HFSeq2SeqGeneratorConfig
from larev.generate.prompt import clean_reply
from larev.llm import (CachedGenerator, GeminiGenerator, GenerationError, HFCausalGenerator, HFSeq2SeqGenerator,
                       TextGenerator)
from larev.progress import progress_bar

PromptedConfig = GeminiGeneratorConfig | HFSeq2SeqGeneratorConfig | HFCausalGeneratorConfig


def prompted_client(config: PromptedConfig, *, api_key: str | None = None,
                    cache: MutableMapping[str, str] | None = None, device: str = "auto") -> TextGenerator:
    """The client of a prompted generator. Gemini (temperature 0) answers through the prompt cache `cache`
    (in-memory when None); its key is `api_key`, else GEMINI_API_KEY / GOOGLE_API_KEY (a ConfigError naming them
    when there is none). The Hugging Face models load on first use, on `device`."""
    if isinstance(config, GeminiGeneratorConfig):
        client = GeminiGenerator(config.model, api_key=api_key, temperature=0.0, max_retries=config.max_retries,
                                 timeout_s=config.timeout_s, backoff_s=config.backoff_s)
        return CachedGenerator(client, cache if cache is not None else {})
    if isinstance(config, HFSeq2SeqGeneratorConfig):
        return HFSeq2SeqGenerator(config.model, device=device, batch_size=config.batch_size,
                                  num_beams=config.num_beams, max_new_tokens=config.max_new_tokens,
                                  max_input_tokens=config.max_input_tokens)
    return HFCausalGenerator(config.model, device=device, batch_size=config.batch_size,
                             max_new_tokens=config.max_new_tokens, max_input_tokens=config.max_input_tokens,
                             chat_template=config.chat_template)


def generate_prompted(client: TextGenerator, prompts: Sequence[str], ids: Sequence[str], *, name: str,
                      batch_size: int = 1, progress: bool = False) -> list[str | None]:
    """One cleaned reply per prompt (None where the reply was empty). A client with `generate_batch` (the HF
    models) is called `batch_size` prompts at a time, any other one prompt at a time; a request that fails for
    good (after the client's retries) raises a GenerationError naming the generator and the example."""
    replies: list[str] = []
    batched = getattr(client, "generate_batch", None)
    if batched is not None:
        starts = range(0, len(prompts), batch_size)
        for start in progress_bar(starts, desc=f"generate[{name}]", enabled=progress, unit="batch"):
            replies.extend(batched(list(prompts[start:start + batch_size])))
    else:
        for example, prompt in progress_bar(list(zip(ids, prompts)), desc=f"generate[{name}]", enabled=progress,
                                            unit="example"):
            try:
                replies.append(client.generate(prompt))
            except GenerationError as exc:
                raise GenerationError(f"generator {name!r}, example {example!r}: {exc}") from exc
    return [clean_reply(r) for r in replies]
