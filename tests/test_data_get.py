"""`larev data get`: the published releases converted to larev's columns, the lock file, downloads, mirrors, the data
directory and the Makefile's defaults.

Every source file here is written by hand from the published formats (larev/data/published.py); no real row is
read except where a test computes the content digest of ../shared/data's files (skipped without them). Downloads
go to an HTTP server on the loopback address serving a temporary folder.
"""

from __future__ import annotations

import csv
import functools
import http.server
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from larev.data.fetch import LOCK_NAME, MIRROR_ENV, FetchError, get_dataset, read_lock
from larev.data.location import DATA_ENV, data_dir, data_file
from larev.data.published import (COMMITTED_DIGESTS, COSE_SCHEMA, DATASETS, ESNLI_SCHEMA, acceptability_schema,
                                  content_digest, convert_cose, convert_esnli_preprocessed, convert_esnli_raw,
                                  fine_grained_schema, parse_answer_choices)
from larev.errors import InputError

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
ESNLI_DIR = "dataset/eSNLI"

# ---- hand-written sources -------------------------------------------------------------------------------------

ESNLI_DEV = {  # e-SNLI's preprocessed release: parallel files, one pair per line, lower-cased and tokenized
    "s1.dev": "a man plays a red guitar on a stage .\ntwo dogs run across a snowy field .\n"
              "a woman reads a book on a bench .\na child kicks a ball .\n",
    "s2.dev": "a man is playing an instrument .\nthe dogs are asleep indoors .\na woman reads for a class .\n"
              "a kid is outside .\n",
    "labels.dev": "entailment\ncontradiction\nneutral\n-\n",
    # the preprocessing script writes no final newline; line 3 is an empty explanation
    "preproc1_expl_1.dev": "playing a guitar is playing an instrument .\ndogs that run are not asleep .\n\n"
                           "no gold label here .",
    "preproc1_expl_2.dev": "a guitar is an instrument .\nrunning is not sleeping ; they are outside .\n"
                           "not every reader is a student .\nstill none .",
    # the last explanation empty: the file ends with the newline written before it
    "preproc1_expl_3.dev": "a man playing a guitar plays an instrument .\nthe field is outdoors .\n"
                           "reading a book need not be for a class .\n",
}
ESNLI_TRAIN = {
    "s1.train": "a cook stirs a pot .\n",
    "s2.train": "someone is cooking .\n",
    "labels.train": "entailment\n",
    "preproc1_expl_1.train": "stirring a pot is cooking .\n",
}
ESNLI_DEV_EXPECTED = [
    ("esnli-dev-0", "a man plays a red guitar on a stage .", "a man is playing an instrument .", "entailment",
     "playing a guitar is playing an instrument .", "a guitar is an instrument .",
     "a man playing a guitar plays an instrument ."),
    ("esnli-dev-1", "two dogs run across a snowy field .", "the dogs are asleep indoors .", "contradiction",
     "dogs that run are not asleep .", "running is not sleeping ; they are outside .", "the field is outdoors ."),
    ("esnli-dev-2", "a woman reads a book on a bench .", "a woman reads for a class .", "neutral", "",
     "not every reader is a student .", "reading a book need not be for a class ."),
]

ESNLI_CSV_COLUMNS = ["pairID", "gold_label", "Sentence1", "Sentence2", "Explanation_1", "Sentence1_marked_1",
                     "Sentence2_marked_1", "Sentence1_Highlighted_1", "Sentence2_Highlighted_1"]
ESNLI_CSV_DEV = [
    {"pairID": "100001.jpg#0r1e", "gold_label": "entailment", "Sentence1": "A man plays a red guitar, on stage.",
     "Sentence2": "A man is playing an instrument.", "Explanation_1": "Playing a guitar is playing an instrument.",
     "Explanation_2": "A guitar is an instrument.", "Explanation_3": "Guitars are instruments."},
    {"pairID": "100002.jpg#0r1c", "gold_label": "contradiction", "Sentence1": "Two dogs run across a snowy field.",
     "Sentence2": "The dogs are asleep indoors.", "Explanation_1": "", "Explanation_2": "Running is not sleeping.",
     "Explanation_3": "The field is outdoors."},
]
ESNLI_CSV_TRAIN = [
    [{"pairID": "200001.jpg#0r1n", "gold_label": "neutral", "Sentence1": "A woman reads a book.",
      "Sentence2": "A woman reads for a class.", "Explanation_1": "Not every reader is a student."}],
    [{"pairID": "200002.jpg#0r1e", "gold_label": "entailment", "Sentence1": "A cook stirs a pot.",
      "Sentence2": "Someone is cooking.", "Explanation_1": "Stirring a pot is cooking."}],
]


def cqa_record(id_: str, stem: str, choices: list[str], key: str) -> dict:
    """A CommonsenseQA v1.0 question record (three choices, labels A-C)."""
    return {"answerKey": key, "id": id_,
            "question": {"question_concept": "thing", "stem": stem,
                         "choices": [{"label": "ABC"[i], "text": c} for i, c in enumerate(choices)]}}


