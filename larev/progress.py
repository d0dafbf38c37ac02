"""Progress bars on long work: shown on a terminal, silent in logs and CI (tqdm's auto mode)."""

from __future__ import annotations

from tqdm.auto import tqdm


def progress_bar(iterable, *, desc: str, enabled: bool = True, unit: str = "it", **kwargs):
    """tqdm over `iterable`; `enabled=False` hides it, and it hides itself when stderr is not a terminal."""
    return tqdm(iterable, desc=desc, disable=None if enabled else True, leave=False, unit=unit, **kwargs)
