"""Rationales as people log them, read into the canonical rationale rows (id, source, rationale[, label]).

Three formats, told apart by a file's column names (a JSON file: its first record's keys), `detect_format`:

  table    the data contract itself: columns id, source, rationale[, label] (after column_map)
  lm_eval  a sample log of lm-evaluation-harness (`lm_eval ... --log_samples` writes one per task,
           samples_<task>_<timestamp>.jsonl): records with doc_id, doc (the dataset record) and resps
  fields   JSON records of any shape, the rationale at `RationaleReading.rationale_field` (a dotted path)

Reasoning traces, in every format: text between <think> and </think> is the model's reasoning, not its rationale.
`RationaleReading.think` says what is scored: `strip` (the text with its traces removed; the default), `trace`
(the traces alone) or `both` (the text as SOURCE and its traces as SOURCE:think). `split_reasoning` reads the
tags; a text without them is left exactly as written.

The rows come back with one more column, `file_row`: the row of the file each one comes from (an lm-eval log
repeats a document once per filter, and `both` makes two rows of one), so an error names the row in the file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import Field

from larev.config import _Config
from larev.errors import InputError

log = logging.getLogger(__name__)

Format = Literal["table", "lm_eval", "fields"]
Think = Literal["strip", "trace", "both"]

FILE_ROW = "file_row"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TRACE_SUFFIX = ":think"
DEFAULT_ID_FIELD = "id"

# The fields a sample record of lm-evaluation-harness carries, as its evaluator builds them when samples are logged
# and its evaluation tracker writes them (one JSON line per document and filter, in samples_<task>_<date>.jsonl,
# <date> an ISO time with '-' for ':'): doc_id, doc, target, arguments, resps (per request, the model's generations),
# filtered_resps (per request, the response after the task's filters: for a chain-of-thought task, the extracted
# answer), doc_hash, prompt_hash, target_hash, filter, metrics and each metric's value.
LM_EVAL_KEYS = ("doc_id", "doc", "resps")
_LM_EVAL_NAME = re.compile(r"^samples_(?P<task>.+)_\d{4}-\d{2}-\d{2}T[0-9.\-]+$")
_PATH = r"^[^.\s]+(\.[^.\s]+)*$"
_FORMAT_NAMES = {"lm_eval": "an lm-evaluation-harness sample log", "fields": "JSON records with --rationale-field"}


class RationaleReading(_Config):
    """How a rationale file is read when it is not a table of the canonical columns, and what of a reasoning
    model's text is scored."""

    rationale_field: str | None = Field(
        None, pattern=_PATH,
        description="JSON records: the field holding the rationale, a dotted path into nested objects (a number "
                    "indexes a list: output.text, choices.0.message.content)")
    id_field: str = Field(
        DEFAULT_ID_FIELD, pattern=_PATH,
        description="the field holding the example id, a dotted path: into each record (with rationale_field) or "
                    "into an lm-evaluation-harness sample's doc")
    source: str | None = Field(
        None, min_length=1,
        description="the source name of rows whose file names none; for an lm-evaluation-harness sample log, "
                    "instead of the task in its file name")
    think: Think = Field(
        "strip", description="a reasoning trace (the text inside think tags): strip it and score the rest, score "
                             "the trace instead, or both (the trace as SOURCE:think)")


# ---- formats ------------------------------------------------------------------------------------------------

def detect_format(columns: Sequence[str], reading: RationaleReading, column_map: dict[str, str] | None, *,
                  file: str) -> Format:
    """The format of a file with these columns (a JSON file: its first record's keys); one line naming the formats
    expected when it is none of them."""
    if reading.rationale_field is not None:
        found: Format = "fields"
    elif all(key in columns for key in LM_EVAL_KEYS):
        found = "lm_eval"
    elif "rationale" in [(column_map or {}).get(c, c) for c in columns]:
        if reading.id_field != DEFAULT_ID_FIELD:
            raise InputError("id_field (--id-field) names a field of JSON records read with --rationale-field or of "
                             "an lm-evaluation-harness sample's doc; rename a table's columns with --column-map",
                             file=file)
        return "table"
    else:
        raise InputError("not a rationale table (columns id, source, rationale), an lm-evaluation-harness sample "
                         "log (doc_id, doc, resps) or JSON lines with --rationale-field (reading.rationale_field); "
                         f"found columns {list(columns)}", file=file)
    if column_map:
        raise InputError(f"column_map renames a table's columns; this file is read as {_FORMAT_NAMES[found]}: name "
                         "its fields with --id-field / --rationale-field instead", file=file)
    return found


def rows_of_table(frame: pl.DataFrame, reading: RationaleReading, *, file: str, first_row: int = 0) -> pl.DataFrame:
    """A table's rows (columns already renamed to the canonical ones): `reading.source` fills a missing source
    column, traces are read as `reading.think` says, `file_row` counts from `first_row`."""
    if "source" not in frame.columns and reading.source is not None:
        frame = frame.with_columns(source=pl.lit(reading.source))
    frame = frame.with_columns(pl.int_range(first_row, first_row + frame.height, dtype=pl.Int64).alias(FILE_ROW))
    return apply_think(frame, reading.think, file=file)