COSE_QUESTIONS = [
    cqa_record("0a1b", "Where would you keep a plodax you bought for dinner?", ["kitchen", "garage", "attic"], "A"),
    cqa_record("0c2d", "What do people use a ladder for?", ["swimming", "reaching high places", "sleeping"], "B"),
    cqa_record("0e3f", "Who repairs a broken shelf?", ["a carpenter", "a florist", "a baker"], "A"),
]
COSE_EXPLANATIONS = [
    {"id": "0c2d", "explanation": {"open-ended": "a ladder lets  you reach up high", "selected": "ladder"}},
    {"id": "0a1b", "explanation": {"open-ended": "Food is kept in the kitchen. ", "selected": "dinner"}},
]

SNLI_ACCEPT_COLUMNS = ["HITId", "Input.id", "Input.premise", "Input.hypothesis", "Input.gold_label",
                       *(f"Input.{f}_{k}" for k in range(1, 6) for f in ("explanation", "source_sample", "nll")),
                       "Answer.acceptable"]


def accept_row(id_: str, task_inputs: dict, gold: str, explanations: list[str], nlls: list[str],
               acceptable: str) -> dict:
    """One annotator's acceptability row: five candidates (sample names in the published form), their NLLs."""
    samples = ["greedy", "sample_0", "sample_1", "sample_2", "sample_3"]
    row = {"HITId": f"hit-{id_}", "Input.id": id_, **task_inputs, "Input.gold_label": gold,
           "Answer.acceptable": acceptable}
    for k in range(5):
        row.update({f"Input.explanation_{k + 1}": explanations[k], f"Input.source_sample_{k + 1}": samples[k],
                    f"Input.nll_{k + 1}": nlls[k]})
    return row


SNLI_PAIR = {"Input.premise": "A man plays a guitar.", "Input.hypothesis": "A man makes music."}
SNLI_EXPLANATIONS = ["Playing a guitar makes music.", "A guitar is loud.", "Men like music.",
                     "Guitars have strings.", "Music comes from instruments."]
NLLS = ["0.52", "0.91", "1.3", "0.77", "1.05"]
SNLI_ACCEPT_TRAIN = [
    accept_row("p1#e", SNLI_PAIR, "TRUE", SNLI_EXPLANATIONS, NLLS, "1|5"),
    accept_row("p1#e", SNLI_PAIR, "TRUE", SNLI_EXPLANATIONS, ["0.52", "0.91", "1.3", "see note", "1.05"], "1"),
    accept_row("p1#e", SNLI_PAIR, "TRUE", SNLI_EXPLANATIONS, NLLS, ""),
]
SNLI_ACCEPT_TEST = [
    accept_row("p2#c", {"Input.premise": "Two dogs run.", "Input.hypothesis": "The dogs sleep."}, "FALSE",
               ["Running dogs are awake.", "Dogs bark.", "Sleep is rest.", "Snow is cold.", "Dogs can run."],
               NLLS, "1|3"),
    accept_row("p2#c", {"Input.premise": "Two dogs run.", "Input.hypothesis": "The dogs sleep."}, "FALSE",
               ["Running dogs are awake.", "Dogs bark.", "Sleep is rest.", "Snow is cold.", "Dogs can run."],
               NLLS, "2"),
]
CQA_CHOICES = "kitchen, garage, barn, vase, or wardrobe"
CQA_ACCEPT_TRAIN = [
    accept_row("q9", {"Input.question": "Where would you keep a plodax?", "Input.answer_choices": CQA_CHOICES},
               "kitchen", ["Food goes in the kitchen.", "Garages hold cars.", "Barns hold hay.", "Vases hold flowers.",
                           "Wardrobes hold clothes."], NLLS, "1"),
]
CQA_ACCEPT_TEST = [
    accept_row("q10", {"Input.question": "Where are coats kept?", "Input.answer_choices": CQA_CHOICES},
               "wardrobe", ["Coats are clothes.", "A", "B", "C", "Clothes go in a wardrobe."], NLLS, "5|1"),
]

FINE_COLUMNS = ["Input.id", "Input.question", "Input.answer_choices", "Input.gold_label", "Input.explanation",
                "Answer.new_info", "Answer.supports_label", "Answer.grammar", "Answer.generality_factuality",
                "Answer.amount_info", "Answer.acceptable"]


def fine_row(id_: str, explanation: str, new_info: str, supports: str, grammar: str, gen_fact: str,
             amount: str, acceptable: str | None) -> dict:
    """One annotator's fine-grained row of a CommonsenseQA explanation."""
    row = {"Input.id": id_, "Input.question": "Where are coats kept?", "Input.answer_choices": CQA_CHOICES,
           "Input.gold_label": "wardrobe", "Input.explanation": explanation, "Answer.new_info": new_info,
           "Answer.supports_label": supports, "Answer.grammar": grammar, "Answer.generality_factuality": gen_fact,
           "Answer.amount_info": amount}
    if acceptable is not None:
        row["Answer.acceptable"] = acceptable
    return row


