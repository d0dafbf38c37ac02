"""Rationale files of any size, read and validated in batches: memory bounded by the batch, not the file.

`iter_rationale_batches` reads a Parquet file by record batches, a JSON-lines or CSV file line by line, and
validates each batch against the data contract (larev/schema.py `validate_rationales`). An error names the row
in the whole file, not in its batch. A duplicate (id, source) pair across batches is caught too: each row's key
is kept as a 64-bit hash (8 bytes a row), checked once the file has been read, and confirmed on the exact
values before it is reported (a hash collision is not an error).

A `.json` file holding one JSON array cannot be read in pieces: it is read whole (use JSON lines for big files).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from larev.data.files import SUFFIXES, _rename, decode_utf8, read_table, records_frame
from larev.errors import InputError
from larev.schema import validate_rationales


def iter_rationale_batches(path: str | Path, examples: pl.DataFrame, *, batch_rows: int,
                           column_map: dict[str, str] | None = None) -> Iterator[pl.DataFrame]:
    """Validated rationale rows (id, source, rationale, label) of `path`, `batch_rows` rows at a time, in file
    order. The duplicate-key check across batches runs when the last batch has been read: consume the whole
    iterator (as `validate_rationale_file` does) before trusting any batch."""
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    file = str(path)
    hashes: list[np.ndarray] = []
    offset = 0
    for raw in _raw_batches(Path(path), batch_rows):
        batch = _rename(raw, column_map, file=file)
        try:
            valid = validate_rationales(batch, examples, file=file)
        except InputError as e:  # the validator counts rows within the batch
            raise InputError(e.problem, file=e.file, row=None if e.row is None else e.row + offset,
                             column=e.column) from None
        hashes.append(valid.select(pl.struct("id", "source").hash(seed=0)).to_series().to_numpy())
        offset += valid.height
        yield valid
    if offset == 0:
        raise InputError("the file has no rows", file=file)
    _check_keys_unique(path, np.concatenate(hashes), batch_rows, column_map, file)


def validate_rationale_file(path: str | Path, examples: pl.DataFrame, *, batch_rows: int,
                            column_map: dict[str, str] | None = None) -> int:
    """Read and validate the whole file in batches without keeping it; returns its row count."""
    return sum(batch.height for batch in iter_rationale_batches(path, examples, batch_rows=batch_rows,
                                                                column_map=column_map))


def _check_keys_unique(path, hashes: np.ndarray, batch_rows: int, column_map, file: str) -> None:
    values, counts = np.unique(hashes, return_counts=True)
    suspects = set(values[counts > 1].tolist())
    if not suspects:
        return
    rows: dict[tuple[str, str], list[int]] = {}  # second pass over the rows whose hash repeats
    offset = 0
    for raw in _raw_batches(Path(path), batch_rows):
        batch = _rename(raw, column_map, file=file).select(pl.col("id").cast(pl.String), pl.col("source"))
        batch_hashes = batch.select(pl.struct("id", "source").hash(seed=0)).to_series().to_numpy()
        for i in np.flatnonzero(np.isin(batch_hashes, list(suspects))):
            rows.setdefault(batch.row(int(i)), []).append(offset + int(i))
        offset += batch.height
    for (id_, source), where in rows.items():
        if len(where) > 1:
            raise InputError(f"duplicate id={id_!r}, source={source!r} (rows {where[:5]})", file=file,
                             row=where[1], column="id")


# ---- raw batches, by format ----------------------------------------------------------------------------------

def _raw_batches(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    file = str(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES or not path.is_file() or path.stat().st_size == 0:
        read_table(path)  # raises the loader's own error for an unknown type, a missing or an empty file
    if suffix == ".parquet":
        yield from _parquet_batches(path, batch_rows)
    elif suffix == ".csv":
        yield from _csv_batches(path, batch_rows)
    elif _starts_with_array(path):
        whole = read_table(path)
        for start in range(0, whole.height, batch_rows):
            yield whole.slice(start, batch_rows)
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


def _json_line_batches(path: Path, batch_rows: int, file: str) -> Iterator[pl.DataFrame]:
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
            yield records_frame(records, file=file, first_row=row - len(records))
            records = []
    if records:
        yield records_frame(records, file=file, first_row=row - len(records))


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