def rows_of_records(records: Iterable[dict], found: Format, reading: RationaleReading, *, file: str,
                    first_row: int = 0, docs_read: set[tuple[str, int]] | None = None) -> pl.DataFrame:
    """Canonical rows of an lm-eval sample log's records or of JSON records read with `reading.rationale_field`,
    traces read as `reading.think` says. `docs_read`: see `lm_eval_rows`."""
    if found == "lm_eval":
        rows = lm_eval_rows(records, reading, file=file, first_row=first_row, docs_read=docs_read)
    else:
        rows = field_rows(records, reading, file=file, first_row=first_row)
    frame = pl.DataFrame(rows, schema={"id": pl.String, "source": pl.String, "rationale": pl.String,
                                       "label": pl.String, FILE_ROW: pl.Int64}, orient="row")
    return apply_think(frame, reading.think, file=file)


# ---- lm-evaluation-harness sample logs ----------------------------------------------------------------------

def lm_eval_task(file: str) -> str:
    """The task an lm-eval sample log holds, from its name samples_<task>_<timestamp>.jsonl; another name: its
    stem without a leading 'samples_'."""
    stem = Path(file).stem
    match = _LM_EVAL_NAME.match(stem)
    if match:
        return match["task"]
    return stem.removeprefix("samples_") or stem


def lm_eval_rows(records: Iterable[dict], reading: RationaleReading, *, file: str, first_row: int = 0,
                 docs_read: set[tuple[str, int]] | None = None) -> list[tuple]:
    """(id, source, rationale, label, file_row) of each document of an lm-eval sample log. The rationale is the
    model's generated text (the first response to the first request); the id the doc's field `reading.id_field`.
    A document logged once per filter (same doc_id, same generation) is read once: `docs_read` holds the
    (doc_id, hash of the generation) pairs read so far, shared by the pieces of a file read in batches."""
    source = reading.source or lm_eval_task(file)
    rows, docs_read = [], set() if docs_read is None else docs_read
    for row, record in enumerate(records, start=first_row):
        missing = [key for key in LM_EVAL_KEYS if key not in record]
        if missing:
            raise InputError(f"not an lm-evaluation-harness sample: no {', '.join(missing)}", file=file, row=row)
        text = lm_eval_generation(record, file=file, row=row)
        doc = (str(record["doc_id"]), hash(text))
        if doc in docs_read:
            continue
        docs_read.add(doc)
        rows.append((lm_eval_id(record["doc"], reading.id_field, file=file, row=row), source, text, None, row))
    return rows


def lm_eval_generation(record: dict, *, file: str, row: int) -> str:
    """The text a sample's model generated: resps[0][0] (filtered_resps holds what the task's filters made of it,
    for a chain-of-thought task the extracted answer; it is read only when resps holds no response)."""
    resps, filtered = record.get("resps"), record.get("filtered_resps")
    if isinstance(resps, list) and resps and isinstance(resps[0], list) and resps[0]:
        text = resps[0][0]
    elif isinstance(filtered, list) and filtered:
        text = filtered[0]
    else:
        raise InputError("the sample holds no response (resps and filtered_resps are empty)", file=file, row=row,
                         column="resps")
    if not isinstance(text, str):
        raise InputError(f"the sample's response is {_kind(text)}, not text: only generation tasks (generate_until) "
                         "log a rationale; this looks like a log-likelihood task", file=file, row=row, column="resps")
    return text


def lm_eval_id(doc: Any, id_field: str, *, file: str, row: int) -> str:
    """The example id in a sample's doc, at the dotted path `id_field`."""
    if not isinstance(doc, dict):
        raise InputError(f"the sample's doc is {_kind(doc)}, not an object", file=file, row=row, column="doc")
    value = value_at(doc, id_field)
    if value is _MISSING:
        raise InputError(f"the sample's doc has no field {id_field!r} (its fields: {', '.join(doc)}): name the doc "
                         "field that holds the example id with --id-field (reading.id_field)", file=file, row=row,
                         column="doc")
    return _id_text(value, f"doc.{id_field}", file=file, row=row)


# ---- JSON records with named fields -------------------------------------------------------------------------

def field_rows(records: Iterable[dict], reading: RationaleReading, *, file: str, first_row: int = 0) -> list[tuple]:
    """(id, source, rationale, label, file_row) of JSON records: the rationale at `reading.rationale_field`, the id
    at `reading.id_field`, the source the record's own `source` or `reading.source`, the label the record's `label`
    when it has one."""
    id_field = reading.id_field
    rows = []
    for row, record in enumerate(records, start=first_row):
        text = _field(record, reading.rationale_field, "--rationale-field", file=file, row=row)
        if text is not None and not isinstance(text, str):
            raise InputError(f"{reading.rationale_field!r} holds {_kind(text)}, not text", file=file, row=row,
                             column=reading.rationale_field)
        record_id = _id_text(_field(record, id_field, "--id-field", file=file, row=row), id_field, file=file,
                             row=row)
        source = record.get("source") if record.get("source") is not None else reading.source
        if source is None:
            raise InputError("the record has no source: name one for the file with --source (reading.source)",
                             file=file, row=row, column="source")
        label = record.get("label")
        rows.append((record_id, str(source), text, None if label is None else str(label), row))
    return rows