CQA_FINE = {
    "cose": [fine_row("q10", "coats go in wardrobes", "1", "1", "1", "1", "0", "1"),
             fine_row("q10", "coats go in wardrobes", "-1", "", "-1", "-9", "", "-1"),
             fine_row("q10", "coats go in wardrobes", "1", "-1", "1", "0", "1", "1")],
    "ecqa": [fine_row("q10", "A wardrobe stores clothes.", "1", "1", "1", "-1", "-1", "1")],
    # as pandas writes a column with gaps (floats), and no acceptability column
    "gpt3_greedy": [fine_row("q10", "Coats are clothes kept in a wardrobe.", "1.0", "1.0", "1.0", "-9.0", "", None)],
}
SNLI_FINE = {
    "esnli": [{"Input.id": "p2#c", "Input.premise": "Two dogs run.", "Input.hypothesis": "The dogs sleep.",
               "Input.gold_label": "FALSE", "Input.explanation": "running dogs are not asleep",
               "Answer.new_info": "1", "Answer.supports_label": "1", "Answer.grammar": "1",
               "Answer.generality_factuality": "1", "Answer.amount_info": "0", "Answer.acceptable": "1"}],
    "gpt3_greedy": [{"Input.id": "p2#c", "Input.premise": "Two dogs run.", "Input.hypothesis": "The dogs sleep.",
                     "Input.gold_label": "FALSE", "Input.explanation": "Dogs that run are awake.",
                     "Answer.new_info": "-1", "Answer.supports_label": "", "Answer.grammar": "1",
                     "Answer.generality_factuality": "1", "Answer.amount_info": "", "Answer.acceptable": ""}],
}


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def esnli_release(root: Path, *, with_train: bool = False) -> Path:
    """The preprocessed e-SNLI files under their published paths."""
    for name, text in {**ESNLI_DEV, **(ESNLI_TRAIN if with_train else {})}.items():
        path = root / ESNLI_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def esnli_csv_release(root: Path) -> Path:
    dev_columns = ESNLI_CSV_COLUMNS + ["Explanation_2", "Explanation_3"]
    write_csv(root / "dataset" / "esnli_dev.csv", ESNLI_CSV_DEV, dev_columns)
    for part, rows in zip(("train_1", "train_2"), ESNLI_CSV_TRAIN):
        write_csv(root / "dataset" / f"esnli_{part}.csv", rows, ESNLI_CSV_COLUMNS)
    return root


def cose_release(root: Path) -> Path:
    write_jsonl(root / "data/v1.0/train_rand_split.jsonl", COSE_QUESTIONS)
    write_jsonl(root / "data/v1.0/cose_train_v1.0.jsonl", COSE_EXPLANATIONS)
    return root


def human_release(root: Path) -> Path:
    accept = root / "data/acceptability_annotations"
    write_csv(accept / "snli_train.csv", SNLI_ACCEPT_TRAIN, SNLI_ACCEPT_COLUMNS)
    write_csv(accept / "snli_test.csv", SNLI_ACCEPT_TEST, SNLI_ACCEPT_COLUMNS)
    cqa_columns = [c.replace("premise", "question").replace("hypothesis", "answer_choices")
                   for c in SNLI_ACCEPT_COLUMNS]
    write_csv(accept / "commonsenseqa_train.csv", CQA_ACCEPT_TRAIN, cqa_columns)
    write_csv(accept / "commonsenseqa_test.csv", CQA_ACCEPT_TEST, cqa_columns)
    fine = root / "data/fine_grained_absolute_quality_annotations"
    for source, rows in CQA_FINE.items():
        write_csv(fine / "commonsenseqa" / f"{source}.csv", rows,
                  FINE_COLUMNS if source != "gpt3_greedy" else FINE_COLUMNS[:-1])
    for source, rows in SNLI_FINE.items():
        write_csv(fine / "snli" / f"{source}.csv", rows)
    return root


def files_of(root: Path, names) -> dict[str, Path]:
    return {name: root / name for name in names}


# ---- e-SNLI -------------------------------------------------------------------------------------------------------

def test_esnli_preprocessed_dev_converts_line_by_line(tmp_path):
    root = esnli_release(tmp_path)
    frame, notes = convert_esnli_preprocessed(files_of(root, DATASETS["esnli"].outputs(only=["dev"])[0].files),
                                              "dev")
    assert frame.schema == pl.Schema(ESNLI_SCHEMA)
    assert frame.rows() == ESNLI_DEV_EXPECTED  # the '-' pair (line 4) is left out; its number is not reused
    assert notes == ["esnli dev: 1 pair(s) without a gold label ('-') left out"]


def test_esnli_train_has_one_explanation(tmp_path):
    root = esnli_release(tmp_path, with_train=True)
    frame, _ = convert_esnli_preprocessed(files_of(root, DATASETS["esnli"].outputs(only=["train"])[0].files),
                                          "train")
    assert frame.rows() == [("esnli-train-0", "a cook stirs a pot .", "someone is cooking .", "entailment",
                             "stirring a pot is cooking .", None, None)]


def test_esnli_preprocessed_output_has_the_shared_files_columns_and_types(tmp_path):
    """The converter's columns and dtypes are those of the file the committed results were computed on."""
    root = esnli_release(tmp_path)
    frame, _ = convert_esnli_preprocessed(files_of(root, DATASETS["esnli"].outputs(only=["dev"])[0].files),
                                          "dev")
    assert list(frame.schema.items()) == [("id", pl.String), ("premise", pl.String), ("hypothesis", pl.String),
                                          ("label", pl.String), ("rationale", pl.String),
                                          ("rationale_2", pl.String), ("rationale_3", pl.String)]
    shared = SHARED / "esnli" / "dev.parquet"
    if not shared.exists():
        pytest.skip("needs ../shared/data/esnli/dev.parquet")
    assert frame.schema == pl.read_parquet_schema(shared)


