"""Progress bars on long work: shown on a terminal, silent in logs and CI (tqdm's auto mode)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tqdm.auto import tqdm


def progress_bar(iterable, *, desc: str, enabled: bool = True, unit: str = "it", **kwargs):
    """tqdm over `iterable`; `enabled=False` hides it, and it hides itself when stderr is not a terminal."""
    return tqdm(iterable, desc=desc, disable=None if enabled else True, leave=False, unit=unit, **kwargs)


@contextmanager
def quiet_weight_loading() -> Iterator[None]:
    """No Hugging Face "Loading weights" / "Writing model shards" bar inside the block (one per model load or
    save clutters every step's output and ignores larev's `progress` option); the library's setting is restored
    afterwards."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
