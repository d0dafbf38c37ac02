"""Metric cards, the pure part: Markdown pieces built from a metric's declarations (its options model, the presets
that fill its unset settings) and the checks a card's links must pass. tasks/cards.py holds the cards' texts and
builds each card from the registry's Metric objects; no Prefect, no models here.

    option_rows(LarevConfig())  -> every setting of the section by its dotted path, with default and description
    table(header, rows)         -> a Markdown table whose cells are escaped (a '|' in a description stays in it)
    heading_anchors(markdown)   -> the anchors GitHub gives the headings of a Markdown file, in order
    relative_links(markdown)    -> (path, anchor) of every link to a file of the repository
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from larev.presets import DERIVED, UNSET, load_presets


def cell(text: Any) -> str:
    """`text` on one line, fit for a Markdown table cell: whitespace collapsed, '|' escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: str) -> str:
    """`text` as inline code, with a fence of backticks longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table, one line per row, every cell passed through `cell`."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def format_value(value: Any) -> str:
    """A setting's value as `--set` and a `--params` file write it: JSON, strings without their quotes."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class OptionRow:
    """One field of an options section: `path` dotted inside the section; `section` True for a nested model (its
    settings follow it), else `default` is the field's value in the section's defaults."""

    path: str
    description: str
    section: bool
    default: Any = None


def option_rows(options: BaseModel, prefix: str = "") -> list[OptionRow]:
    """Every field of `options` (an options model with its defaults) in declaration order, nested models walked:
    the nested model's own row, then its fields under `<name>.`. Defaults are read from the instance, so a nested
    model built by a default factory (`TrainConfig(epochs=3)`) shows its own values."""
    rows: list[OptionRow] = []
    for name, field in type(options).model_fields.items():
        value = getattr(options, name)
        path = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            rows.append(OptionRow(path, field.description or "", True))
            rows += option_rows(value, prefix=f"{path}.")
        else:
            rows.append(OptionRow(path, field.description or "", False, value))
    return rows


def filled_by(setting: str) -> list[str]:
    """What fills `setting` (a full parameter path) when it is left unset: the names of the presets that set it
    (larev/presets.toml, in file order), then `=PATH` for the setting it copies (`larev.presets.DERIVED`)."""
    out = [p.name for p in load_presets() if setting in p.settings]
    for target, source in DERIVED:
        leaf = target.split(".")[-1]
        if target == setting or (target.startswith("*.") and setting.split(".")[-1] == leaf and setting != source):
            out.append(f"={source}")
    return out


def default_text(section: str, row: OptionRow) -> str:
    """The default column of an option row: the value, and for an unset one (None, 'auto') what fills it."""
    shown = code(format_value(row.default))
    if row.default in UNSET and (fillers := filled_by(f"{section}.{row.path}")):
        return f"{shown}: {', '.join(code(f) for f in fillers)}"
    return shown


# ---- links ----------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def heading_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's text (before duplicates are numbered): lower case, every character but
    letters, digits, '_', '-' and spaces dropped (backticks, dots, colons, apostrophes, brackets), spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def heading_anchors(markdown: str) -> list[str]:
    """The anchors of every heading of `markdown`, in order, as GitHub numbers them: a repeated slug gets -1, -2, ...
    Lines inside fenced code blocks are not headings (a `# comment` in a bash block)."""
    anchors: list[str] = []
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            slug = heading_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.append(slug if count == 0 else f"{slug}-{count}")
    return anchors


def relative_links(markdown: str) -> list[tuple[str, str]]:
    """(path, anchor) of every inline link of `markdown` outside code that points into the repository (no scheme):
    `[x](../defaults.md#larev)` gives ('../defaults.md', 'larev'); a link within the page has path ''."""
    out = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, anchor = target.partition("#")
            out.append((path, anchor))
    return out
