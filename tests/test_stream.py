"""Rationale files read and validated in batches (larev/data/stream.py): the same rows as the whole-file loader,
errors that name the row in the whole file, and duplicates caught across batches."""

from __future__ import annotations

import json

import polars as pl
import pytest

from larev.data.files import load_rationales_file
from larev.data.stream import iter_rationale_batches, validate_rationale_file
from larev.errors import InputError
from larev.data.variants import bulk_rationales

EXAMPLES = pl.DataFrame({"id": [f"e{i}" for i in range(7)], "task": ["nli"] * 7, "choices": [None] * 7,
                         "label": ["neutral"] * 7, "rationale": ["a cat sat on the mat"] * 7, "split": ["test"] * 7},
                        schema_overrides={"choices": pl.List(pl.String)})


def write(frame: pl.DataFrame, path) -> str:
    {".parquet": frame.write_parquet, ".jsonl": frame.write_ndjson, ".csv": frame.write_csv}[path.suffix](path)
    return str(path)


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv", ".json"])
def test_batches_hold_the_whole_file_loaders_rows_in_order(tmp_path, suffix):
    bulk = bulk_rationales(EXAMPLES, 50, seed=2).with_columns(label=pl.lit("entailment"))
    path = tmp_path / f"r{suffix}"
    if suffix == ".json":  # one JSON array: read whole, then cut
        path.write_text(json.dumps(bulk.to_dicts()))
    else:
        write(bulk, path)
    batches = list(iter_rationale_batches(path, EXAMPLES, batch_rows=16))
    assert [b.height for b in batches] == [16, 16, 16, 2]
    assert pl.concat(batches).equals(load_rationales_file(path, EXAMPLES))


def test_errors_name_the_row_in_the_whole_file(tmp_path):
    bulk = bulk_rationales(EXAMPLES, 40)
    bad = bulk.with_columns(id=pl.when(pl.int_range(pl.len()) == 33).then(pl.lit("nope")).otherwise("id"))
    with pytest.raises(InputError, match=r"r\.parquet: row 33, column 'id': id 'nope' is not among the test"):
        validate_rationale_file(write(bad, tmp_path / "r.parquet"), EXAMPLES, batch_rows=10)
    empty = bulk.with_columns(rationale=pl.when(pl.int_range(pl.len()) == 21).then(pl.lit("  "))
                              .otherwise("rationale"))
    with pytest.raises(InputError, match=r"row 21, column 'rationale': null or empty rationale"):
        validate_rationale_file(write(empty, tmp_path / "r.csv"), EXAMPLES, batch_rows=10)


def test_a_duplicate_in_another_batch_is_caught_and_named(tmp_path):
    bulk = pl.concat([bulk_rationales(EXAMPLES, 30), bulk_rationales(EXAMPLES, 1)])  # row 30 repeats row 0
    path = write(bulk, tmp_path / "r.jsonl")
    with pytest.raises(InputError, match=r"row 30, column 'id': duplicate id='e0', source='model-0' \(rows \[0, 30\]\)"):
        validate_rationale_file(path, EXAMPLES, batch_rows=8)
    assert validate_rationale_file(write(bulk.head(30), tmp_path / "ok.jsonl"), EXAMPLES, batch_rows=8) == 30


def test_bad_bytes_and_bad_lines_late_in_a_file_name_their_line(tmp_path):
    lines = [json.dumps(r) for r in bulk_rationales(EXAMPLES, 12).to_dicts()]
    path = tmp_path / "r.jsonl"
    path.write_bytes(("\n".join(lines[:9]) + "\n").encode() + b'{"id": "e2", "source": "x\xff"}\n')
    with pytest.raises(InputError, match=r"not valid UTF-8: byte 0xff .* \(line 10\)"):
        validate_rationale_file(path, EXAMPLES, batch_rows=4)
    path.write_text("\n".join(lines[:9] + ["{not json"]) + "\n")
    with pytest.raises(InputError, match=r"row 9: malformed JSON on line 10"):
        validate_rationale_file(path, EXAMPLES, batch_rows=4)
    csv = tmp_path / "r.csv"
    csv.write_text("id,source,rationale\ne1,a,x\ne2,b,y\ne3,c,z,extra\n")
    with pytest.raises(InputError, match=r"row 2: not a valid CSV file: 4 fields where the header has 3"):
        validate_rationale_file(csv, EXAMPLES, batch_rows=1)


def test_empty_and_unknown_files_get_the_loaders_errors(tmp_path):
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        validate_rationale_file(tmp_path / "e.jsonl", EXAMPLES, batch_rows=5)
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match="no rows"):
        validate_rationale_file(tmp_path / "blank.jsonl", EXAMPLES, batch_rows=5)
    (tmp_path / "x.txt").write_text("id\n")
    with pytest.raises(InputError, match="unknown file type"):
        validate_rationale_file(tmp_path / "x.txt", EXAMPLES, batch_rows=5)
    with pytest.raises(ValueError, match="at least 1"):
        validate_rationale_file(tmp_path / "e.jsonl", EXAMPLES, batch_rows=0)


def test_records_that_do_not_form_a_table_name_the_row_in_the_whole_file(tmp_path):
    rows = [{"id": "e1", "source": f"s{i}", "rationale": "words"} for i in range(7)]
    rows[6]["rationale"] = ["a", "list"]  # batch 2 (rows 4..7), where row 4 holds a string
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(InputError, match=r"row 6, column 'rationale': records do not form a table: a list where "
                                         r"row 4 has a single value"):
        validate_rationale_file(path, EXAMPLES, batch_rows=4)
