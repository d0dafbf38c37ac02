"""Rationale files as people log them (larev/data/logged.py): lm-evaluation-harness sample logs, JSON records with
the rationale at a named field, <think> reasoning traces, and the one-line refusal of a file in no known format;
read whole and in batches, and the CLI options that set how."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from larev.data.files import load_rationales_file
from larev.data.logged import RationaleReading, lm_eval_task, split_reasoning
from larev.data.stream import iter_rationale_batches
from larev.errors import InputError

IDS = ["e1", "e2", "e3", "7"]
EXAMPLES = pl.DataFrame({"id": IDS, "task": ["nli"] * 4, "choices": [None] * 4,
                         "label": ["entailment", "neutral", "contradiction", "neutral"]},
                        schema_overrides={"choices": pl.List(pl.String)})
GOLD = dict(zip(IDS, EXAMPLES["label"]))
LOG_NAME = "samples_esnli_2024-06-01T12-30-45.123456.jsonl"


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows(frame: pl.DataFrame) -> list[tuple]:
    return [tuple(r) for r in frame.select("id", "source", "rationale", "label").iter_rows()]


def lm_eval_sample(doc_id: int, doc: dict, generation, *, filtered=None, filter_key: str = "none") -> dict:
    """One sample record as lm-eval's evaluation tracker writes it (arguments, resps and filtered_resps
    sanitised to lists of strings, target as text, the metric's value beside its name)."""
    return {"doc_id": doc_id, "doc": doc, "target": "neutral",
            "arguments": {"gen_args_0": {"arg_0": f"Premise {doc_id} ...", "arg_1": {"until": ["\n\n"]}}},
            "resps": [[generation]], "filtered_resps": [filtered if filtered is not None else generation],
            "filter": filter_key, "metrics": ["exact_match"], "doc_hash": "d" * 64, "prompt_hash": "p" * 64,
            "target_hash": "t" * 64, "exact_match": 1.0}


# ---- the canonical table -----------------------------------------------------------------------------------

def test_a_table_is_read_as_before_with_its_traces_stripped(tmp_path):
    path = tmp_path / "r.csv"
    pl.DataFrame({"id": ["e1", "e2"], "source": ["m", "m"],
                  "rationale": ["<think>The cook stirs.</think>\nStirring is cooking.", "  plain,  as written "]}
                 ).write_csv(path)
    assert rows(load_rationales_file(path, EXAMPLES)) == [
        ("e1", "m", "Stirring is cooking.", "entailment"), ("e2", "m", "  plain,  as written ", "neutral")]


def test_source_names_the_rows_of_a_table_without_a_source_column(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [{"id": "e1", "rationale": "a"}, {"id": "e3", "rationale": "b"}])
    df = load_rationales_file(path, EXAMPLES, reading=RationaleReading(source="gpt-x"))
    assert rows(df) == [("e1", "gpt-x", "a", "entailment"), ("e3", "gpt-x", "b", "contradiction")]
    with pytest.raises(InputError, match=r"missing required column\(s\) \['source'\]"):
        load_rationales_file(path, EXAMPLES)


# ---- lm-evaluation-harness sample logs ----------------------------------------------------------------------

def test_an_lm_eval_sample_log_reads_the_generation_of_each_document_once(tmp_path):
    records = [
        lm_eval_sample(0, {"id": "e1", "premise": "p"}, "A cook stirs, so someone cooks.", filtered="entailment",
                       filter_key="strict-match"),
        lm_eval_sample(0, {"id": "e1", "premise": "p"}, "A cook stirs, so someone cooks.", filtered="entailment",
                       filter_key="flexible-extract"),  # the same document under a second filter
        lm_eval_sample(1, {"id": "e2", "premise": "p"}, "Nothing says why.", filtered="neutral"),
    ]
    records[2]["arguments"] = [["Premise 1 ...", {"until": ["\n"]}]]  # unsanitised: no table, read all the same
    path = write_jsonl(tmp_path / LOG_NAME, records)
    assert rows(load_rationales_file(path, EXAMPLES)) == [
        ("e1", "esnli", "A cook stirs, so someone cooks.", "entailment"),
        ("e2", "esnli", "Nothing says why.", "neutral")]
    named = load_rationales_file(path, EXAMPLES, reading=RationaleReading(source="llama-3-8b"))
    assert named["source"].to_list() == ["llama-3-8b", "llama-3-8b"]


