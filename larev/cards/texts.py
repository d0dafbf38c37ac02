"""The prose of each metric's card, as data: one TOML file per score name in larev/cards/texts/ (`<name>.toml`).

Each file holds the fields of `CardText`. Its figures are never typed: a `{{FILE>KEY>...|FORMAT}}` placeholder reads
each from the committed result it comes from (larev/cards/figures.py), so a card cannot quote a figure its results
no longer hold. Links are relative to docs/metrics/.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from larev.errors import ConfigError

#: where the card texts live (package data)
TEXTS_DIR = Path(__file__).with_name("texts")


@dataclass(frozen=True)
class CardText:
    """The prose of one card. `formula` is the formula alone (shown as code), `source` where it comes from (the
    paper and its equation number); `validated` and `failures` are one line each; `reproduce` adds (command,
    comment) lines to the generated ones; `bench_metrics` is what the generated `larev bench quality` line passes to
    `--metrics`."""

    title: str
    summary: str
    formula: str
    source: str
    terms: tuple[str, ...]
    unit: str
    direction: str
    range: str
    zero: str
    aggregate: str
    validated: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    reproduce: tuple[tuple[str, str], ...] = ()
    bench_metrics: str = ""
    notes: tuple[str, ...] = ()


def read_card_text(path: Path) -> CardText:
    """One card text file; a ConfigError names the file and the field that does not fit."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    known = {f.name for f in fields(CardText)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {unknown}; a card text has {sorted(known)}")
    try:
        values = {k: tuple(tuple(v) if isinstance(v, list) else v for v in raw[k]) if isinstance(raw[k], list)
                  else raw[k] for k in raw}
        return CardText(**values)
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def card_texts(directory: Path = TEXTS_DIR) -> dict[str, CardText]:
    """{score name: its card text} of every `<name>.toml` in `directory`."""
    return {path.stem: read_card_text(path) for path in sorted(directory.glob("*.toml"))}
