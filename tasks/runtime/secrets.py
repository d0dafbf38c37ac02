"""API keys for the LLM backends: from the environment, else a Prefect Secret block. Never logged or stored."""

from __future__ import annotations

import os

GEMINI_SECRET_BLOCK = "gemini-api-key"


def gemini_api_key() -> str | None:
    """GEMINI_API_KEY / GOOGLE_API_KEY, else the Prefect Secret block `gemini-api-key`, else None (the client
    then raises a ConfigError saying which variable to set)."""
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        from prefect.blocks.system import Secret

        return Secret.load(GEMINI_SECRET_BLOCK).get()
    except Exception:  # no such block, or no API to ask
        return None


def gemini_options(store) -> dict:
    """Keyword arguments of larev's Gemini factories (`larev.llm.cached_gemini` and the configs' factories): the
    API key, and the prompt cache every LLM step shares in the artifact store (`<root>/llm-cache`)."""
    from storage.kv import StoreMapping

    return {"api_key": gemini_api_key(), "cache": StoreMapping(store, "llm-cache")}