def test_esnli_raw_csvs_keep_the_original_text(tmp_path):
    root = esnli_csv_release(tmp_path)
    spec = DATASETS["esnli"]
    dev, _ = convert_esnli_raw(files_of(root, spec.outputs("raw", ["dev"])[0].files), "dev")
    assert dev.schema == pl.Schema(ESNLI_SCHEMA)
    assert dev.rows() == [
        ("esnli-dev-0", "A man plays a red guitar, on stage.", "A man is playing an instrument.", "entailment",
         "Playing a guitar is playing an instrument.", "A guitar is an instrument.", "Guitars are instruments."),
        ("esnli-dev-1", "Two dogs run across a snowy field.", "The dogs are asleep indoors.", "contradiction", "",
         "Running is not sleeping.", "The field is outdoors.")]
    train, _ = convert_esnli_raw(files_of(root, spec.outputs("raw", ["train"])[0].files), "train")
    assert train["id"].to_list() == ["esnli-train-0", "esnli-train-1"]  # train_1's rows, then train_2's
    assert train["rationale"].to_list() == ["Not every reader is a student.", "Stirring a pot is cooking."]
    assert train["rationale_2"].to_list() == [None, None]


def test_a_truncated_esnli_file_names_the_file_and_line(tmp_path):
    root = esnli_release(tmp_path)
    (root / ESNLI_DIR / "s2.dev").write_text("a man is playing an instrument .\nthe dogs are\n")  # cut short
    with pytest.raises(InputError) as err:
        get_dataset("esnli", tmp_path / "out", only=["dev"], source_dir=root, progress=False)
    message = str(err.value)
    assert message.startswith(f"{root / ESNLI_DIR / 's2.dev'}: row 2: 2 line(s) where {ESNLI_DIR}/s1.dev has 4")
    assert "from line 3 on" in message
    assert not (tmp_path / "out").exists()  # nothing written, not even the folder


def test_a_bad_esnli_label_names_the_file_and_line(tmp_path):
    root = esnli_release(tmp_path)
    (root / ESNLI_DIR / "labels.dev").write_text("entailment\ncontradiction\nmaybe\n-\n")
    with pytest.raises(InputError, match=rf"{ESNLI_DIR}/labels.dev: row 2: line 3: unknown label 'maybe'"):
        get_dataset("esnli", tmp_path / "out", only=["dev"], source_dir=root, progress=False)


def test_a_bad_esnli_csv_names_the_file_and_column(tmp_path):
    root = esnli_csv_release(tmp_path)
    write_csv(root / "dataset" / "esnli_dev.csv", [{k: v for k, v in r.items() if k != "Explanation_3"}
                                                   for r in ESNLI_CSV_DEV])
    with pytest.raises(InputError, match=r"esnli_dev.csv: column 'Explanation_3': missing column"):
        get_dataset("esnli", tmp_path / "out", form="raw", only=["dev"], source_dir=root, progress=False)


# ---- CoS-E ------------------------------------------------------------------------------------------------------

def test_cose_joins_questions_and_explanations(tmp_path):
    root = cose_release(tmp_path)
    frame, notes = convert_cose(files_of(root, DATASETS["cose"].outputs(only=["train"])[0].files), "train", "raw")
    assert frame.schema == pl.Schema(COSE_SCHEMA)
    # the questions' order; the raw explanation text as published (spaces kept); the answer's text as the label
    assert frame.rows() == [
        ("cose-0a1b", "Where would you keep a plodax you bought for dinner?", ["kitchen", "garage", "attic"],
         "kitchen", "Food is kept in the kitchen. "),
        ("cose-0c2d", "What do people use a ladder for?", ["swimming", "reaching high places", "sleeping"],
         "reaching high places", "a ladder lets  you reach up high")]
    assert notes == ["cose train: 1 question(s) without a CoS-E explanation left out"]
    if (SHARED / "cose" / "train.parquet").exists():
        assert frame.schema == pl.read_parquet_schema(SHARED / "cose" / "train.parquet")


def test_a_bad_cose_record_names_the_file_and_row(tmp_path):
    root = cose_release(tmp_path)
    broken = [*COSE_QUESTIONS[:2], {"id": "0e3f", "question": {"stem": "Who?"}, "answerKey": "A"}]
    write_jsonl(root / "data/v1.0/train_rand_split.jsonl", broken)
    with pytest.raises(InputError, match=r"train_rand_split.jsonl: row 2: not a CommonsenseQA question record"):
        get_dataset("cose", tmp_path / "out", only=["train"], source_dir=root, progress=False)
    cose_release(root)
    (root / "data/v1.0/cose_train_v1.0.jsonl").write_text(json.dumps(COSE_EXPLANATIONS[0]) + '\n{"id": "0a1b", \n')
    with pytest.raises(InputError, match=r"cose_train_v1.0.jsonl: row 1: malformed JSON on line 2"):
        get_dataset("cose", tmp_path / "out", only=["train"], source_dir=root, progress=False)
    write_jsonl(root / "data/v1.0/cose_train_v1.0.jsonl", [{"id": "zz", "explanation": {"open-ended": "x"}}])
    with pytest.raises(InputError, match=r"row 0, column 'id': id 'zz' is not a question of"):
        get_dataset("cose", tmp_path / "out", only=["train"], source_dir=root, progress=False)


