"""The Gemini client against a local loopback server speaking the generateContent wire format."""

from __future__ import annotations

import logging

import pytest

from larev.errors import ConfigError
from larev.llm import (CachedGenerator, GeminiGenerator, GenerationError, Rewritten, as_data, model_name,
                       single_line)
from tests.fake_gemini import KEY, gemini  # noqa: F401  (the loopback server fixture)


def test_generate_sends_prompt_model_key_and_temperature(gemini):
    gemini.replies.append((200, "A paraphrase.", 0.0))
    assert gemini.client().generate("Say it again.") == "A paraphrase."
    (request,) = gemini.requests
    assert request["model"] == "gemini-test" and request["key"] == KEY
    assert request["body"]["contents"][0]["parts"][0]["text"] == "Say it again."
    assert request["body"]["generationConfig"]["temperature"] == 0.0


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_errors_are_retried_with_backoff(gemini, status, caplog):
    gemini.replies += [(status, None, 0.0), (status, None, 0.0), (200, "done", 0.0)]
    sleeps: list[float] = []
    with caplog.at_level(logging.DEBUG):
        assert gemini.client(sleep=sleeps.append, backoff_s=1.0).generate("p") == "done"
    assert len(gemini.requests) == 3
    assert 1.0 <= sleeps[0] <= 1.5 and 2.0 <= sleeps[1] <= 3.0  # exponential, plus up to 50% jitter
    assert KEY not in caplog.text


def test_client_timeouts_are_retried(gemini):
    gemini.replies += [(200, "late", 2.0), (200, "on time", 0.0)]
    assert gemini.client(timeout_s=0.3).generate("p") == "on time"


def test_gives_up_after_max_retries_without_leaking_the_key(gemini):
    gemini.replies += [(429, None, 0.0)] * 3
    with pytest.raises(GenerationError, match="gave up after 3 attempts") as err:
        gemini.client(max_retries=2).generate("p")
    assert len(gemini.requests) == 3
    assert KEY not in str(err.value)


def test_client_errors_are_not_retried(gemini):
    gemini.replies.append((400, None, 0.0))
    with pytest.raises(GenerationError, match="HTTP 400") as err:
        gemini.client().generate("p")
    assert len(gemini.requests) == 1 and KEY not in str(err.value)


def test_key_from_environment(gemini, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "env-key")
    assert gemini.client(api_key=None).generate("p") == "ok"
    assert gemini.requests[0]["key"] == "env-key"


def test_missing_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
        GeminiGenerator()


def test_repr_hides_the_key(gemini):
    assert KEY not in repr(gemini.client())


def test_cache_prevents_repeated_requests(gemini):
    gemini.replies += [(200, "first", 0.0), (200, "second", 0.0)]
    cache: dict[str, str] = {}
    cached = CachedGenerator(gemini.client(), cache)
    assert cached.generate("p") == "first"
    assert cached.generate("p") == "first"
    assert len(gemini.requests) == 1 and (cached.hits, cached.misses) == (1, 1)
    assert CachedGenerator(gemini.client(), cache).generate("p") == "first"  # a rerun with the same store
    assert cached.generate("q") == "second" and len(gemini.requests) == 2
    assert cached.model == "gemini-test" and model_name(cached) == "gemini-test"


def test_cache_key_includes_the_model():
    class Echo:
        def __init__(self, model: str):
            self.model = model

        def generate(self, prompt: str) -> str:
            return f"{self.model}:{prompt}"

    cache: dict[str, str] = {}
    assert CachedGenerator(Echo("a"), cache).generate("p") == "a:p"
    assert CachedGenerator(Echo("b"), cache).generate("p") == "b:p"
    assert len(cache) == 2


def test_helpers():
    assert single_line('  "One line."  ') == "One line."
    assert single_line("two\nlines") is None and single_line("  ") is None and single_line(None) is None
    assert as_data("x </text> y <TEXT>") == "x (/text) y (TEXT)"
    assert Rewritten("t", "offline").backend == "offline"
    assert model_name(object()) == "object"
