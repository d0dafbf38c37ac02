"""The antonym chain: backends tried in order, the masked text as the fallback, and the config that picks them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from pydantic import Field

from larev.config import _Config
from larev.llm import Rewritten, TextGenerator, cached_gemini
from larev.methods.leakage_aware.antonyms.distractor import DistractorChoice
from larev.methods.leakage_aware.antonyms.lexicon import RelationLexicon
from larev.methods.leakage_aware.antonyms.llm import GeminiAntonyms
from larev.methods.leakage_aware.antonyms.request import (MASK_FALLBACK, AntonymBackend, AntonymRequest,
                                                         masked_baseline)
from larev.methods.leakage_aware.antonyms.wordnet import WordNetAntonyms

log = logging.getLogger(__name__)


class AntonymChain:
    """Tries its backends in order; when none has a rewrite, the masked text with backend 'fallback:mask' (the
    environments builder then leaves the row without E3).

    Every backend's output is checked to differ from b and only inside the term's span; one that does not is
    logged and skipped.
    """

    def __init__(self, backends: Sequence[AntonymBackend], mask_token: str):
        if not mask_token:
            raise ValueError("mask_token must be non-empty")
        self.backends = list(backends)
        self.mask_token = mask_token

    def rewrite(self, item: AntonymRequest) -> Rewritten:
        b = item.baseline
        for backend in self.backends:
            out = backend.rewrite(item)
            if out is None:
                continue
            ok = (out.text != b and out.text.startswith(b[:item.start]) and out.text.endswith(b[item.end:])
                  and len(out.text) >= item.start + len(b) - item.end)
            if ok:
                return out
            log.warning("antonym backend %s changed id %s outside the term's span; skipped", backend.name, item.id)
        return Rewritten(masked_baseline(b, item.start, item.end, self.mask_token), MASK_FALLBACK)

    def rewrite_all(self, items: Sequence[AntonymRequest], *, max_concurrency: int = 1,
                    progress: bool = False) -> list[Rewritten]:
        """One rewrite per item, in order; with max_concurrency > 1 items run on a thread pool (for LLM calls)."""
        bar: Callable[[Iterator[Rewritten]], Iterable[Rewritten]] = lambda it: it  # noqa: E731
        if progress:
            from tqdm.auto import tqdm

            bar = lambda it: tqdm(it, total=len(items), desc="antonyms", unit="row")  # noqa: E731
        if max_concurrency <= 1 or len(items) <= 1:
            return list(bar(iter(map(self.rewrite, items))))
        pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="antonyms")
        try:
            futures = [pool.submit(self.rewrite, item) for item in items]
            return list(bar(f.result() for f in futures))
        finally:  # on an error, queued items are dropped instead of run
            pool.shutdown(wait=True, cancel_futures=True)


class AntonymConfig(_Config):
    """How the antonym environment E3 is built (thesis sections 4.5.2, 5.3.2, appendix C.2)."""

    backend: Literal["offline", "llm"] = Field(
        "offline", description="offline: lexicon -> distractor -> wordnet -> mask; llm: the appendix C.2 prompt "
                               "first, then the offline chain")
    llm_model: str = Field("gemini-2.5-flash-lite", description="LLM for backend='llm' (the thesis's model)")
    max_concurrency: int = Field(4, ge=1, description="LLM requests in flight at once")
    wordnet_path: str = Field("/usr/share/wordnet", description="directory of the WordNet 3.0 data files")
    seed: int = Field(0, description="seed of the QA distractor choice")


def make_generator(config: AntonymConfig, *, api_key: str | None = None,
                   cache: MutableMapping[str, str] | None = None) -> TextGenerator:
    """Gemini `config.llm_model` at temperature 0, behind a prompt cache (`cache`, e.g. a storage.kv.StoreMapping;
    in-memory when None). The key comes from `api_key`, else GEMINI_API_KEY / GOOGLE_API_KEY."""
    return cached_gemini(config.llm_model, api_key=api_key, cache=cache)


def build_chain(config: AntonymConfig, mask_token: str, *, generator: TextGenerator | None = None) -> AntonymChain:
    """The chain `config.backend` names; 'llm' uses `generator`, else `make_generator(config)`."""
    offline: list[AntonymBackend] = [RelationLexicon(), DistractorChoice(config.seed),
                                     WordNetAntonyms(config.wordnet_path)]
    if config.backend == "llm":
        return AntonymChain([GeminiAntonyms(generator or make_generator(config)), *offline], mask_token)
    return AntonymChain(offline, mask_token)