_MISSING = object()


def value_at(record: Any, path: str) -> Any:
    """The value at a dotted path in nested objects and lists (a number indexes a list); `_MISSING` when absent."""
    value = record
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _field(record: dict, path: str, option: str, *, file: str, row: int) -> Any:
    value = value_at(record, path)
    if value is _MISSING:
        raise InputError(f"no field {path!r} (the record's fields: {', '.join(record)}); {option} names it",
                         file=file, row=row, column=path)
    return value


def _id_text(value: Any, where: str, *, file: str, row: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"the id at {where!r} is {_kind(value)}, expected text or a whole number", file=file, row=row,
                         column=where)
    return str(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {list: "a list", dict: "an object", str: "text", bool: "a boolean"}.get(type(value), "a number")


# ---- reasoning traces ---------------------------------------------------------------------------------------

def split_reasoning(text: str) -> tuple[str, str | None]:
    """(rest, trace) of a generated text: the trace is the text inside <think> ... </think> (several blocks joined
    by a blank line), the rest what lies outside them (its pieces joined by a space); both without surrounding
    white space. trace is None and rest the text exactly as given when the text has no think tag.

    Two unpaired tags are read as reasoning models write them: a </think> before any <think> closes a block the
    prompt opened (chat templates that start the model's turn inside <think>), so the text before it is trace; a
    <think> that is never closed runs to the end of the text (the generation stopped while reasoning)."""
    if THINK_OPEN not in text and THINK_CLOSE not in text:
        return text, None
    rest, traces = [], []
    opened, closed = text.find(THINK_OPEN), text.find(THINK_CLOSE)
    if closed != -1 and (opened == -1 or closed < opened):
        traces.append(text[:closed])
        text = text[closed + len(THINK_CLOSE):]
    while (start := text.find(THINK_OPEN)) != -1:
        rest.append(text[:start])
        end = text.find(THINK_CLOSE, start)
        if end == -1:
            traces.append(text[start + len(THINK_OPEN):])
            text = ""
            break
        traces.append(text[start + len(THINK_OPEN):end])
        text = text[end + len(THINK_CLOSE):]
    rest.append(text)
    return _joined(rest, " "), _joined(traces, "\n\n")


def _joined(pieces: list[str], separator: str) -> str:
    return separator.join(piece.strip() for piece in pieces if piece.strip())


def apply_think(frame: pl.DataFrame, think: Think, *, file: str) -> pl.DataFrame:
    """The rows with each rationale read as `think` says (split_reasoning):

    strip  the rationale without its traces; a text that is all trace is refused, naming its row
    trace  the traces alone; a text without a trace (or with an empty one) is refused, naming its row
    both   the rationale without its traces under the row's source, and its traces as a second row under
           SOURCE:think, for the rows that have a non-empty trace (the others are counted in a log line)
    A frame without a text rationale column is returned as it is (validation names the column)."""
    if frame.schema.get("rationale") not in (pl.String, pl.Null) or frame.height == 0:
        return frame
    rests, traces = [], []
    for row, text in zip(frame[FILE_ROW], frame["rationale"]):
        rest, trace = (text, None) if text is None else split_reasoning(text)
        if think != "trace" and trace is not None and not rest:
            raise InputError(f"the rationale is all <think> trace: nothing is left once it is stripped (think="
                             f"{think!r}); score the trace with --think trace", file=file, row=row)
        if think == "trace" and text is not None and not trace:
            raise InputError(f"the rationale has {'an empty' if trace is not None else 'no'} <think> trace to score "
                             "(think='trace')", file=file, row=row)
        rests.append(rest)
        traces.append(trace)
    if think == "trace":
        return frame.with_columns(rationale=pl.Series(traces, dtype=pl.String))
    stripped = frame.with_columns(rationale=pl.Series(rests, dtype=pl.String))
    if think == "strip":
        return stripped
    return pl.concat([stripped, _trace_rows(frame, traces, file=file)], how="vertical")


def _trace_rows(frame: pl.DataFrame, traces: list[str | None], *, file: str) -> pl.DataFrame:
    """The rows with a non-empty trace, the trace as their rationale and SOURCE:think as their source."""
    has_trace = pl.Series([bool(t) for t in traces])
    if not has_trace.all():
        log.info("%s: %d of %d rationales have no <think> trace: no %s row for them", file,
                 int((~has_trace).sum()), frame.height, TRACE_SUFFIX)
    rows = frame.with_columns(rationale=pl.Series(traces, dtype=pl.String)).filter(has_trace)
    if "source" in rows.columns:
        rows = rows.with_columns(pl.col("source").cast(pl.String) + TRACE_SUFFIX)
    return rows