def test_the_task_comes_from_the_log_file_name():
    assert lm_eval_task(f"out/model/{LOG_NAME}") == "esnli"
    assert lm_eval_task("samples_arc_challenge_chat_2025-01-31T08-00-00.5.jsonl") == "arc_challenge_chat"
    assert lm_eval_task("inbox/my_log.jsonl") == "my_log"
    assert lm_eval_task("samples_gsm8k.jsonl") == "gsm8k"


def test_the_id_field_is_a_dotted_path_into_the_doc(tmp_path):
    path = write_jsonl(tmp_path / LOG_NAME, [lm_eval_sample(0, {"pair": {"ref": "e3"}}, "Sleeping is not running."),
                                             lm_eval_sample(1, {"pair": {"ref": 7}}, "Why not.")])
    df = load_rationales_file(path, EXAMPLES, reading=RationaleReading(id_field="pair.ref"))
    assert rows(df) == [("e3", "esnli", "Sleeping is not running.", "contradiction"),
                        ("7", "esnli", "Why not.", "neutral")]


def test_a_doc_without_the_id_field_names_the_option(tmp_path):
    path = write_jsonl(tmp_path / LOG_NAME, [lm_eval_sample(0, {"id": "e1"}, "fine"),
                                             lm_eval_sample(1, {"premise": "p", "hypothesis": "h"}, "no id")])
    with pytest.raises(InputError) as info:
        load_rationales_file(path, EXAMPLES)
    assert info.value.row == 1
    assert "doc has no field 'id' (its fields: premise, hypothesis)" in str(info.value)
    assert "--id-field" in str(info.value)


def test_a_log_likelihood_task_has_no_rationale(tmp_path):
    record = lm_eval_sample(0, {"id": "e1"}, ["-1.25", "False"])  # a multiple-choice task's (loglikelihood, greedy)
    path = write_jsonl(tmp_path / LOG_NAME, [record])
    with pytest.raises(InputError, match=r"row 0, column 'resps': the sample's response is a list, not text: only "
                                         r"generation tasks"):
        load_rationales_file(path, EXAMPLES)


def test_an_lm_eval_error_names_the_row_of_the_file(tmp_path):
    """Row 1 repeats row 0 under another filter and is read once: the unknown id of row 2 is still row 2."""
    records = [lm_eval_sample(0, {"id": "e1"}, "a", filter_key="x"), lm_eval_sample(0, {"id": "e1"}, "a"),
               lm_eval_sample(1, {"id": "nope"}, "b")]
    path = write_jsonl(tmp_path / LOG_NAME, records)
    with pytest.raises(InputError, match=r"row 2, column 'id': id 'nope' is not among the test examples"):
        load_rationales_file(path, EXAMPLES)


def test_a_duplicate_id_names_the_rows_of_the_file(tmp_path):
    records = [lm_eval_sample(0, {"id": "e1"}, "a", filter_key="x"), lm_eval_sample(0, {"id": "e1"}, "a"),
               lm_eval_sample(1, {"id": "e1"}, "c")]
    path = write_jsonl(tmp_path / LOG_NAME, records)
    with pytest.raises(InputError, match=r"row 2, column 'id': duplicate id='e1', source='esnli' \(rows \[0, 2\]\)$"):
        load_rationales_file(path, EXAMPLES)


# ---- JSON records with a named rationale field --------------------------------------------------------------