# ---- the human judgements -------------------------------------------------------------------------------------

def test_acceptability_one_row_per_candidate_and_annotator(tmp_path):
    root = human_release(tmp_path)
    spec = DATASETS["human"]
    (snli,) = spec.outputs(only=["snli_acceptability"])
    frame, notes = snli.convert(files_of(root, snli.files))
    assert frame.schema == pl.Schema(acceptability_schema("nli"))
    assert frame.height == (3 + 2) * 5
    assert set(frame["id"]) == {"nli-p1#e", "nli-p2#c"}  # train instances, then test instances
    first = frame.filter(pl.col("id") == "nli-p1#e")
    assert first.select("annotator", "candidate", "acceptable").rows()[:6] == [
        (0, 1, 1), (0, 2, 0), (0, 3, 0), (0, 4, 0), (0, 5, 1), (1, 1, 1)]
    assert first.filter(pl.col("annotator") == 2)["acceptable"].to_list() == [0] * 5  # '' accepts none
    assert first["sample"].to_list()[:5] == ["greedy", "0", "1", "2", "3"]
    assert first["rationale"].to_list()[:5] == SNLI_EXPLANATIONS
    assert set(first["premise"]) == {"A man plays a guitar."} and set(first["label"]) == {"entailment"}
    # the second annotator's NLL cell holds text: the explanation's NLL comes from the others' rows
    assert first.filter(pl.col("candidate") == 4)["gpt3_nll"].to_list() == [0.77, 0.77, 0.77]
    assert notes == ["1 candidate row(s) whose NLL cell was not a number took it from another annotator's row of "
                     "the same instance"]
    second = frame.filter(pl.col("id") == "nli-p2#c")
    assert set(second["label"]) == {"contradiction"} and second["annotator"].unique().sort().to_list() == [0, 1]
    if (SHARED / "human" / "snli_acceptability.parquet").exists():
        assert frame.schema == pl.read_parquet_schema(SHARED / "human" / "snli_acceptability.parquet")


def test_cqa_acceptability_parses_choices_and_answers(tmp_path):
    root = human_release(tmp_path)
    (cqa,) = DATASETS["human"].outputs(only=["cqa_acceptability"])
    frame, _ = cqa.convert(files_of(root, cqa.files))
    assert frame.schema == pl.Schema(acceptability_schema("qa"))
    assert frame["choices"][0].to_list() == ["kitchen", "garage", "barn", "vase", "wardrobe"]
    assert frame.filter(pl.col("id") == "qa-q10").select("candidate", "acceptable").rows() == [
        (1, 1), (2, 0), (3, 0), (4, 0), (5, 1)]
    assert set(frame.filter(pl.col("id") == "qa-q10")["label"]) == {"wardrobe"}
    if (SHARED / "human" / "cqa_acceptability.parquet").exists():
        assert frame.schema == pl.read_parquet_schema(SHARED / "human" / "cqa_acceptability.parquet")


def test_fine_grained_judgements_as_the_annotators_chose_them(tmp_path):
    root = human_release(tmp_path)
    (cqa,) = DATASETS["human"].outputs(only=["cqa_fine_grained"])
    frame, _ = cqa.convert(files_of(root, cqa.files))
    assert frame.schema == pl.Schema(fine_grained_schema("qa"))
    judgements = ["source", "annotator", "new_info", "supports_label", "grammar", "general", "factual", "amount_info",
                  "acceptable"]
    assert frame.select(judgements).rows() == [
        ("cose", 0, 1, 1, 1, 1, 1, 0, 1),
        ("cose", 1, -1, None, -1, -1, None, None, -1),  # -9: needs more information; factuality not judged
        ("cose", 2, 1, -1, 1, 1, 0, 1, 1),
        ("ecqa", 0, 1, 1, 1, 1, -1, -1, 1),
        ("gpt3_greedy", 0, 1, 1, 1, -1, None, None, None)]  # '1.0' read as 1; no acceptability column
    assert set(frame["id"]) == {"qa-q10"} and set(frame["label"]) == {"wardrobe"}
    if (SHARED / "human" / "cqa_fine_grained.parquet").exists():
        assert frame.schema == pl.read_parquet_schema(SHARED / "human" / "cqa_fine_grained.parquet")
    (snli,) = DATASETS["human"].outputs(only=["snli_fine_grained"])
    frame, _ = snli.convert(files_of(root, snli.files))
    assert frame.schema == pl.Schema(fine_grained_schema("nli"))
    assert frame.select("id", "label", "source", "new_info", "supports_label", "acceptable").rows() == [
        ("nli-p2#c", "contradiction", "esnli", 1, 1, 1), ("nli-p2#c", "contradiction", "gpt3_greedy", -1, None, None)]


