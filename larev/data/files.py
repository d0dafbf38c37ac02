"""Examples and rationales from local files: Parquet, JSON lines (.jsonl / .json) and CSV.

`read_table` turns a file into a frame (format by suffix) and reports every unreadable file as an `InputError`
naming the file and, where it can, the line or row; `load_examples_file` and `load_rationales_file` rename
columns, normalise `choices` and validate against the data contract (larev/schema.py). A rationale file may also be
an lm-evaluation-harness sample log or JSON records with the rationale at a named field, and reasoning traces in
it are read as asked (larev/data/logged.py): `read_rationale_rows` brings every format to the canonical rows.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from pathlib import Path

import polars as pl

from larev.data.logged import FILE_ROW, Format, RationaleReading, detect_format, rows_of_records, rows_of_table
from larev.errors import InputError
from larev.schema import validate_examples, validate_rationales

log = logging.getLogger(__name__)

SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")
JSON_SUFFIXES = (".jsonl", ".json")


# ---- reading ------------------------------------------------------------------------------------------------

def read_table(path: str | Path) -> pl.DataFrame:
    """Read a Parquet, JSON-lines or CSV file (format by suffix) into a frame with at least one row.

    `.json` holds JSON lines like `.jsonl`; a single top-level JSON array of objects is accepted too.
    CSV columns are read as strings (ids like '007' keep their zeros).
    """
    path = readable(path)
    file = str(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = _read_parquet(path)
    elif suffix == ".csv":
        df = _read_csv(decode_utf8(path.read_bytes(), file=file), file=file)
    else:
        records = read_json_records(path)
        df = records_frame(records, file=file) if records else pl.DataFrame()
    if df.height == 0:
        raise InputError("the file has no rows", file=file)
    return df


def readable(path: str | Path) -> Path:
    """`path` when it is a non-empty file of a known type (by suffix); an InputError saying which it is not."""
    path = Path(path)
    file = str(path)
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(f"unknown file type {path.suffix or '(no suffix)'!r}; use one of {list(SUFFIXES)}",
                         file=file)
    if not path.is_file():
        raise InputError("file not found" if not path.exists() else "not a file", file=file)
    if path.stat().st_size == 0:
        raise InputError("the file is empty", file=file)
    return path


def _read_parquet(path: Path) -> pl.DataFrame:
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"not a valid Parquet file ({first_line})", file=str(path)) from None


def decode_utf8(data: bytes, *, file: str, offset: int = 0, line: int = 1) -> str:
    """`data` as UTF-8 text (a byte-order mark is dropped at the start of the file). A bad byte raises an
    InputError naming its byte offset and line in the file; `offset` and `line` say where `data` starts there
    (a piece of a file read line by line)."""
    try:
        return data.decode("utf-8-sig" if offset == 0 else "utf-8")
    except UnicodeDecodeError as e:
        at_line = line + data[:e.start].count(b"\n")
        raise InputError(f"not valid UTF-8: byte 0x{data[e.start]:02x} at byte offset {offset + e.start} (line "
                         f"{at_line}); save the file as UTF-8", file=file) from None


def _read_csv(text: str, *, file: str) -> pl.DataFrame:
    try:
        return pl.read_csv(io.StringIO(text), infer_schema=False)
    except pl.exceptions.PolarsError as e:
        problem = str(e).strip().splitlines()[0]
    # Find the offending row with the csv module so the message can name it.
    rows = csv.reader(io.StringIO(text))
    header = next(rows, [])
    for row_index, row in enumerate(rows):
        if row and len(row) != len(header):
            raise InputError(f"not a valid CSV file: {len(row)} fields where the header has {len(header)}",
                             file=file, row=row_index)
    raise InputError(f"not a valid CSV file ({problem})", file=file)


def read_json_records(path: Path) -> list[dict]:
    """The JSON objects of a `.jsonl` / `.json` file: one per line, or the items of one top-level array."""
    file = str(path)
    return _json_records(decode_utf8(path.read_bytes(), file=file), file=file)


def _json_records(text: str, *, file: str) -> list[dict]:
    stripped = text.lstrip()
    if stripped.startswith("["):  # one JSON array of records
        try:
            records = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}", file=file) from None
        lines = list(enumerate(records))
    else:
        lines = []
        # split on '\n' only: str.splitlines would also split inside strings at U+2028, U+0085 and the like,
        # which JSON writers (polars' write_ndjson, json.dumps(ensure_ascii=False)) leave unescaped
        for line_no, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                lines.append((line_no, json.loads(line)))
            except json.JSONDecodeError as e:
                raise InputError(f"malformed JSON on line {line_no} (column {e.colno}): {e.msg}",
                                 file=file, row=len(lines)) from None
    for row, (where, record) in enumerate(lines):
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, found {type(record).__name__} "
                             f"({'line' if not stripped.startswith('[') else 'item'} {where})", file=file, row=row)
    return [record for _, record in lines]


def records_frame(records: list[dict], *, file: str, first_row: int = 0) -> pl.DataFrame:
    """JSON records as a frame. Records that do not form one raise an InputError naming the first row (counted
    from `first_row`: the records' position in the file) and column where a value's kind changes."""
    try:
        return pl.from_dicts(records, infer_schema_length=None)
    except (pl.exceptions.PolarsError, TypeError, ValueError) as e:
        clash = _first_kind_clash(records, first_row)
        if clash is not None:
            row, column, problem = clash
            raise InputError(f"records do not form a table: {problem}", file=file, row=row, column=column) from None
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"records do not form a table (a column mixes incompatible types?): {first_line}",
                         file=file) from None


def _json_kind(value: object) -> str:
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else "a single value"


def _first_kind_clash(records: list[dict], first_row: int = 0) -> tuple[int, str, str] | None:
    """The first (row, column, problem) where a column holds a list, an object or a single value (string, number,
    boolean) while an earlier row holds another kind; None when every column keeps one kind. Rows are counted
    from `first_row`."""
    seen: dict[str, tuple[int, str]] = {}
    for row, record in enumerate(records, start=first_row):
        for column, value in record.items():
            if value is None:
                continue
            kind = _json_kind(value)
            first_row, first_kind = seen.setdefault(column, (row, kind))
            if kind != first_kind:
                return row, column, f"{kind} where row {first_row} has {first_kind}"
    return None


# ---- shaping ------------------------------------------------------------------------------------------------

def _rename(df: pl.DataFrame, column_map: dict[str, str] | None, *, file: str) -> pl.DataFrame:
    """Rename file columns to canonical ones; a mapped column replaces a same-named column already present."""
    if not column_map:
        return df
    missing = [c for c in column_map if c not in df.columns]
    if missing:
        raise InputError(f"column_map names column(s) {missing} that the file lacks; it has {df.columns}",
                         file=file, column=missing[0])
    targets = list(column_map.values())
    if len(set(targets)) != len(targets):
        raise InputError(f"column_map maps two columns onto the same name: {column_map}", file=file)
    replaced = [t for t in targets if t in df.columns and t not in column_map]
    if replaced:
        log.info("%s: column_map replaces the file's own column(s) %s", file, replaced)
    return df.drop(replaced).rename(column_map)


def _parse_choices(value: str | None, *, file: str, row: int) -> list[str] | None:
    """A choices cell written as text: a JSON list ('["a", "b"]') or '|'-separated ('a|b')."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as e:
            raise InputError(f"choices look like a JSON list but do not parse: {e.msg}", file=file, row=row,
                             column="choices") from None
        if not isinstance(parsed, list) or not all(isinstance(c, str) for c in parsed):
            raise InputError("choices must be a list of strings", file=file, row=row, column="choices")
        return [c.strip() for c in parsed]
    return [c.strip() for c in value.split("|")]


def _normalise_choices(df: pl.DataFrame, *, file: str) -> pl.DataFrame:
    if "choices" not in df.columns or df.schema["choices"] != pl.String:
        return df
    parsed = [_parse_choices(v, file=file, row=i) for i, v in enumerate(df["choices"])]
    return df.with_columns(pl.Series("choices", parsed, dtype=pl.List(pl.String)))


# ---- public loaders -----------------------------------------------------------------------------------------

def conform_examples(df: pl.DataFrame, *, file: str, task: str | None = None, split: str | None = None,
                     require_rationale: bool = True, drop_empty_rationales: bool = False) -> pl.DataFrame:
    """Validate raw example rows (any source) and drop rows without a rationale when asked.

    Row numbers in errors are those of `df`: validation runs before any row is dropped.
    """
    if split is None and "split" not in df.columns:
        raise InputError("there is no 'split' column; pass split='train', 'validation' or 'test'", file=file,
                         column="split")
    df = _normalise_choices(df, file=file)
    out = validate_examples(df, file=file, task=task, default_split=split,
                            require_rationale=require_rationale and not drop_empty_rationales)
    if drop_empty_rationales:
        empty = pl.col("rationale").is_null() | (pl.col("rationale").str.strip_chars().str.len_chars() == 0)
        dropped = out.with_row_index("__row").filter(empty)
        if dropped.height:
            shown = ", ".join(f"row {r} (id {i!r})" for r, i in dropped.select("__row", "id").head(5).iter_rows())
            log.warning("%s: dropped %d of %d rows with an empty rationale: %s%s", file, dropped.height, out.height,
                        shown, ", ..." if dropped.height > 5 else "")
            out = out.filter(~empty)
        if out.height == 0:
            raise InputError("every row has an empty rationale", file=file, column="rationale")
    return out


def load_examples_file(path: str | Path, *, task: str | None = None, column_map: dict[str, str] | None = None,
                       split: str | None = None, require_rationale: bool = True,
                       drop_empty_rationales: bool = False) -> pl.DataFrame:
    """Load examples from a local file into canonical form.

    column_map: file column -> canonical column, e.g. {"sentence1": "premise", "explanation": "rationale"};
        columns outside the contract are ignored (e-SNLI's rationale_2 / rationale_3, say).
    split: fills a missing (or null) split column; a file without a split column needs it.
    drop_empty_rationales: drop rows whose rationale is null or blank (logged with a count) instead of
        failing on the first one; for training data with a few unexplained rows.
    """
    file = str(path)
    df = _rename(read_table(path), column_map, file=file)
    return conform_examples(df, file=file, task=task, split=split, require_rationale=require_rationale,
                            drop_empty_rationales=drop_empty_rationales)


def load_rationales_file(path: str | Path, examples: pl.DataFrame, *, column_map: dict[str, str] | None = None,
                         reading: RationaleReading | None = None) -> pl.DataFrame:
    """Load rationales to score (id, source, rationale, optional label) and check them against `examples`.

    column_map renames a table's columns; reading says how a file in another format (an lm-evaluation-harness
    sample log, JSON records with the rationale at a named field) and reasoning traces are read (logged.py)."""
    rows = read_rationale_rows(path, column_map=column_map, reading=reading)
    return validate_rationale_rows(rows, examples, file=str(path))


def read_rationale_rows(path: str | Path, *, column_map: dict[str, str] | None = None,
                        reading: RationaleReading | None = None) -> pl.DataFrame:
    """A rationale file's rows in the canonical columns, whatever its format, with `file_row` (the row in the file
    each comes from); not yet checked against the data contract. JSON files are read as records, so a log whose
    records do not form a table (lm-eval's `arguments`) is read all the same."""
    path = readable(path)
    if path.suffix.lower() in JSON_SUFFIXES:
        raw: pl.DataFrame | list[dict] = read_json_records(path)
        if not raw:
            raise InputError("the file has no rows", file=str(path))
    else:
        raw = read_table(path)
    return rationale_rows(raw, file=str(path), column_map=column_map, reading=reading)


def rationale_rows(raw: pl.DataFrame | list[dict], *, file: str, column_map: dict[str, str] | None = None,
                   reading: RationaleReading | None = None, first_row: int = 0, found: Format | None = None,
                   docs_read: set | None = None) -> pl.DataFrame:
    """Canonical rows of a file's frame or JSON records (a whole file, or a piece starting at row `first_row`),
    in the format `found` or the one its columns show (logged.detect_format). `docs_read`: the lm-eval documents
    read from the file's earlier pieces (logged.lm_eval_rows)."""
    reading = reading or RationaleReading()
    columns = list(raw[0]) if isinstance(raw, list) else raw.columns
    found = found or detect_format(columns, reading, column_map, file=file)
    if found != "table":
        records = raw if isinstance(raw, list) else raw.to_dicts()
        return rows_of_records(records, found, reading, file=file, first_row=first_row, docs_read=docs_read)
    frame = records_frame(raw, file=file, first_row=first_row) if isinstance(raw, list) else raw
    return rows_of_table(_rename(frame, column_map, file=file), reading, file=file, first_row=first_row)


def validate_rationale_rows(rows: pl.DataFrame, examples: pl.DataFrame, *, file: str) -> pl.DataFrame:
    """`validate_rationales` of rows from `rationale_rows`: an error names the rows of the file (`file_row`)."""
    file_rows = rows[FILE_ROW].to_list()
    try:
        return validate_rationales(rows.drop(FILE_ROW), examples, file=file)
    except InputError as e:
        if e.row is None or not 0 <= e.row < len(file_rows):
            raise
        raise InputError(_rows_in_file(e.problem, file_rows), file=e.file, row=file_rows[e.row],
                         column=e.column) from None


def _rows_in_file(problem: str, file_rows: list[int]) -> str:
    """A validation problem with the rows it lists ('(rows [0, 2])', the duplicate check's) as rows of the file."""
    return re.sub(r"\(rows \[([\d, ]+)\]\)",
                  lambda m: f"(rows {[file_rows[int(i)] for i in m.group(1).split(', ')]})", problem)