def test_json_records_read_with_dotted_field_paths(tmp_path):
    records = [{"meta": {"uid": "e1"}, "output": {"text": "Stirring is cooking.", "tokens": 3}, "label": "neutral"},
               {"meta": {"uid": 7}, "output": {"text": "Nothing says why."}}]
    path = write_jsonl(tmp_path / "gen.jsonl", records)
    reading = RationaleReading(rationale_field="output.text", id_field="meta.uid", source="my-model")
    assert rows(load_rationales_file(path, EXAMPLES, reading=reading)) == [
        ("e1", "my-model", "Stirring is cooking.", "neutral"), ("7", "my-model", "Nothing says why.", "neutral")]


def test_a_number_in_the_path_indexes_a_list_and_a_record_source_wins(tmp_path):
    records = [{"id": "e2", "source": "api-a", "choices": [{"message": {"content": "first"}}, {"message": {}}]}]
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    reading = RationaleReading(rationale_field="choices.0.message.content", source="unused")
    assert rows(load_rationales_file(path, EXAMPLES, reading=reading)) == [("e2", "api-a", "first", "neutral")]


def test_a_parquet_file_with_nested_columns_is_read_with_field_paths(tmp_path):
    path = tmp_path / "gen.parquet"
    pl.DataFrame({"id": ["e1", "e2"], "output": [{"text": "a"}, {"text": "b"}]}).write_parquet(path)
    reading = RationaleReading(rationale_field="output.text", source="m")
    assert rows(load_rationales_file(path, EXAMPLES, reading=reading)) == [("e1", "m", "a", "entailment"),
                                                                           ("e2", "m", "b", "neutral")]


def test_missing_fields_and_a_missing_source_name_their_option(tmp_path):
    path = write_jsonl(tmp_path / "gen.jsonl", [{"id": "e1", "output": {"text": "a"}}, {"id": "e2", "output": {}}])
    with pytest.raises(InputError, match=r"row 1, column 'output.text': no field 'output.text' .*--rationale-field"):
        load_rationales_file(path, EXAMPLES, reading=RationaleReading(rationale_field="output.text", source="m"))
    with pytest.raises(InputError, match=r"row 0, column 'source': the record has no source: .*--source"):
        load_rationales_file(path, EXAMPLES, reading=RationaleReading(rationale_field="output.text"))
    with pytest.raises(InputError, match=r"row 0, column 'uid': no field 'uid' .*--id-field"):
        load_rationales_file(path, EXAMPLES, reading=RationaleReading(rationale_field="output.text", id_field="uid",
                                                                      source="m"))


def test_field_paths_must_be_dotted_names():
    for bad in ("", "output..text", ".text", "a b"):
        with pytest.raises(ValidationError, match="rationale_field"):
            RationaleReading(rationale_field=bad)
    with pytest.raises(ValidationError, match="think"):
        RationaleReading(think="keep")


# ---- reasoning traces ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, rest, trace", [
    ("no tags,  kept\nas written ", "no tags,  kept\nas written ", None),
    ("<think>Cooks stir pots.</think>\n\nStirring is cooking.", "Stirring is cooking.", "Cooks stir pots."),
    ("A <think>one</think> B <think> two </think> C", "A B C", "one\n\ntwo"),
    ("I reason here.</think> The answer follows.", "The answer follows.", "I reason here."),  # prompt opened it
    ("Short answer. <think>then the generation stopped", "Short answer.", "then the generation stopped"),
    ("<think>\n\n</think>\n\nNo reasoning shown.", "No reasoning shown.", ""),
    ("<think>all trace</think>", "", "all trace"),
])
def test_split_reasoning(text, rest, trace):
    assert split_reasoning(text) == (rest, trace)


def _traced(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / LOG_NAME, [
        lm_eval_sample(0, {"id": "e1"}, "<think>Cooks stir.</think> Stirring is cooking."),
        lm_eval_sample(1, {"id": "e2"}, "<think>First.</think> Why <think>Second.</think> not."),
        lm_eval_sample(2, {"id": "e3"}, "No trace at all.")])


