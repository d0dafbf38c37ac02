"""Figures quoted in prose, read from the committed results they come from: a page's source holds a placeholder,
never the number, so the page cannot go stale when the results move.

    {{validity/nli-report.json>scorers>larev>variant_order/borrowed>value|.2f}}   -> 0.51
    {{validity/nli-report.json>scorers>larev>acceptability_auroc/snli_acceptability|cell}} -> 0.598 [0.571, 0.623] ✓

The path before the first `>` is a JSON file under the docs directory; each `>` steps into a key (keys may hold `/`
and `.`); after `|` the format: a Python format spec (`.2f`, `.3f`, `+.3f`, `d`), `cell` (a results cell as
larev/validity/report.py writes it: value [low, high] and its mark), `interval` ([low, high]), `count` (how many
items a list holds: a decision's better or worse criteria) or nothing (the value as it is). `typed_figures` finds
the numbers a prose text types itself (outside placeholders, code spans and equation, table and section numbers):
tests/test_cards.py keeps them out of the card texts.

A page people read as it is (README.md, docs/results.md) keeps its figures in place between markers that name
where each comes from, invisible once rendered:

    <!--fig validity/nli-report.json>scorers>larev>acceptability_auroc/snli_acceptability|cell-->0.598 [...]<!--/fig-->

`render_marked` rewrites every marked figure from its result (`larev show --write-figures`), `stale_marked` lists
the ones that differ: tests/test_docs.py fails on any, so a figure typed over or left behind by new results shows.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from larev.errors import ConfigError

PLACEHOLDER = re.compile(r"\{\{([^{}|>]+)((?:>[^{}|>]+)+)(?:\|([^{}]*))?\}\}")
# a decimal number in prose; equation, table and section numbers are not figures
_DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.]*\d)")
_NOT_A_FIGURE = re.compile(r"(eq\.|eqs\.|equation|table|section|thesis|sections?)\s*$", re.IGNORECASE)


@lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_json(path: Path) -> Any:
    """A committed result file, read once per version of it."""
    return _load(str(path), path.stat().st_mtime_ns)


def figure(docs: Path, placeholder: str) -> str:
    """The text one placeholder (without its braces, as PLACEHOLDER matches it) renders to."""
    match = PLACEHOLDER.fullmatch("{{" + placeholder + "}}")
    if match is None:
        raise ConfigError(f"not a figure placeholder: {{{{{placeholder}}}}}")
    return _render(docs, match)


def _render(docs: Path, match: re.Match) -> str:
    from larev.validity.report import cell_text

    file, keys, spec = match.group(1).strip(), match.group(2)[1:].split(">"), (match.group(3) or "").strip()
    path = docs / file
    if not path.is_file():
        raise ConfigError(f"figure {match.group(0)}: no committed result {path}")
    value: Any = read_json(path)
    for n, key in enumerate(keys):
        key = key.strip()
        if isinstance(value, list) and key.lstrip("-").isdigit():
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise ConfigError(f"figure {match.group(0)}: {file} has no {'>'.join(keys[:n + 1])}")
    if spec == "cell":
        return cell_text(value)
    if spec == "interval":
        return f"[{value['low']:.3f}, {value['high']:.3f}]"
    if spec == "count":
        if not isinstance(value, list):
            raise ConfigError(f"figure {match.group(0)}: |count counts a list, {'>'.join(keys)} is not one")
        return str(len(value))
    if value is None:
        return "n/a"
    return format(value, spec) if spec else str(value)


def render_figures(text: str, docs: Path) -> str:
    """`text` with every placeholder replaced by its figure read from the results under `docs`."""
    return PLACEHOLDER.sub(lambda m: _render(docs, m), text)


MARKED = re.compile(r"<!--fig ([^>]*?(?:>[^>]*?)*?)-->(.*?)<!--/fig-->", re.DOTALL)


def render_marked(text: str, docs: Path) -> str:
    """`text` with the figure between each pair of markers rewritten from the result the marker names."""
    return MARKED.sub(lambda m: f"<!--fig {m.group(1)}-->{figure(docs, m.group(1))}<!--/fig-->", text)


def stale_marked(text: str, docs: Path) -> list[tuple[str, str, str]]:
    """(the marker's spec, the figure shown, the figure its result gives) of every marked figure that differs."""
    return [(m.group(1), m.group(2), expected) for m in MARKED.finditer(text)
            if (expected := figure(docs, m.group(1))) != m.group(2)]


def placeholders(text: str) -> list[str]:
    """Every placeholder of `text`, without braces."""
    return [m.group(0)[2:-2] for m in PLACEHOLDER.finditer(text)]


def typed_figures(text: str) -> list[str]:
    """The decimal numbers `text` types itself: outside placeholders and code spans, and not an equation, table
    or section number."""
    prose = re.sub(r"`[^`]*`", "``", PLACEHOLDER.sub("{{}}", text))
    return [m.group(0) for m in _DECIMAL.finditer(prose) if not _NOT_A_FIGURE.search(prose[:m.start()])]