def test_bad_human_files_name_the_file_row_and_column(tmp_path):
    root = human_release(tmp_path)
    accept = root / "data/acceptability_annotations"
    rows = [dict(r) for r in SNLI_ACCEPT_TRAIN]
    rows[1]["Answer.acceptable"] = "1|seven"
    write_csv(accept / "snli_train.csv", rows, SNLI_ACCEPT_COLUMNS)
    with pytest.raises(InputError, match=r"snli_train.csv: row 1, column 'Answer.acceptable': '1\|seven'"):
        get_dataset("human", tmp_path / "out", only=["snli_acceptability"], source_dir=root, progress=False)
    rows = [dict(r) for r in SNLI_ACCEPT_TRAIN]
    for row in rows:
        row["Input.nll_2"] = "n/a"
    write_csv(accept / "snli_train.csv", rows, SNLI_ACCEPT_COLUMNS)
    with pytest.raises(InputError, match=r"snli_train.csv: row 0, column 'Input.nll_2': the NLL 'n/a' is not a number"):
        get_dataset("human", tmp_path / "out", only=["snli_acceptability"], source_dir=root, progress=False)
    write_csv(accept / "snli_train.csv", [{**SNLI_ACCEPT_TRAIN[0], "Input.gold_label": "maybe"}], SNLI_ACCEPT_COLUMNS)
    with pytest.raises(InputError, match=r"snli_train.csv: row 0, column 'Input.gold_label': unknown label 'maybe'"):
        get_dataset("human", tmp_path / "out", only=["snli_acceptability"], source_dir=root, progress=False)
    fine = root / "data/fine_grained_absolute_quality_annotations/commonsenseqa/ecqa.csv"
    write_csv(fine, [{**CQA_FINE["ecqa"][0], "Answer.amount_info": "2"}], FINE_COLUMNS)
    with pytest.raises(InputError, match=r"ecqa.csv: row 0, column 'Answer.amount_info': '2' is not one of"):
        get_dataset("human", tmp_path / "out", only=["cqa_fine_grained"], source_dir=root, progress=False)
    write_csv(fine, [{**CQA_FINE["ecqa"][0], "Input.gold_label": "cellar"}], FINE_COLUMNS)
    with pytest.raises(InputError, match=r"column 'Input.gold_label': the gold label 'cellar' is not one of"):
        get_dataset("human", tmp_path / "out", only=["cqa_fine_grained"], source_dir=root, progress=False)


def test_answer_choices_as_the_annotation_files_write_them():
    assert parse_answer_choices("a, b, or c") == ["a", "b", "c"]
    assert parse_answer_choices("bank or river") == ["bank", "river"]
    assert parse_answer_choices('["x", "y, z"]') == ["x", "y, z"]


# ---- getting: the lock file, from a folder, from a server -------------------------------------------------------

def test_get_from_a_folder_writes_the_data_and_the_lock(tmp_path):
    root = human_release(cose_release(esnli_release(tmp_path / "src", with_train=True)))
    out = tmp_path / "data"
    result = get_dataset("esnli", out, only=["train", "dev"], source_dir=root, progress=False)
    assert [w.path for w in result.written] == [out / "esnli" / "train.parquet", out / "esnli" / "dev.parquet"]
    assert pl.read_parquet(out / "esnli" / "dev.parquet").rows() == ESNLI_DEV_EXPECTED
    assert result.written[1].digest == content_digest(pl.read_parquet(out / "esnli" / "dev.parquet"))
    assert result.written[1].matches_committed is False  # hand-written rows are not e-SNLI's
    assert result.written[0].matches_committed is None  # no committed train file
    lock = read_lock(out / LOCK_NAME)
    assert set(lock) == {f"esnli/{ESNLI_DIR}/{name}" for name in [*ESNLI_DEV, *ESNLI_TRAIN]}
    entry = lock[f"esnli/{ESNLI_DIR}/s1.dev"]
    assert entry["url"] == "https://raw.githubusercontent.com/OanaMariaCamburu/e-SNLI/master/dataset/eSNLI/s1.dev"
    assert entry["bytes"] == len(ESNLI_DEV["s1.dev"])
    get_dataset("cose", out, only=["train"], source_dir=root, progress=False)
    result = get_dataset("human", out, source_dir=root, progress=False)
    assert sorted(p.name for p in (out / "human").iterdir()) == ["cqa_acceptability.parquet",
                                                                 "cqa_fine_grained.parquet",
                                                                 "snli_acceptability.parquet",
                                                                 "snli_fine_grained.parquet"]
    assert {k.split("/")[0] for k in read_lock(out / LOCK_NAME)} == {"esnli", "cose", "human"}  # one lock, kept
    assert not list(out.glob(".*"))  # no temporary folder or part file left


def test_a_changed_source_is_refused_unless_accepted(tmp_path):
    root = esnli_release(tmp_path / "src")
    out = tmp_path / "data"
    get_dataset("esnli", out, only=["dev"], source_dir=root, progress=False)
    before = (out / "esnli" / "dev.parquet").read_bytes()
    lock_before = (out / LOCK_NAME).read_text()
    changed = ESNLI_DEV["s2.dev"].replace("asleep", "sleeping")
    (root / ESNLI_DIR / "s2.dev").write_text(changed)
    with pytest.raises(FetchError, match=r"s2.dev: sha256 \w+ differs from the one .*sources.lock.json recorded for "
                                         r"esnli/dataset/eSNLI/s2.dev .*--accept-changed"):
        get_dataset("esnli", out, only=["dev"], source_dir=root, progress=False)
    assert (out / "esnli" / "dev.parquet").read_bytes() == before and (out / LOCK_NAME).read_text() == lock_before
    get_dataset("esnli", out, only=["dev"], source_dir=root, accept_changed=True, progress=False)
    assert pl.read_parquet(out / "esnli" / "dev.parquet")["hypothesis"][1] == "the dogs are sleeping indoors ."
    assert read_lock(out / LOCK_NAME)[f"esnli/{ESNLI_DIR}/s2.dev"]["bytes"] == len(changed)
    get_dataset("esnli", out, only=["dev"], source_dir=root, progress=False)  # the new file is the locked one now


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


