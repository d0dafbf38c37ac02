"""Local example and rationale files: every format, column mapping, and every way a file can be bad."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import polars as pl
import pytest

from larev.data.files import load_examples_file, load_rationales_file, read_table
from larev.data.sources import DataConfig, load_data
from larev.errors import InputError
from larev.schema import EXAMPLE_SCHEMA

ESNLI_DEV = Path("/work/shared/data/esnli/dev.parquet")

NLI_ROWS = [
    {"id": "n1", "premise": "A cook stirs a pot.", "hypothesis": "Someone is cooking.", "label": "entailment",
     "explanation": "Stirring a pot is cooking."},
    {"id": "n2", "premise": "A dog sleeps on a mat.", "hypothesis": "The dog is running.",
     "label": "contradiction", "explanation": "A sleeping dog is not running."},
]
QA_ROWS = [
    {"id": "q1", "question": "Where do you keep milk?", "choices": ["fridge", "oven", "shelf"], "label": "fridge",
     "rationale": "Milk is kept cold.", "split": "test"},
    {"id": "q2", "question": "What cuts paper?", "choices": ["spoon", "scissors"], "label": "scissors",
     "rationale": "Scissors have blades.", "split": "test"},
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _raises(match: str, fn, *args, **kw) -> InputError:
    with pytest.raises(InputError, match=match) as info:
        fn(*args, **kw)
    return info.value


# ---- formats ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".json", ".csv"])
def test_nli_in_every_format_with_column_map(tmp_path, suffix):
    path = tmp_path / f"nli{suffix}"
    frame = pl.DataFrame(NLI_ROWS)
    if suffix == ".parquet":
        frame.write_parquet(path)
    elif suffix == ".csv":
        frame.write_csv(path)
    else:
        _write_jsonl(path, NLI_ROWS)
    df = load_examples_file(path, task="nli", split="validation", column_map={"explanation": "rationale"})
    assert list(df.columns) == list(EXAMPLE_SCHEMA)
    assert df["rationale"].to_list() == [r["explanation"] for r in NLI_ROWS]
    assert set(df["split"]) == {"validation"} and set(df["task"]) == {"nli"}
    assert df["question"].is_null().all()


def test_json_array_is_accepted(tmp_path):
    path = tmp_path / "nli.json"
    path.write_text(json.dumps(NLI_ROWS))
    df = load_examples_file(path, task="nli", split="test", column_map={"explanation": "rationale"})
    assert df.height == 2


def test_qa_parquet_and_jsonl_keep_choice_lists(tmp_path):
    pl.DataFrame(QA_ROWS).write_parquet(tmp_path / "qa.parquet")
    _write_jsonl(tmp_path / "qa.jsonl", QA_ROWS)
    a = load_examples_file(tmp_path / "qa.parquet", task="qa")
    b = load_examples_file(tmp_path / "qa.jsonl", task="qa")
    assert a.equals(b)
    assert a["choices"].to_list() == [r["choices"] for r in QA_ROWS]


@pytest.mark.parametrize("cells", [
    ['["fridge", "oven", "shelf"]', '["spoon", "scissors"]'],
    ["fridge|oven|shelf", "spoon | scissors"],
])
def test_csv_choices_as_json_or_pipes(tmp_path, cells):
    rows = [{**r, "choices": c} for r, c in zip(QA_ROWS, cells)]
    pl.DataFrame(rows).write_csv(tmp_path / "qa.csv")
    df = load_examples_file(tmp_path / "qa.csv", task="qa")
    assert df["choices"].to_list() == [r["choices"] for r in QA_ROWS]


def test_csv_keeps_string_ids_and_numeric_parquet_ids_become_strings(tmp_path):
    (tmp_path / "a.csv").write_text("id,premise,hypothesis,label,rationale,split\n"
                                    "007,p,h,neutral,r,test\n")
    assert load_examples_file(tmp_path / "a.csv", task="nli")["id"].to_list() == ["007"]
    pl.DataFrame({"id": [1, 2], "premise": ["p", "p"], "hypothesis": ["h", "h"], "label": ["neutral"] * 2,
                  "rationale": ["r", "r"]}).write_parquet(tmp_path / "b.parquet")
    assert load_examples_file(tmp_path / "b.parquet", task="nli", split="train")["id"].to_list() == ["1", "2"]


def test_utf8_bom_and_blank_jsonl_lines_are_fine(tmp_path):
    path = tmp_path / "nli.csv"
    pl.DataFrame(NLI_ROWS).write_csv(path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_examples_file(path, task="nli", split="test", column_map={"explanation": "rationale"}).height == 2
    jsonl = tmp_path / "nli.jsonl"
    jsonl.write_text(json.dumps(NLI_ROWS[0]) + "\n\n" + json.dumps(NLI_ROWS[1]) + "\n")
    assert read_table(jsonl).height == 2


def test_mapped_column_replaces_same_named_column(tmp_path):
    rows = [{**r, "rationale": "first", "rationale_2": f"second {i}"} for i, r in enumerate(NLI_ROWS)]
    _write_jsonl(tmp_path / "x.jsonl", rows)
    df = load_examples_file(tmp_path / "x.jsonl", task="nli", split="test", column_map={"rationale_2": "rationale"})
    assert df["rationale"].to_list() == ["second 0", "second 1"]


def test_drop_empty_rationales(tmp_path, caplog):
    rows = [{**NLI_ROWS[0], "explanation": "   "}, NLI_ROWS[1], {**NLI_ROWS[0], "id": "n3", "explanation": None}]
    path = _write_jsonl(tmp_path / "x.jsonl", rows)
    kw = dict(task="nli", split="train", column_map={"explanation": "rationale"})
    err = _raises("empty rationale", load_examples_file, path, **kw)
    assert err.row == 0 and err.column == "rationale"
    with caplog.at_level(logging.WARNING, logger="larev.data.files"):
        df = load_examples_file(path, **kw, drop_empty_rationales=True)
    assert df["id"].to_list() == ["n2"]
    assert "dropped 2 of 3 rows with an empty rationale: row 0 (id 'n1'), row 2 (id 'n3')" in caplog.text
    assert load_examples_file(path, **kw, require_rationale=False).height == 3


def test_rationales_file(tmp_path):
    examples = load_examples_file(_write_jsonl(tmp_path / "ex.jsonl", QA_ROWS), task="qa")
    path = tmp_path / "r.csv"
    pl.DataFrame({"id": ["q1", "q2"], "model": ["gpt", "gpt"], "text": ["cold", "blades"]}).write_csv(path)
    df = load_rationales_file(path, examples, column_map={"model": "source", "text": "rationale"})
    assert df.rows() == [("q1", "gpt", "cold", "fridge"), ("q2", "gpt", "blades", "scissors")]
    pl.DataFrame({"id": ["q9"], "source": ["gpt"], "rationale": ["x"]}).write_csv(path)
    err = _raises("not among the test examples", load_rationales_file, path, examples)
    assert err.file == str(path) and err.row == 0


def test_duplicate_id_and_source_in_a_rationales_file_names_both_rows(tmp_path):
    examples = load_examples_file(_write_jsonl(tmp_path / "ex.jsonl", QA_ROWS), task="qa")
    path = tmp_path / "r.csv"
    pl.DataFrame({"id": ["q1", "q2", "q1"], "source": ["gpt"] * 3, "rationale": ["a", "b", "c"]}).write_csv(path)
    err = _raises("duplicate id='q1', source='gpt' \\(rows \\[0, 2\\]\\)", load_rationales_file, path, examples)
    assert err.row == 2 and err.column == "id"


# ---- errors -------------------------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    err = _raises("file not found", load_examples_file, tmp_path / "nope.parquet")
    assert err.file == str(tmp_path / "nope.parquet")


def test_unknown_suffix_lists_the_known_ones(tmp_path):
    (tmp_path / "x.tsv").write_text("a\tb\n")
    _raises(r"unknown file type '.tsv'; use one of \['.parquet', '.jsonl', '.json', '.csv'\]",
            read_table, tmp_path / "x.tsv")


@pytest.mark.parametrize("name, content", [("x.csv", ""), ("x.jsonl", ""), ("x.parquet", "")])
def test_empty_file(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    _raises("the file is empty", read_table, tmp_path / name)


@pytest.mark.parametrize("name, content", [("x.csv", "id,label\n"), ("x.jsonl", "\n\n")])
def test_file_without_rows(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    _raises("no rows", read_table, tmp_path / name)


def test_parquet_without_rows(tmp_path):
    pl.DataFrame({"id": [], "label": []}, schema={"id": pl.String, "label": pl.String}).write_parquet(
        tmp_path / "x.parquet")
    _raises("no rows", read_table, tmp_path / "x.parquet")


def test_text_named_parquet(tmp_path):
    (tmp_path / "x.parquet").write_text("id,label\n1,neutral\n")
    err = _raises("not a valid Parquet file", read_table, tmp_path / "x.parquet")
    assert "Traceback" not in str(err) and err.file == str(tmp_path / "x.parquet")


@pytest.mark.parametrize("name", ["x.csv", "x.jsonl"])
def test_non_utf8_names_the_byte_offset_and_line(tmp_path, name):
    good = b"id,label\n" if name.endswith(".csv") else b'{"id": "a", "label": "neutral"}\n'
    (tmp_path / name).write_bytes(good + b"caf\xe9\n")
    err = _raises(rf"not valid UTF-8: byte 0xe9 at byte offset {len(good) + 3} \(line 2\)", read_table,
                  tmp_path / name)
    assert err.file == str(tmp_path / name)


def test_malformed_json_line(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"id": "a"}\n\n{"id": "b",}\n')
    err = _raises("malformed JSON on line 3", read_table, tmp_path / "x.jsonl")
    assert err.row == 1


def test_json_line_that_is_not_an_object(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"id": "a"}\n[1, 2]\n')
    err = _raises(r"expected a JSON object, found list \(line 2\)", read_table, tmp_path / "x.jsonl")
    assert err.row == 1


def test_ragged_csv_names_the_row(tmp_path):
    (tmp_path / "x.csv").write_text("id,label\na,neutral\nb,neutral,extra\n")
    err = _raises("3 fields where the header has 2", read_table, tmp_path / "x.csv")
    assert err.row == 1


def test_bad_choices_cell(tmp_path):
    rows = [{**QA_ROWS[0], "choices": '["fridge", "oven"'}]
    pl.DataFrame(rows).write_csv(tmp_path / "qa.csv")
    err = _raises("do not parse", load_examples_file, tmp_path / "qa.csv", task="qa")
    assert (err.row, err.column) == (0, "choices")


def test_column_map_naming_a_missing_column(tmp_path):
    path = _write_jsonl(tmp_path / "x.jsonl", NLI_ROWS)
    err = _raises(r"column_map names column\(s\) \['expl'\]", load_examples_file, path, task="nli",
                  split="test", column_map={"expl": "rationale"})
    assert err.column == "expl"


def test_missing_split_asks_for_one(tmp_path):
    path = _write_jsonl(tmp_path / "x.jsonl", NLI_ROWS)
    _raises("no 'split' column; pass split=", load_examples_file, path, task="nli",
            column_map={"explanation": "rationale"})


def test_missing_task_asks_for_one(tmp_path):
    path = _write_jsonl(tmp_path / "x.jsonl", [{k: v for k, v in r.items() if k != "task"} for r in QA_ROWS])
    _raises_at(path, None, "task", re.escape("missing required column(s) ['task'] (or give the task: --task nli|qa"),
               load_examples_file, path)


def test_contract_errors_name_the_file_row_and_column(tmp_path):
    rows = [NLI_ROWS[0], {**NLI_ROWS[1], "label": "maybe"}]
    path = _write_jsonl(tmp_path / "x.jsonl", rows)
    err = _raises("unknown label 'maybe'", load_examples_file, path, task="nli", split="test",
                  column_map={"explanation": "rationale"})
    assert (err.file, err.row, err.column) == (str(path), 1, "label")


# ---- contract errors: each message names the file, and the row and column where they apply ----------------

def _raises_at(path: Path, row: int | None, column: str | None, problem: str, fn, *args, **kw) -> InputError:
    """The InputError of fn(*args, **kw), whose message must read '<path>: row R, column 'C': <problem...>'."""
    where = ", ".join(([f"row {row}"] if row is not None else []) + ([f"column '{column}'"] if column else []))
    err = _raises("^" + re.escape(f"{path}: {where}: ") + problem, fn, *args, **kw)
    assert (err.file, err.row, err.column) == (str(path), row, column)
    return err


def _nli_examples(tmp_path: Path) -> pl.DataFrame:
    return load_examples_file(_write_jsonl(tmp_path / "ex.jsonl", NLI_ROWS), task="nli", split="test",
                              column_map={"explanation": "rationale"})


def _nli_row(i: int, **extra) -> dict:
    row = {k: v for k, v in NLI_ROWS[i % 2].items() if k != "explanation"}
    return {**row, "id": f"n{i + 1}", "rationale": NLI_ROWS[i % 2]["explanation"], **extra}


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_rationales_file_missing_a_required_column(tmp_path, suffix):
    path = tmp_path / f"r{suffix}"
    frame = pl.DataFrame({"id": ["n1", "n2"], "rationale": ["a", "b"]})
    frame.write_csv(path) if suffix == ".csv" else frame.write_ndjson(path)
    _raises_at(path, None, "source",
               re.escape("missing required column(s) ['source']; the file has columns ['id', 'rationale']"),
               load_rationales_file, path, _nli_examples(tmp_path))


def test_columns_outside_the_contract_are_dropped_and_logged(tmp_path, caplog):
    examples_path = _write_jsonl(tmp_path / "ex.jsonl", [{**r, "annotator": "x"} for r in NLI_ROWS])
    path = tmp_path / "r.csv"
    pl.DataFrame({"id": ["n1", "n2"], "source": ["gpt"] * 2, "rationale": ["a", "b"], "temperature": ["0", "1"],
                  "notes": ["", "?"]}).write_csv(path)
    with caplog.at_level(logging.INFO, logger="larev.schema"):
        examples = load_examples_file(examples_path, task="nli", split="test", column_map={"explanation": "rationale"})
        df = load_rationales_file(path, examples)
    assert list(df.columns) == ["id", "source", "rationale", "label"] and df.height == 2
    assert list(examples.columns) == list(EXAMPLE_SCHEMA)
    assert f"{path}: ignoring column(s) outside the data contract: ['temperature', 'notes']" in caplog.text
    assert f"{examples_path}: ignoring column(s) outside the data contract: ['annotator']" in caplog.text


@pytest.mark.parametrize("suffix, value", [(".jsonl", None), (".jsonl", ""), (".jsonl", " \t\n "), (".csv", ""),
                                           (".csv", "   "), (".parquet", None), (".parquet", " ")])
def test_null_or_blank_rationale_in_a_rationales_file(tmp_path, suffix, value):
    path = tmp_path / f"r{suffix}"
    frame = pl.DataFrame({"id": ["n1", "n2"], "source": ["gpt"] * 2, "rationale": ["fine", value]},
                         schema={"id": pl.String, "source": pl.String, "rationale": pl.String})
    {".jsonl": frame.write_ndjson, ".csv": frame.write_csv, ".parquet": frame.write_parquet}[suffix](path)
    _raises_at(path, 1, "rationale", "null or empty rationale$", load_rationales_file, path, _nli_examples(tmp_path))


def test_qa_label_not_among_the_choices(tmp_path):
    path = _write_jsonl(tmp_path / "qa.jsonl", [QA_ROWS[0], {**QA_ROWS[1], "label": "knife"}])
    _raises_at(path, 1, "label", re.escape("label 'knife' is not one of the row's choices ['spoon', 'scissors']"),
               load_examples_file, path, task="qa")


@pytest.mark.parametrize("task", ["nli", "qa"])
def test_rationale_label_outside_the_rows_label_set(tmp_path, task):
    if task == "nli":
        examples, labels, bad = _nli_examples(tmp_path), ["entailment", "maybe"], "maybe"
    else:
        examples = load_examples_file(_write_jsonl(tmp_path / "ex.jsonl", QA_ROWS), task="qa")
        labels, bad = ["fridge", "oven"], "oven"  # 'oven' is a choice of q1, not of q2
    ids = examples["id"].to_list()
    path = tmp_path / "r.csv"
    pl.DataFrame({"id": ids, "source": ["gpt"] * 2, "rationale": ["a", "b"], "label": labels}).write_csv(path)
    _raises_at(path, 1, "label", re.escape(f"label {bad!r} is outside the label set of example {ids[1]!r}"),
               load_rationales_file, path, examples)


def test_duplicate_ids_in_an_examples_file(tmp_path):
    path = tmp_path / "ex.csv"
    pl.DataFrame([_nli_row(0), _nli_row(1), {**_nli_row(2), "id": "n1"}]).write_csv(path)
    _raises_at(path, 2, "id", re.escape("duplicate id='n1' (rows [0, 2])"), load_examples_file, path, task="nli",
               split="test")


def _nli_file(path: Path, ids: list[str]) -> str:
    _write_jsonl(path, [{**_nli_row(i), "id": id_} for i, id_ in enumerate(ids)])
    return str(path)


def test_train_test_id_overlap(tmp_path):
    train = _nli_file(tmp_path / "train.jsonl", ["a", "b", "c", "d"])
    test = _nli_file(tmp_path / "test.jsonl", ["x", "c", "y"])
    config = DataConfig(source="files", task="nli", train=train, test=test)
    _raises_at(Path(test), None, "id", re.escape("id 'c' appears in both the train and the test data"),
               load_data, config)


def test_train_validation_id_overlap_names_the_validation_file(tmp_path):
    train = _nli_file(tmp_path / "train.jsonl", ["a", "b", "c"])
    validation = _nli_file(tmp_path / "val.jsonl", ["v", "b"])
    test = _nli_file(tmp_path / "test.jsonl", ["x"])
    config = DataConfig(source="files", task="nli", train=train, test=test, validation=validation)
    err = _raises("id 'b'", load_data, config)
    assert err.file != test and "validation" in str(err)


@pytest.mark.parametrize("task", [None, "nli"])
def test_mixed_tasks_in_one_examples_file(tmp_path, task):
    qa = {k: v for k, v in QA_ROWS[0].items() if k != "split"}
    path = _write_jsonl(tmp_path / "mixed.jsonl", [{**_nli_row(0), "task": "nli"}, {**_nli_row(1), "task": "nli"},
                                                   {**qa, "task": "qa"}])
    _raises_at(path, 2, "task", re.escape("mixed tasks ['nli', 'qa'] in one file"), load_examples_file, path,
               task=task, split="test")


def test_column_of_the_wrong_type(tmp_path):
    path = tmp_path / "qa.parquet"
    pl.DataFrame([{**r, "choices": 3} for r in QA_ROWS]).write_parquet(path)
    _raises_at(path, None, "choices", re.escape("has dtype Int64, expected List(String)"), load_examples_file, path,
               task="qa")
    path = _write_jsonl(tmp_path / "r.jsonl", [{"id": "n1", "source": "gpt", "rationale": "a",
                                                "label": ["entailment"]}])
    _raises_at(path, None, "label", re.escape("has dtype List(String), expected String"), load_rationales_file,
               path, _nli_examples(tmp_path))


@pytest.mark.parametrize("name, value, kind", [("x.jsonl", ["neutral"], "a list"),
                                               ("x.jsonl", {"gold": "neutral"}, "an object"),
                                               ("x.json", ["neutral"], "a list")])
def test_json_records_that_do_not_form_a_table_name_the_row_and_column(tmp_path, name, value, kind):
    rows = [_nli_row(0), _nli_row(1), {**_nli_row(2), "label": value}]
    path = tmp_path / name
    path.write_text(json.dumps(rows) if name.endswith(".json") else "".join(json.dumps(r) + "\n" for r in rows))
    _raises_at(path, 2, "label", re.escape(f"records do not form a table: {kind} where row 0 has a single value"),
               load_examples_file, path, task="nli", split="test")


def test_jsonl_text_with_unicode_line_separators(tmp_path):
    # str.splitlines() splits at U+2028 / U+0085, which JSON writers leave unescaped inside strings
    rows = [{**_nli_row(0), "rationale": "one\u2028two"}, {**_nli_row(1), "rationale": "three\x85four"}]
    path = tmp_path / "x.jsonl"
    pl.DataFrame(rows).write_ndjson(path)
    df = load_examples_file(path, task="nli", split="test")
    assert df["rationale"].to_list() == ["one\u2028two", "three\x85four"]


# ---- real data ----------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not ESNLI_DEV.exists(), reason="e-SNLI dev file not present")
def test_real_esnli_dev():
    df = load_examples_file(ESNLI_DEV, task="nli", split="validation", drop_empty_rationales=True)
    assert df.height > 9000
    assert set(df["label"]) == {"entailment", "contradiction", "neutral"}
    assert df["rationale"].str.strip_chars().str.len_chars().min() > 0
    assert list(df.columns) == list(EXAMPLE_SCHEMA)


def test_the_validation_carve_keeps_rows_that_share_a_premise_together():
    """SNLI gives each premise one hypothesis per label: a row-level carve would put a validation premise's other
    labels in training. Premise groups stay whole, the share is close to the fraction, QA rows are their own group."""
    from larev.data.sources import carve_validation

    rows = [{"id": f"n{i}-{j}", "task": "nli", "premise": f"Premise {i}." + (" " if j == 1 else ""),
             "label": y} for i in range(200) for j, y in enumerate(["entailment", "contradiction", "neutral"])]
    rows += [{"id": f"q{i}", "task": "qa", "premise": None, "label": "a"} for i in range(100)]
    frame = pl.DataFrame(rows)
    out = carve_validation(frame, 0.1, seed=3)
    nli = out.filter(pl.col("task") == "nli").with_columns(group=pl.col("id").str.extract(r"^(n\d+)-"))
    assert (nli.group_by("group").agg(pl.col("split").n_unique())["split"] == 1).all()  # no premise split apart
    n_val = out.filter(pl.col("split") == "validation").height
    assert 70 <= n_val <= 72  # round(700 * 0.1) = 70, overshot by at most one group (3 rows) less one
    assert out.filter((pl.col("task") == "qa") & (pl.col("split") == "validation")).height > 0
    assert out.equals(carve_validation(frame, 0.1, seed=3))  # seeded
    assert not out.equals(carve_validation(frame, 0.1, seed=4))
