"""Rationale files of any size, read and validated in batches: memory bounded by the batch, not the file.

`iter_rationale_batches` reads a Parquet file by record batches, a JSON-lines or CSV file line by line, brings
each batch to the canonical rows (larev/data/files.py `rationale_rows`: any format larev/data/logged.py reads,
detected once from the first batch) and validates it against the data contract (larev/schema.py
`validate_rationales`). An error names the row in the whole file, not in its batch. A duplicate (id, source) pair
across batches is caught too: each row's key is kept as a 64-bit hash (8 bytes a row), checked once the file has
been read, and confirmed on the exact values before it is reported (a hash collision is not an error).

A `.json` file holding one JSON array cannot be read in pieces: it is read whole (use JSON lines for big files).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from larev.data.files import decode_utf8, rationale_rows, read_json_records, readable, validate_rationale_rows
from larev.data.logged import FILE_ROW, Format, RationaleReading, detect_format
from larev.errors import InputError


def iter_rationale_batches(path: str | Path, examples: pl.DataFrame, *, batch_rows: int,
                           column_map: dict[str, str] | None = None,
                           reading: RationaleReading | None = None) -> Iterator[pl.DataFrame]:
    """Validated rationale rows (id, source, rationale, label) of `path`, read `batch_rows` rows of the file at a
    time, in file order. The duplicate-key check across batches runs when the last batch has been read: consume
    the whole iterator (as `validate_rationale_file` does) before trusting any batch."""
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    file = str(path)
    hashes: list[np.ndarray] = []
    rows_read = 0
    for batch in _row_batches(Path(path), batch_rows, column_map, reading):
        if batch.height == 0:  # every record of the batch repeats a document read before
            continue
        valid = validate_rationale_rows(batch, examples, file=file)
        hashes.append(valid.select(pl.struct("id", "source").hash(seed=0)).to_series().to_numpy())
        rows_read += valid.height
        yield valid
    if rows_read == 0:
        raise InputError("the file has no rows", file=file)
    _check_keys_unique(path, np.concatenate(hashes), batch_rows, column_map, reading, file)


def validate_rationale_file(path: str | Path, examples: pl.DataFrame, *, batch_rows: int,
                            column_map: dict[str, str] | None = None,
                            reading: RationaleReading | None = None) -> int:
    """Read and validate the whole file in batches without keeping it; returns its row count."""
    return sum(batch.height for batch in iter_rationale_batches(path, examples, batch_rows=batch_rows,
                                                                column_map=column_map, reading=reading))


def _check_keys_unique(path, hashes: np.ndarray, batch_rows: int, column_map, reading, file: str) -> None:
    values, counts = np.unique(hashes, return_counts=True)
    suspects = set(values[counts > 1].tolist())
    if not suspects:
        return
    rows: dict[tuple[str, str], list[int]] = {}  # second pass over the rows whose hash repeats
    for batch in _row_batches(Path(path), batch_rows, column_map, reading):
        batch = batch.select(pl.col("id").cast(pl.String), pl.col("source"), FILE_ROW)
        batch_hashes = batch.select(pl.struct("id", "source").hash(seed=0)).to_series().to_numpy()
        for i in np.flatnonzero(np.isin(batch_hashes, list(suspects))):
            id_, source, file_row = batch.row(int(i))
            rows.setdefault((id_, source), []).append(file_row)
    for (id_, source), where in rows.items():
        if len(where) > 1:
            raise InputError(f"duplicate id={id_!r}, source={source!r} (rows {where[:5]})", file=file,
                             row=where[1], column="id")


def _row_batches(path: Path, batch_rows: int, column_map: dict[str, str] | None,
                 reading: RationaleReading | None) -> Iterator[pl.DataFrame]:
    """Canonical rows (with `file_row`) of each batch of the file, every batch read in the format of the first (an
    lm-eval document repeated in a later batch under another filter is read once, as from the whole file)."""
    reading = reading or RationaleReading()
    found: Format | None = None
    first_row, docs_read = 0, set()
    for raw in _raw_batches(path, batch_rows):
        columns = list(raw[0]) if isinstance(raw, list) else raw.columns
        found = found or detect_format(columns, reading, column_map, file=str(path))
        yield rationale_rows(raw, file=str(path), column_map=column_map, reading=reading, first_row=first_row,
                             found=found, docs_read=docs_read)
        first_row += len(raw) if isinstance(raw, list) else raw.height


# ---- raw batches, by format ----------------------------------------------------------------------------------

def _raw_batches(path: Path, batch_rows: int) -> Iterator[pl.DataFrame | list[dict]]:
    """The file `batch_rows` rows at a time: frames of a Parquet or CSV file, JSON records of a JSON file."""
    file = str(path)
    suffix = path.suffix.lower()
    readable(path)  # the loader's own error for an unknown type, a missing or an empty file
    if suffix == ".parquet":
        yield from _parquet_batches(path, batch_rows)
    elif suffix == ".csv":
        yield from _csv_batches(path, batch_rows)
    elif _starts_with_array(path):
        whole = read_json_records(path)
        for start in range(0, len(whole), batch_rows):
            yield whole[start:start + batch_rows]
    else:
        yield from _json_line_batches(path, batch_rows, file)


def _parquet_batches(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"not a valid Parquet file ({first_line})", file=str(path)) from None
    for record_batch in reader.iter_batches(batch_size=batch_rows):
        yield pl.from_arrow(record_batch)


def _starts_with_array(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def _lines(path: Path, file: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of every line, decoded as UTF-8; a bad byte names its offset and line."""
    offset = 0
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            yield line_no, decode_utf8(raw, file=file, offset=offset, line=line_no)
            offset += len(raw)


def _json_line_batches(path: Path, batch_rows: int, file: str) -> Iterator[list[dict]]:
    records: list[dict] = []
    row = 0
    for line_no, line in _lines(path, file):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON on line {line_no} (column {e.colno}): {e.msg}", file=file,
                             row=row) from None
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, found {type(record).__name__} (line {line_no})", file=file,
                             row=row)
        records.append(record)
        row += 1
        if len(records) == batch_rows:
            yield records
            records = []
    if records:
        yield records


def _csv_batches(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    file = str(path)
    reader = csv.reader(_text_lines(path, file))
    header = next(reader, None)
    if not header:
        raise InputError("the file is empty", file=file)
    rows: list[list[str]] = []
    row_index = 0
    for fields in reader:
        if not fields:
            continue
        if len(fields) != len(header):
            raise InputError(f"not a valid CSV file: {len(fields)} fields where the header has {len(header)}",
                             file=file, row=row_index)
        rows.append([f if f != "" else None for f in fields])  # as the whole-file reader: empty field = null
        row_index += 1
        if len(rows) == batch_rows:
            yield pl.DataFrame(rows, schema=header, orient="row")
            rows = []
    if rows:
        yield pl.DataFrame(rows, schema=header, orient="row")


def _text_lines(path: Path, file: str) -> Iterator[str]:
    for _, line in _lines(path, file):
        yield line