def test_think_strip_trace_and_both(tmp_path):
    path = _traced(tmp_path)
    stripped = [("e1", "esnli", "Stirring is cooking.", "entailment"), ("e2", "esnli", "Why not.", "neutral"),
                ("e3", "esnli", "No trace at all.", "contradiction")]
    assert rows(load_rationales_file(path, EXAMPLES)) == stripped
    assert rows(load_rationales_file(path, EXAMPLES, reading=RationaleReading(think="both"))) == stripped + [
        ("e1", "esnli:think", "Cooks stir.", "entailment"), ("e2", "esnli:think", "First.\n\nSecond.", "neutral")]
    with pytest.raises(InputError, match=r"row 2: the rationale has no <think> trace to score \(think='trace'\)"):
        load_rationales_file(path, EXAMPLES, reading=RationaleReading(think="trace"))
    write_jsonl(path, [lm_eval_sample(0, {"id": "e1"}, "Cooks stir.</think>Stirring is cooking."),
                       lm_eval_sample(1, {"id": "e2"}, "<think>Cut off while thinking")])
    assert rows(load_rationales_file(path, EXAMPLES, reading=RationaleReading(think="trace"))) == [
        ("e1", "esnli", "Cooks stir.", "entailment"), ("e2", "esnli", "Cut off while thinking", "neutral")]


def test_a_rationale_that_is_all_trace_is_refused_when_stripped(tmp_path):
    path = tmp_path / "r.jsonl"
    write_jsonl(path, [{"id": "e1", "source": "m", "rationale": "fine"},
                       {"id": "e2", "source": "m", "rationale": "<think>reasoning, then the budget ran out"}])
    for think in ("strip", "both"):
        with pytest.raises(InputError, match=r"row 1: the rationale is all <think> trace: nothing is left once it is "
                                             r"stripped .*--think trace"):
            load_rationales_file(path, EXAMPLES, reading=RationaleReading(think=think))
    write_jsonl(path, [{"id": "e1", "source": "m", "rationale": "<think> </think>answer"}])
    with pytest.raises(InputError, match=r"row 0: the rationale has an empty <think> trace"):
        load_rationales_file(path, EXAMPLES, reading=RationaleReading(think="trace"))


# ---- files in no known format -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["rationales.jsonl", "rationales.csv"])
def test_a_file_in_no_known_format_is_refused_in_one_line(tmp_path, name):
    path = tmp_path / name
    frame = pl.DataFrame({"id": ["e1"], "model": ["m"], "answer": ["text"]})
    frame.write_csv(path) if name.endswith(".csv") else frame.write_ndjson(path)
    with pytest.raises(InputError) as info:
        load_rationales_file(path, EXAMPLES)
    message = str(info.value)
    assert "\n" not in message
    assert message == (f"{path}: not a rationale table (columns id, source, rationale), an lm-evaluation-harness "
                       "sample log (doc_id, doc, resps) or JSON lines with --rationale-field "
                       "(reading.rationale_field); found columns ['id', 'model', 'answer']")


def test_options_that_do_not_fit_the_format_are_refused(tmp_path):
    log_path = write_jsonl(tmp_path / LOG_NAME, [lm_eval_sample(0, {"id": "e1"}, "a")])
    with pytest.raises(InputError, match="column_map renames a table's columns; this file is read as an "
                                         "lm-evaluation-harness sample log"):
        load_rationales_file(log_path, EXAMPLES, column_map={"doc": "id"})
    table = write_jsonl(tmp_path / "r.jsonl", [{"id": "e1", "source": "m", "rationale": "a"}])
    with pytest.raises(InputError, match=r"id_field \(--id-field\) names a field of JSON records"):
        load_rationales_file(table, EXAMPLES, reading=RationaleReading(id_field="uid"))


# ---- read in batches (sharded scoring) ----------------------------------------------------------------------

