"""Generated texts as rows of the canonical rationale table (larev/schema.py: id, source, rationale, label), and the
file they are written to with its provenance beside it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import yaml

from larev.errors import ConfigError
from larev.schema import RATIONALE_SCHEMA

#: The rationale file formats `larev generate --out` writes (every one `larev score --rationales` reads).
OUTPUT_SUFFIXES = (".jsonl", ".csv", ".parquet")
#: The provenance file beside a generated file: `<file>` + this. Not a rationale file's suffix, so an inbox that
#: receives both does not try to score it.
PROVENANCE_SUFFIX = ".provenance.yaml"


def rationale_rows(ids: Sequence[str], labels: Sequence[str], texts: Sequence[str | None],
                   source: str) -> tuple[pl.DataFrame, list[str]]:
    """The rationale table of one source (the rows with a text, in order) and the ids left without one."""
    kept = [(i, t, y) for i, t, y in zip(ids, texts, labels) if t is not None and t.strip()]
    missing = [i for i, t in zip(ids, texts) if t is None or not t.strip()]
    frame = pl.DataFrame({"id": [i for i, _, _ in kept], "source": [source] * len(kept),
                          "rationale": [t for _, t, _ in kept], "label": [y for _, _, y in kept]},
                         schema=RATIONALE_SCHEMA)
    return frame, missing


def check_output_path(path: str | Path) -> Path:
    """`path` when its suffix is one of OUTPUT_SUFFIXES; a ConfigError naming them otherwise."""
    path = Path(path)
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ConfigError(f"--out {path}: unknown rationale file type {path.suffix or '(no suffix)'!r}; use one of "
                          f"{list(OUTPUT_SUFFIXES)}")
    return path


def provenance_path(path: str | Path) -> Path:
    """Where the provenance of the rationale file `path` goes."""
    return Path(f"{path}{PROVENANCE_SUFFIX}")


def _replace_atomically(path: Path, write) -> None:
    """`write(tmp)` to a hidden file beside `path`, then rename it over `path`: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_rationale_file(frame: pl.DataFrame, path: str | Path, provenance: dict) -> tuple[Path, Path]:
    """Write the rationale table to `path` (format by suffix) and `provenance` to its provenance file (YAML);
    returns both paths."""
    path = check_output_path(path)
    writers = {".jsonl": frame.write_ndjson, ".csv": frame.write_csv, ".parquet": frame.write_parquet}
    _replace_atomically(path, writers[path.suffix.lower()])
    record = provenance_path(path)
    _replace_atomically(record, lambda tmp: tmp.write_text(yaml.safe_dump(provenance, sort_keys=False,
                                                                          allow_unicode=True)))
    return path, record