class _ShortHandler(_QuietHandler):
    """Promises more bytes than it sends, then closes: a download cut short."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"entailment\n")
        self.close_connection = True


@pytest.fixture
def serve(tmp_path) -> Iterator:
    """serve(folder, handler=...) -> the base URL of an HTTP server on 127.0.0.1 serving the folder."""
    servers = []

    def start(folder: Path, handler=_QuietHandler) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_get_downloads_from_a_mirror(tmp_path, serve):
    mirror = tmp_path / "mirror"
    esnli_release(mirror / "esnli")
    url = serve(mirror)
    out = tmp_path / "data"
    result = get_dataset("esnli", out, only=["dev"], mirror=url + "/", progress=False)
    assert result.sources[0] == f"{url}/esnli/{ESNLI_DIR}/s1.dev"
    assert pl.read_parquet(out / "esnli" / "dev.parquet").rows() == ESNLI_DEV_EXPECTED
    # the downloads are kept as published, and `--from` converts them again
    assert result.raw_dir == out / "raw" / "esnli"
    assert (out / "raw" / "esnli" / ESNLI_DIR / "labels.dev").read_text() == ESNLI_DEV["labels.dev"]
    again = get_dataset("esnli", tmp_path / "again", only=["dev"], source_dir=out / "raw", progress=False)
    assert again.written[0].digest == result.written[0].digest
    # the mirror serves a changed file: refused, nothing moved
    (mirror / "esnli" / ESNLI_DIR / "labels.dev").write_text("neutral\ncontradiction\nneutral\n-\n")
    with pytest.raises(FetchError, match=rf"^{re.escape(url)}/esnli/{ESNLI_DIR}/labels.dev: sha256 \w+ differs"):
        get_dataset("esnli", out, only=["dev"], mirror=url, progress=False)
    assert pl.read_parquet(out / "esnli" / "dev.parquet").rows() == ESNLI_DEV_EXPECTED
    assert (out / "raw" / "esnli" / ESNLI_DIR / "labels.dev").read_text() == ESNLI_DEV["labels.dev"]
    assert not list(out.glob(".*"))


def test_the_mirror_variable_is_read(tmp_path, serve, monkeypatch):
    mirror = tmp_path / "mirror"
    cose_release(mirror / "cose")
    monkeypatch.setenv(MIRROR_ENV, serve(mirror))
    result = get_dataset("cose", tmp_path / "data", only=["train"], progress=False)
    assert pl.read_parquet(tmp_path / "data" / "cose" / "train.parquet").height == 2
    assert result.sources[0].startswith("http://127.0.0.1:")


def test_an_unreachable_source_names_the_url_and_writes_nothing(tmp_path, serve):
    mirror = tmp_path / "mirror"
    esnli_release(mirror / "esnli")  # dev only: train's files are missing, a 404
    url = serve(mirror)
    out = tmp_path / "data"
    get_dataset("esnli", out, only=["dev"], mirror=url, progress=False)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    lock_before = (out / LOCK_NAME).read_text()
    with pytest.raises(FetchError, match=rf"could not download {re.escape(url)}/esnli/{ESNLI_DIR}/s1.train: HTTP 404"):
        get_dataset("esnli", out, mirror=url, progress=False)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # no part file, no test.parquet, no raw
    assert (out / LOCK_NAME).read_text() == lock_before
    with pytest.raises(FetchError, match=rf"could not download {re.escape(url)}/human/data/"):
        get_dataset("human", tmp_path / "fresh", mirror=url, progress=False)
    assert not (tmp_path / "fresh").exists()
    with pytest.raises(FetchError, match=r"could not reach http://127.0.0.1:9/esnli/dataset/eSNLI/s1.dev \("):
        get_dataset("esnli", tmp_path / "fresh", only=["dev"], mirror="http://127.0.0.1:9", progress=False)


def test_a_download_cut_short_is_an_error_and_leaves_no_file(tmp_path, serve):
    url = serve(tmp_path, handler=_ShortHandler)
    out = tmp_path / "data"
    with pytest.raises(FetchError, match=rf"{re.escape(url)}/esnli/{ESNLI_DIR}/s1.dev"):
        get_dataset("esnli", out, only=["dev"], mirror=url, progress=False)
    assert not out.exists()


def test_a_bad_served_file_leaves_the_folder_as_it_was(tmp_path, serve):
    mirror = tmp_path / "mirror"
    esnli_release(mirror / "esnli")
    (mirror / "esnli" / ESNLI_DIR / "s1.dev").write_text("only one line .\n")
    out = tmp_path / "data"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="s2.dev"):
        get_dataset("esnli", out, only=["dev"], mirror=serve(mirror), progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_unknown_names_forms_and_outputs_are_refused(tmp_path):
    with pytest.raises(InputError, match="unknown dataset 'snli'; known: esnli, cose, human"):
        get_dataset("snli", tmp_path)
    with pytest.raises(InputError, match="esnli has no form 'tokens'"):
        get_dataset("esnli", tmp_path, form="tokens")
    with pytest.raises(InputError, match=r"cose has no output \['test'\]"):
        get_dataset("cose", tmp_path, only=["test"])
    with pytest.raises(InputError, match=r"not found; --from expects the published files"):
        get_dataset("esnli", tmp_path / "out", only=["dev"], source_dir=tmp_path / "nowhere")


# ---- the command line ---------------------------------------------------------------------------------------------

def test_larev_data_get_says_where_the_files_went(tmp_path, capsys):
    from flows.cli import main

    root = esnli_release(tmp_path / "src")
    out = tmp_path / "data"
    assert main(["data", "get", "esnli", "--only", "dev", "--from", str(root), "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / 'esnli' / 'dev.parquet'}: 3 rows" in printed
    assert "NOT the rows of the committed results' file" in printed
    assert f"LAREV_DATA={out} make bench-quality" in printed
    assert main(["data", "get", "esnli", "--only", "dev", "--from", str(tmp_path / "none"), "--out",
                 str(out)]) == 2
    assert "error: " in capsys.readouterr().err


# ---- where the data is ------------------------------------------------------------------------------------------

def test_data_dir_prefers_larev_data_then_the_shared_copy_then_data(tmp_path):
    assert data_dir({DATA_ENV: str(tmp_path / "mine")}, cwd=tmp_path) == tmp_path / "mine"
    repo = tmp_path / "work" / "repo"
    repo.mkdir(parents=True)
    assert data_dir({}, cwd=repo) == Path("data")  # a user's clone: where `larev data get` writes by default
    (tmp_path / "work" / "shared" / "data").mkdir(parents=True)
    assert data_dir({}, cwd=repo) == Path("../shared/data")
    assert data_dir({DATA_ENV: "/elsewhere"}, cwd=repo) == Path("/elsewhere")
    assert data_dir({DATA_ENV: " "}, cwd=repo) == Path("../shared/data")  # empty means unset
    assert data_file("esnli", "dev.parquet", environ={DATA_ENV: "/d"}) == Path("/d/esnli/dev.parquet")


def _make_dry_run(*args: str, cwd: Path = REPO, env: dict | None = None) -> str:
    if shutil.which("make") is None:
        pytest.skip("needs make")
    result = subprocess.run(["make", "-n", *args], cwd=cwd, capture_output=True, text=True, check=True,
                            env=env)
    return result.stdout


def test_the_makefile_reads_larev_data(tmp_path, monkeypatch):
    printed = _make_dry_run("bench-quality", "LAREV_DATA=/some/dir")
    assert "--train /some/dir/esnli/dev.parquet --train-rows :8000 --test /some/dir/esnli/dev.parquet" in printed
    monkeypatch.setenv(DATA_ENV, "/from/env")
    printed = _make_dry_run("bench-cose", "bench-human")
    assert "--train /from/env/cose/train.parquet" in printed
    assert "--human /from/env/human/cqa_fine_grained.parquet --human /from/env/human/cqa_acceptability.parquet" \
        in printed
    assert "--annotations /from/env/human/snli_acceptability.parquet" in printed
    assert "larev data get esnli --only dev --out /from/env" in _make_dry_run("data")
    # a clone without ../shared/data: the folder `larev data get` writes by default
    monkeypatch.delenv(DATA_ENV)
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(REPO / name, clone / name)
    printed = _make_dry_run("bench-quality", "data", cwd=clone)
    assert "--train data/esnli/dev.parquet" in printed
    assert "larev data get human --out data" in printed


# ---- the rows the committed results were computed on --------------------------------------------------------

def documented_digests() -> dict[str, str]:
    """The content digests docs/data.md lists: `| FILE | HEX |` rows of its table."""
    text = (REPO / "docs" / "data.md").read_text()
    return dict(re.findall(r"^\| `([a-z]+/[a-z_]+\.parquet)` \| `([0-9a-f]{64})` \|", text, re.M))


def test_the_documented_digests_are_the_codes():
    assert documented_digests() == COMMITTED_DIGESTS
    assert "esnli/dev.parquet" in COMMITTED_DIGESTS


@pytest.mark.parametrize("name", sorted(COMMITTED_DIGESTS))
def test_the_shared_files_have_the_documented_content(name):
    """The digest of each file the committed results were computed on, taken from the file itself."""
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"needs ../shared/data/{name}")
    assert content_digest(pl.read_parquet(path)) == documented_digests()[name]


def test_the_content_digest_reads_content_not_bytes(tmp_path):
    frame = pl.DataFrame({"id": ["a", "b"], "choices": [["x", "y"], None], "n": [1.5, None]})
    frame.write_parquet(tmp_path / "zstd.parquet")
    frame.write_parquet(tmp_path / "plain.parquet", compression="uncompressed", statistics=False)
    assert (tmp_path / "zstd.parquet").read_bytes() != (tmp_path / "plain.parquet").read_bytes()
    digests = {content_digest(pl.read_parquet(tmp_path / f)) for f in ("zstd.parquet", "plain.parquet")}
    assert digests == {content_digest(frame)}
    assert content_digest(frame.reverse()) != content_digest(frame)  # row order counts
    assert content_digest(frame.rename({"n": "m"})) != content_digest(frame)