def test_batches_read_a_log_as_the_whole_file_loader_does(tmp_path):
    path = _traced(tmp_path)
    reading = RationaleReading(think="both")
    batches = list(iter_rationale_batches(path, EXAMPLES, batch_rows=2, reading=reading))
    assert [b.height for b in batches] == [4, 1]  # two documents with traces, then one without
    assert pl.concat(batches).sort("source", "id").equals(
        load_rationales_file(path, EXAMPLES, reading=reading).sort("source", "id"))


def test_a_document_repeated_under_another_filter_in_a_later_batch_is_read_once(tmp_path):
    """lm-eval logs every document under its first filter, then every document under the next."""
    records = [lm_eval_sample(doc_id, {"id": id_}, text, filter_key=key) for key in ("strict-match", "flexible")
               for doc_id, (id_, text) in enumerate([("e1", "a"), ("e2", "b")])]
    path = write_jsonl(tmp_path / LOG_NAME, records)
    batches = list(iter_rationale_batches(path, EXAMPLES, batch_rows=1))
    assert [rows(b) for b in batches] == [[("e1", "esnli", "a", "entailment")], [("e2", "esnli", "b", "neutral")]]


def test_a_duplicate_across_batches_names_the_rows_of_the_file(tmp_path):
    records = [lm_eval_sample(0, {"id": "e1"}, "a"), lm_eval_sample(1, {"id": "e2"}, "b"),
               lm_eval_sample(2, {"id": "e1"}, "c")]
    path = write_jsonl(tmp_path / LOG_NAME, records)
    with pytest.raises(InputError, match=r"row 2, column 'id': duplicate id='e1', source='esnli' \(rows \[0, 2\]\)"):
        list(iter_rationale_batches(path, EXAMPLES, batch_rows=1))


def test_the_inbox_check_reads_a_dropped_log_as_score_does(tmp_path):
    """`larev rescore` checks each dropped file with tasks.data.check_rationale_file before scoring it."""
    from storage import ArtifactStore
    from storage.ref import ArtifactRef
    from tasks.data import check_rationale_file

    store = ArtifactStore(str(tmp_path / "store"))
    uri = store.write_parquet("examples.parquet", EXAMPLES.with_columns(split=pl.lit("test")))
    examples = ArtifactRef(uri=uri, key="examples.parquet", digest="0" * 64)
    path, both = str(_traced(tmp_path)), RationaleReading(think="both")
    assert check_rationale_file(store, examples, path, reading=both) == 5
    assert check_rationale_file(store, examples, path, shard_rows=2, reading=both) == 5
    dropped = write_jsonl(tmp_path / "dropped.jsonl", [{"id": "e1", "text": "x"}])
    with pytest.raises(InputError, match=r"^s3://bucket/inbox/dropped\.jsonl: not a rationale table .*found columns "
                                         r"\['id', 'text'\]$"):
        check_rationale_file(store, examples, str(dropped), shown_as="s3://bucket/inbox/dropped.jsonl")


# ---- the command line ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["score", "--run", "runs/x", "--rationales", LOG_NAME],
                                     ["rescore", "--run", "runs/x", "--inbox", "inbox"]])
def test_the_cli_sets_how_a_file_is_read(capsys, command):
    from flows.cli import main

    argv = [*command, "--rationale-field", "output.text", "--id-field", "meta.uid", "--source", "my-model",
            "--think", "both", "--print-params"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["reading"] == {
        "rationale_field": "output.text", "id_field": "meta.uid", "source": "my-model", "think": "both"}
    assert main([*command, "--print-params"]) == 0
    assert json.loads(capsys.readouterr().out)["reading"] == {
        "rationale_field": None, "id_field": "id", "source": None, "think": "strip"}
    with pytest.raises(SystemExit):
        main([*command, "--think", "keep", "--print-params"])
    assert "invalid choice: 'keep'" in capsys.readouterr().err
