"""The real datasets as their authors publish them, and their conversion to the files larev's benchmarks read.

Three releases, each a `Dataset`: where its files are published (a URL base) and, per form, the outputs it makes
(`Output`: an output file, the published files it reads, relative to the base, and the converter).

esnli   OanaMariaCamburu/e-SNLI. Form `preprocessed` (default; what ../shared/data/esnli/dev.parquet and every
        committed e-SNLI result were built from): `dataset/eSNLI/{s1,s2,labels,preproc1_expl_1}.SPLIT` (dev and
        test also `preproc1_expl_2`, `_3`), one pair per line, lower-cased and tokenized. Form `raw`: the CSVs
        `dataset/esnli_{train_1,train_2,dev,test}.csv` (pairID, gold_label, Sentence1, Sentence2, Explanation_1..3),
        the original text. Outputs train / dev / test with the columns of `ESNLI_SCHEMA`; ids `esnli-SPLIT-N`, N the
        0-based line (raw: CSV row, train_1's rows then train_2's); pairs without a gold label ('-') are left out,
        their N unused.
cose    salesforce/cos-e, `data/v1.0/`: CommonsenseQA v1.0's `{train,dev}_rand_split.jsonl` (3 choices) joined on
        `id` with `cose_{train,dev}_v1.0.jsonl` (`explanation.open-ended`; form `raw`, the default, the
        unprocessed explanations the paper used) or `cose_{train,dev}_v1.0_processed.jsonl` (form `processed`).
        Outputs train / dev with the columns of `COSE_SCHEMA`; ids `cose-ID`, in the questions' order.
human   allenai/few_shot_explanations, `data/` (Wiegreffe et al., 2022): the acceptability CSVs (one row per
        annotator and instance, five candidate explanations) and the fine-grained CSVs (one row per annotator,
        instance and explanation source). Outputs `snli_acceptability`, `cqa_acceptability` (train then test
        instances), `cqa_fine_grained` (cose, ecqa, gpt3_greedy) and `snli_fine_grained` (esnli, gpt3_greedy): one
        row per item and annotator, columns of `acceptability_schema` / `fine_grained_schema`, ids `nli-` or `qa-`
        followed by `Input.id`, annotators numbered 0, 1, ... in the order of an instance's rows.

`content_digest` is the sha256 of a frame's content (its column names and types, then its rows in order as JSON),
independent of how Parquet wrote it; `COMMITTED_DIGESTS` holds the digests of the files the committed results were
computed on (../shared/data), so a converted file can be checked row for row against them.

Every converter raises `InputError` naming the published file, and the row (CSV, JSON lines) or 0-based line (text
files) and column of the first thing that does not fit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from larev.data.files import decode_utf8, read_json_records, read_table
from larev.errors import InputError

log = logging.getLogger(__name__)

#: published relative path -> where that file is on this machine
Files = Mapping[str, Path]
#: a converter: the files an output reads -> (the output frame, notes on what it left out)
Converter = Callable[[Files], tuple[pl.DataFrame, list[str]]]

ESNLI_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String, "premise": pl.String, "hypothesis": pl.String, "label": pl.String, "rationale": pl.String,
    "rationale_2": pl.String, "rationale_3": pl.String,
}
COSE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String, "question": pl.String, "choices": pl.List(pl.String), "label": pl.String, "rationale": pl.String,
}
_TASK_SCHEMA: dict[str, dict[str, pl.DataType]] = {
    "nli": {"premise": pl.String, "hypothesis": pl.String},
    "qa": {"question": pl.String, "choices": pl.List(pl.String)},
}
FINE_GRAINED_JUDGEMENTS = ("new_info", "supports_label", "grammar", "general", "factual", "amount_info", "acceptable")


def acceptability_schema(task: str) -> dict[str, pl.DataType]:
    """Columns of an acceptability file: one row per (instance, candidate explanation, annotator)."""
    return {"id": pl.String, **_TASK_SCHEMA[task], "label": pl.String, "candidate": pl.Int64, "sample": pl.String,
            "rationale": pl.String, "gpt3_nll": pl.Float64, "annotator": pl.Int64, "acceptable": pl.Int64}


def fine_grained_schema(task: str) -> dict[str, pl.DataType]:
    """Columns of a fine-grained file: one row per (instance, explanation source, annotator)."""
    return {"id": pl.String, **_TASK_SCHEMA[task], "label": pl.String, "source": pl.String, "rationale": pl.String,
            "annotator": pl.Int64, **dict.fromkeys(FINE_GRAINED_JUDGEMENTS, pl.Int64)}


# ---- the content digest ---------------------------------------------------------------------------------------

def _type_name(dtype: pl.DataType) -> str:
    """A dtype's name in the digest, fixed here so that a polars release renaming its types changes no digest."""
    if isinstance(dtype, pl.List):
        return f"list<{_type_name(dtype.inner)}>"
    names = {pl.String: "string", pl.Int64: "int64", pl.Int32: "int32", pl.Float64: "float64", pl.Boolean: "bool"}
    for known, name in names.items():
        if dtype == known:
            return name
    return str(dtype).lower()


def content_digest(frame: pl.DataFrame) -> str:
    """sha256 of a frame's content: one JSON line of its [column, type] pairs, then one line per row, in order, of
    the row as a JSON object (keys sorted, UTF-8, no spaces; floats as Python writes them). Row order counts: the
    benchmarks slice files by position (`--train-rows :8000`)."""
    h = hashlib.sha256()
    header = [[name, _type_name(dtype)] for name, dtype in frame.schema.items()]
    h.update(json.dumps(header, separators=(",", ":")).encode() + b"\n")
    for row in frame.iter_rows(named=True):
        h.update(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    return h.hexdigest()


def file_content_digest(path: str | Path) -> str:
    """`content_digest` of a Parquet file's frame."""
    return content_digest(pl.read_parquet(path))


#: content digests of the files every committed result was computed on (../shared/data; docs/data.md lists them)
COMMITTED_DIGESTS: dict[str, str] = {
    "esnli/dev.parquet": "2b789fffb990bcd90bb042f84e0048c0c22460c18f136ed0002ec544913b09c5",
    "cose/train.parquet": "76c0e7d17145adaad1b2050be1863cea40a2562fabf7c18e5b6ca1a10bbba3bd",
    "human/cqa_acceptability.parquet": "272528c52a279982cfea152917b54dae364309d1c3926d6d9e0a4aa7295b6031",
    "human/cqa_fine_grained.parquet": "333eec545da42ded04902a06de2d706ba2bcbefff30014e87466d1d88fcbdee5",
    "human/snli_acceptability.parquet": "169705d4e1f1360af840d4f7265f1e1f00692156653ad4b34300f41707163524",
}


# ---- reading published files ------------------------------------------------------------------------------------

def _text_lines(path: Path, *, name: str) -> tuple[list[str], bool]:
    """A text file's lines, each stripped of surrounding whitespace, and whether the file ends with a newline (the
    empty piece after it is not a line)."""
    text = decode_utf8(path.read_bytes(), file=name)
    ends_with_newline = text.endswith("\n")
    pieces = text.split("\n")
    if ends_with_newline:
        pieces.pop()
    return [p.strip() for p in pieces], ends_with_newline


def _aligned_lines(files: Files, names: list[str]) -> list[list[str]]:
    """The lines of parallel text files (line i of each is pair i), the first file's count the reference. A file
    written without a final newline whose last line is empty reads one line short; that line is restored. Any
    other difference in length is a truncated or mismatched file."""
    first, *_ = names
    reference, _ = _text_lines(files[first], name=first)
    if not reference:
        raise InputError("the file has no lines", file=first)
    out = [reference]
    for name in names[1:]:
        lines, ends_with_newline = _text_lines(files[name], name=name)
        if len(lines) == len(reference) - 1 and ends_with_newline:
            lines.append("")
        if len(lines) != len(reference):
            at = min(len(lines), len(reference))
            raise InputError(f"{len(lines)} line(s) where {first} has {len(reference)}: the files disagree from line "
                             f"{at + 1} on (a truncated or mismatched download?)", file=name, row=at)
        out.append(lines)
    return out


def _csv(files: Files, name: str, required: tuple[str, ...]) -> pl.DataFrame:
    """A published CSV as strings (ids keep their zeros), with its required columns checked."""
    frame = read_table(files[name])
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {missing}; the file has {frame.columns}", file=name, column=missing[0])
    return frame


def _jsonl(files: Files, name: str) -> list[dict]:
    records = read_json_records(files[name])
    if not records:
        raise InputError("the file has no records", file=name)
    return records


# ---- e-SNLI -----------------------------------------------------------------------------------------------------

_ESNLI_DIR = "dataset/eSNLI"
_NO_GOLD_LABEL = "-"  # SNLI's mark of a pair whose annotators did not agree


def _esnli_label(value: str | None, *, file: str, row: int, column: str | None, where: str) -> str | None:
    """An e-SNLI gold label, None for a pair without one ('-'); anything else is an InputError."""
    label = (value or "").strip().lower()
    if label in ("entailment", "neutral", "contradiction"):
        return label
    if label == _NO_GOLD_LABEL:
        return None
    raise InputError(f"{where}unknown label {value!r}; expected entailment, neutral, contradiction (or '-', no gold "
                     "label)", file=file, row=row, column=column)


def _esnli_frame(rows: list[tuple], skipped: int, split: str, file: str) -> tuple[pl.DataFrame, list[str]]:
    if not rows:
        raise InputError("no pair with a gold label", file=file)
    frame = pl.DataFrame(rows, schema=ESNLI_SCHEMA, orient="row")
    notes = [f"esnli {split}: {skipped} pair(s) without a gold label ('-') left out"] if skipped else []
    return frame, notes


def esnli_preprocessed_files(split: str) -> tuple[str, ...]:
    """The published text files of one split: premise, hypothesis, label, then the explanations."""
    n_expl = 1 if split == "train" else 3
    names = ["s1", "s2", "labels", *(f"preproc1_expl_{k}" for k in range(1, n_expl + 1))]
    return tuple(f"{_ESNLI_DIR}/{name}.{split}" for name in names)


def convert_esnli_preprocessed(files: Files, split: str) -> tuple[pl.DataFrame, list[str]]:
    """One split of e-SNLI's preprocessed release (parallel text files, one pair per line) in `ESNLI_SCHEMA`: id
    `esnli-SPLIT-N` (N the 0-based line), texts as published (lower-cased, tokenized; outer whitespace stripped),
    an empty explanation line as '' (train has one explanation: rationale_2 and _3 null)."""
    names = list(esnli_preprocessed_files(split))
    s1, s2, labels, *explanations = _aligned_lines(files, names)
    rows, skipped = [], 0
    for i, (premise, hypothesis, raw_label) in enumerate(zip(s1, s2, labels)):
        label = _esnli_label(raw_label, file=names[2], row=i, column=None, where=f"line {i + 1}: ")
        if label is None:
            skipped += 1
            continue
        for name, text in ((names[0], premise), (names[1], hypothesis)):
            if not text:
                raise InputError(f"line {i + 1} is empty: every pair needs a premise and a hypothesis", file=name,
                                 row=i)
        rationales = [lines[i] for lines in explanations] + [None] * (3 - len(explanations))
        rows.append((f"esnli-{split}-{i}", premise, hypothesis, label, *rationales))
    return _esnli_frame(rows, skipped, split, names[0])


def esnli_raw_files(split: str) -> tuple[str, ...]:
    """The published CSVs of one split (train comes in two parts, to be read one after the other)."""
    parts = ("train_1", "train_2") if split == "train" else (split,)
    return tuple(f"dataset/esnli_{part}.csv" for part in parts)


def convert_esnli_raw(files: Files, split: str) -> tuple[pl.DataFrame, list[str]]:
    """One split of e-SNLI's CSV release (original text) in `ESNLI_SCHEMA`: id `esnli-SPLIT-N`, N the 0-based CSV
    row counted across the split's files in order; an empty explanation as ''."""
    n_expl = 1 if split == "train" else 3
    expl_columns = tuple(f"Explanation_{k}" for k in range(1, n_expl + 1))
    rows, skipped, n = [], 0, 0
    names = list(esnli_raw_files(split))
    for name in names:
        frame = _csv(files, name, ("gold_label", "Sentence1", "Sentence2", *expl_columns))
        for row_index, row in enumerate(frame.select("gold_label", "Sentence1", "Sentence2", *expl_columns)
                                        .iter_rows()):
            raw_label, premise, hypothesis, *expls = row
            label = _esnli_label(raw_label, file=name, row=row_index, column="gold_label", where="")
            position, n = n, n + 1
            if label is None:
                skipped += 1
                continue
            for column, text in (("Sentence1", premise), ("Sentence2", hypothesis)):
                if not (text or "").strip():
                    raise InputError("empty: every pair needs a premise and a hypothesis", file=name, row=row_index,
                                     column=column)
            rationales = [e or "" for e in expls] + [None] * (3 - n_expl)
            rows.append((f"esnli-{split}-{position}", premise, hypothesis, label, *rationales))
    return _esnli_frame(rows, skipped, split, names[0])


# ---- CoS-E v1.0 -------------------------------------------------------------------------------------------------

_COSE_DIR = "data/v1.0"


def cose_files(split: str, form: str) -> tuple[str, ...]:
    """CommonsenseQA v1.0's questions of a split, then CoS-E's explanations of it."""
    suffix = "_processed" if form == "processed" else ""
    return f"{_COSE_DIR}/{split}_rand_split.jsonl", f"{_COSE_DIR}/cose_{split}_v1.0{suffix}.jsonl"


def _cqa_question(record: dict) -> tuple[str, str, list[str], str]:
    """(id, stem, choice texts, answer text) of a CommonsenseQA record; KeyError / TypeError / ValueError when the
    record does not have that layout."""
    question = record["question"]
    choices = question["choices"]
    texts = [c["text"] for c in choices]
    if not all(isinstance(t, str) for t in texts) or not isinstance(question["stem"], str):
        raise TypeError("the stem and every choice's text must be strings")
    answers = [c["text"] for c in choices if c["label"] == record["answerKey"]]
    if len(answers) != 1:
        raise ValueError(f"answerKey {record['answerKey']!r} is not the label of exactly one choice")
    return str(record["id"]), question["stem"], texts, answers[0]


def convert_cose(files: Files, split: str, form: str) -> tuple[pl.DataFrame, list[str]]:
    """One split of CoS-E v1.0 in `COSE_SCHEMA`: each CommonsenseQA question (in its file's order) with its CoS-E
    open-ended explanation as the rationale and the answer's text as the label; id `cose-ID`. Questions without an
    explanation are left out (counted in the notes); an explanation of no question is an error."""
    questions_name, explanations_name = cose_files(split, form)
    questions: dict[str, tuple[str, list[str], str]] = {}
    for row, record in enumerate(_jsonl(files, questions_name)):
        try:
            id_, stem, texts, answer = _cqa_question(record)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"not a CommonsenseQA question record (id, question.stem, question.choices[].label/"
                             f"text, answerKey): {type(e).__name__}: {e}", file=questions_name, row=row) from None
        if id_ in questions:
            raise InputError(f"id {id_!r} appears twice", file=questions_name, row=row, column="id")
        questions[id_] = (stem, texts, answer)
    explained: dict[str, str] = {}
    for row, record in enumerate(_jsonl(files, explanations_name)):
        try:
            id_, text = str(record["id"]), record["explanation"]["open-ended"]
            if not isinstance(text, str):
                raise TypeError(f"explanation.open-ended is {type(text).__name__}, not text")
        except (KeyError, TypeError) as e:
            raise InputError(f"not a CoS-E record (id, explanation.open-ended): {type(e).__name__}: {e}",
                             file=explanations_name, row=row) from None
        if id_ not in questions:
            raise InputError(f"id {id_!r} is not a question of {questions_name} (files of different splits or "
                             "versions?)", file=explanations_name, row=row, column="id")
        if id_ in explained:
            raise InputError(f"id {id_!r} appears twice", file=explanations_name, row=row, column="id")
        explained[id_] = text
    rows = [(f"cose-{id_}", stem, texts, answer, explained[id_])
            for id_, (stem, texts, answer) in questions.items() if id_ in explained]
    notes = []
    if len(rows) < len(questions):
        notes.append(f"cose {split}: {len(questions) - len(rows)} question(s) without a CoS-E explanation left out")
    return pl.DataFrame(rows, schema=COSE_SCHEMA, orient="row"), notes


# ---- the human judgements of Wiegreffe et al. (2022) ----------------------------------------------------------

_ACCEPTABILITY_DIR = "data/acceptability_annotations"
_FINE_GRAINED_DIR = "data/fine_grained_absolute_quality_annotations"
_N_CANDIDATES = 5
_NLI_LABELS = {"true": "entailment", "false": "contradiction", "neither": "neutral",
               "entailment": "entailment", "contradiction": "contradiction", "neutral": "neutral"}
_TASK_INPUTS = {"nli": ("Input.premise", "Input.hypothesis"), "qa": ("Input.question", "Input.answer_choices")}
_ID_PREFIX = {"nli": "nli-", "qa": "qa-"}


def acceptability_files(dataset: str) -> tuple[str, ...]:
    """The acceptability CSVs of one dataset ('snli' or 'commonsenseqa'): train instances, then test instances."""
    return tuple(f"{_ACCEPTABILITY_DIR}/{dataset}_{part}.csv" for part in ("train", "test"))


def fine_grained_files(dataset: str, sources: tuple[str, ...]) -> tuple[str, ...]:
    """The fine-grained CSVs of one dataset, one per explanation source (the file's stem)."""
    return tuple(f"{_FINE_GRAINED_DIR}/{dataset}/{source}.csv" for source in sources)


def parse_answer_choices(text: str) -> list[str]:
    """CommonsenseQA's choices as the annotation files write them, 'a, b, c, d, or e', as a list."""
    text = text.strip()
    if text.startswith("["):
        parsed = json.loads(text)
        if not isinstance(parsed, list):
            raise ValueError("not a list")
        return [str(c).strip() for c in parsed]
    head, sep, last = text.rpartition(", or ")
    if not sep:
        head, sep, last = text.rpartition(" or ")
    parts = head.split(", ") if sep else text.split(", ")
    return [p.strip() for p in (parts + [last] if sep else parts)]


def _task_fields(task: str, row: dict, *, file: str, index: int) -> dict:
    """The task's columns of one annotation row: premise, hypothesis (NLI) or question, choices (QA), and label."""
    first, second = _TASK_INPUTS[task]
    for column in (first, second, "Input.gold_label"):
        if not (row[column] or "").strip():
            raise InputError("empty: every row needs the task's inputs and its gold label", file=file, row=index,
                             column=column)
    gold = row["Input.gold_label"].strip()
    if task == "nli":
        label = _NLI_LABELS.get(gold.lower())
        if label is None:
            raise InputError(f"unknown label {gold!r}; expected TRUE / FALSE / neither (or entailment / "
                             "contradiction / neutral)", file=file, row=index, column="Input.gold_label")
        return {"premise": row[first], "hypothesis": row[second], "label": label}
    try:
        choices = parse_answer_choices(row[second])
    except (ValueError, json.JSONDecodeError):
        raise InputError(f"choices {row[second]!r} are neither 'a, b, or c' nor a JSON list", file=file, row=index,
                         column=second) from None
    if gold not in choices:
        if len(gold) == 1 and "A" <= gold.upper() < chr(ord("A") + len(choices)):  # an answer key, 'A'..'E'
            gold = choices[ord(gold.upper()) - ord("A")]
        else:
            raise InputError(f"the gold label {gold!r} is not one of the choices {choices}", file=file, row=index,
                             column="Input.gold_label")
    return {"question": row[first], "choices": choices, "label": gold}


def _number(value: str | None) -> float | None:
    """A numeric cell as a float, None when empty or not a number."""
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def _judgement(row: dict, column: str, allowed: tuple[int, ...], *, file: str, index: int) -> int | None:
    """An integer judgement ('1', '-1', '1.0': pandas writes floats in a column with gaps), None when empty."""
    value = row.get(column)
    if value is None or not value.strip():
        return None
    number = _number(value)
    if number is None or number != int(number) or int(number) not in allowed:
        raise InputError(f"{value!r} is not one of {list(allowed)}", file=file, row=index, column=column)
    return int(number)


def _annotator_numbers(ids: list[str]) -> list[int]:
    """Each row's annotator number: how many rows of the same instance came before it (0, 1, 2, ...)."""
    seen: dict[str, int] = {}
    out = []
    for id_ in ids:
        out.append(seen.get(id_, 0))
        seen[id_] = out[-1] + 1
    return out


_SAMPLE = re.compile(r"(?:sample)?[_ -]?(\d+)")


def _sample_name(value: str | None) -> str:
    """Which generation a candidate is: 'greedy', or the sample's number as written ('sample_2' -> '2')."""
    text = (value or "").strip().lower()
    match = _SAMPLE.fullmatch(text)
    return match.group(1) if match else text


def convert_acceptability(files: Files, names: tuple[str, ...], task: str) -> tuple[pl.DataFrame, list[str]]:
    """Acceptability CSVs (one row per annotator and instance, candidates `Input.explanation_1..5`) in
    `acceptability_schema(task)`: one row per (file row, candidate k), in that order; `candidate` k, `sample` from
    `Input.source_sample_k`, `gpt3_nll` from `Input.nll_k`, `acceptable` 1 when k is among `Answer.acceptable`'s
    '|'-separated numbers, else 0. An NLL that is not a number is taken from another annotator's row of the same
    instance and candidate (the NLL belongs to the explanation, not to the annotator)."""
    first, second = _TASK_INPUTS[task]
    per_candidate = tuple(f"Input.{field}_{k}" for k in range(1, _N_CANDIDATES + 1)
                          for field in ("explanation", "source_sample", "nll"))
    required = ("Input.id", first, second, "Input.gold_label", *per_candidate, "Answer.acceptable")
    rows, where = [], []  # where: (file, row, column) of each output row's NLL cell
    for name in names:
        frame = _csv(files, name, required)
        for index, row in enumerate(frame.select(required).iter_rows(named=True)):
            id_ = (row["Input.id"] or "").strip()
            if not id_:
                raise InputError("empty instance id", file=name, row=index, column="Input.id")
            fields = _task_fields(task, row, file=name, index=index)
            chosen = set()
            for part in (row["Answer.acceptable"] or "").split("|"):
                if not part.strip():
                    continue
                if part.strip() not in {str(k) for k in range(1, _N_CANDIDATES + 1)}:
                    raise InputError(f"{row['Answer.acceptable']!r} is not '|'-separated candidate numbers 1-"
                                     f"{_N_CANDIDATES}", file=name, row=index, column="Answer.acceptable")
                chosen.add(int(part))
            for k in range(1, _N_CANDIDATES + 1):
                rows.append({"id": _ID_PREFIX[task] + id_, **fields, "candidate": k,
                             "sample": _sample_name(row[f"Input.source_sample_{k}"]),
                             "rationale": row[f"Input.explanation_{k}"] or "",
                             "gpt3_nll": _number(row[f"Input.nll_{k}"]), "acceptable": int(k in chosen)})
                where.append((name, index, f"Input.nll_{k}", row[f"Input.nll_{k}"]))
    if not rows:
        raise InputError("no rows", file=names[0])
    # one annotator number per file row: every candidate row of it shares the row's number
    numbers = _annotator_numbers([r["id"] for r in rows[::_N_CANDIDATES]])
    frame = pl.DataFrame(
        [{**r, "annotator": numbers[i // _N_CANDIDATES]} for i, r in enumerate(rows)],
        schema=acceptability_schema(task))
    filled = frame.with_columns(
        pl.col("gpt3_nll").fill_null(pl.col("gpt3_nll").drop_nulls().first().over("id", "candidate")))
    missing = filled["gpt3_nll"].is_null().arg_true()
    if len(missing):
        name, index, column, value = where[missing[0]]
        raise InputError(f"the NLL {value!r} is not a number, and no other annotator's row of this instance gives "
                         "one", file=name, row=index, column=column)
    notes = []
    repaired = frame["gpt3_nll"].is_null().sum()
    if repaired:
        notes.append(f"{repaired} candidate row(s) whose NLL cell was not a number took it from another annotator's "
                     "row of the same instance")
    return filled, notes


def convert_fine_grained(files: Files, names: tuple[str, ...], task: str) -> tuple[pl.DataFrame, list[str]]:
    """Fine-grained CSVs (one per explanation source; one row per annotator and instance) in
    `fine_grained_schema(task)`: `source` the file's stem, `rationale` `Input.explanation`, the judgements from
    the `Answer.*` columns as the annotators chose them (null where not asked), `general` 1 when the annotator could
    judge factuality (`Answer.generality_factuality` -1 / 0 / 1) and -1 when it needed more information (-9),
    `factual` that value, null for -9. `Answer.acceptable` may be absent (null: collected for some sources only)."""
    first, second = _TASK_INPUTS[task]
    required = ("Input.id", first, second, "Input.gold_label", "Input.explanation", "Answer.new_info",
                "Answer.supports_label")
    optional = ("Answer.grammar", "Answer.generality_factuality", "Answer.amount_info", "Answer.acceptable")
    allowed = {"Answer.new_info": (-1, 1), "Answer.supports_label": (-1, 1), "Answer.grammar": (-1, 1),
               "Answer.generality_factuality": (-9, -1, 0, 1), "Answer.amount_info": (-1, 0, 1),
               "Answer.acceptable": (-1, 1)}
    rows: list[dict] = []
    for name in names:
        frame = _csv(files, name, required)
        source = Path(name).stem
        columns = [*required, *(c for c in optional if c in frame.columns)]
        ids = [(v or "").strip() for v in frame["Input.id"].to_list()]
        numbers = _annotator_numbers(ids)
        for index, row in enumerate(frame.select(columns).iter_rows(named=True)):
            if not ids[index]:
                raise InputError("empty instance id", file=name, row=index, column="Input.id")
            judged = {c: _judgement(row, c, allowed[c], file=name, index=index) for c in allowed}
            generality = judged["Answer.generality_factuality"]
            rows.append({"id": _ID_PREFIX[task] + ids[index], **_task_fields(task, row, file=name, index=index),
                         "source": source, "rationale": row["Input.explanation"] or "", "annotator": numbers[index],
                         "new_info": judged["Answer.new_info"], "supports_label": judged["Answer.supports_label"],
                         "grammar": judged["Answer.grammar"],
                         "general": None if generality is None else (-1 if generality == -9 else 1),
                         "factual": None if generality in (None, -9) else generality,
                         "amount_info": judged["Answer.amount_info"], "acceptable": judged["Answer.acceptable"]})
    if not rows:
        raise InputError("no rows", file=names[0])
    return pl.DataFrame(rows, schema=fine_grained_schema(task)), []


# ---- the registry -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Output:
    """One file `larev data get` writes (`NAME/<name>.parquet`) and the published files it is converted from."""

    name: str
    files: tuple[str, ...]
    convert: Converter


@dataclass(frozen=True)
class Dataset:
    """A published release: where its files are (`base` + a file's relative path) and, per form, its outputs."""

    name: str
    base: str
    forms: dict[str, tuple[Output, ...]]
    default_form: str
    about: str  # one line: what it is, whose, under which licence

    def outputs(self, form: str | None = None, only: list[str] | None = None) -> tuple[Output, ...]:
        """The outputs of a form (default: the committed one), all or those named in `only`."""
        form = form or self.default_form
        if form not in self.forms:
            raise InputError(f"{self.name} has no form {form!r}; it has {sorted(self.forms)}")
        outputs = self.forms[form]
        if only is None:
            return outputs
        known = [o.name for o in outputs]
        unknown = [n for n in only if n not in known]
        if unknown or not only:
            raise InputError(f"{self.name} has no output {unknown or only}; it has {known}")
        return tuple(o for o in outputs if o.name in only)


def _esnli_outputs(form: str) -> tuple[Output, ...]:
    if form == "raw":
        return tuple(Output(s, esnli_raw_files(s), lambda f, s=s: convert_esnli_raw(f, s))
                     for s in ("train", "dev", "test"))
    return tuple(Output(s, esnli_preprocessed_files(s), lambda f, s=s: convert_esnli_preprocessed(f, s))
                 for s in ("train", "dev", "test"))


def _cose_outputs(form: str) -> tuple[Output, ...]:
    return tuple(Output(s, cose_files(s, form), lambda f, s=s: convert_cose(f, s, form)) for s in ("train", "dev"))


def _human_outputs() -> tuple[Output, ...]:
    specs = (("snli_acceptability", acceptability_files("snli"), convert_acceptability, "nli"),
             ("cqa_acceptability", acceptability_files("commonsenseqa"), convert_acceptability, "qa"),
             ("cqa_fine_grained", fine_grained_files("commonsenseqa", ("cose", "ecqa", "gpt3_greedy")),
              convert_fine_grained, "qa"),
             ("snli_fine_grained", fine_grained_files("snli", ("esnli", "gpt3_greedy")), convert_fine_grained, "nli"))
    return tuple(Output(name, names, lambda f, c=convert, n=names, t=task: c(f, n, t))
                 for name, names, convert, task in specs)


DATASETS: dict[str, Dataset] = {
    "esnli": Dataset(
        "esnli", "https://raw.githubusercontent.com/OanaMariaCamburu/e-SNLI/master/",
        {"preprocessed": _esnli_outputs("preprocessed"), "raw": _esnli_outputs("raw")}, "preprocessed",
        "e-SNLI (Camburu et al., 2018): explanations MIT, SNLI sentences CC BY-SA 4.0"),
    "cose": Dataset(
        "cose", "https://raw.githubusercontent.com/salesforce/cos-e/master/",
        {"raw": _cose_outputs("raw"), "processed": _cose_outputs("processed")}, "raw",
        "CoS-E v1.0 (Rajani et al., 2019; BSD-3-Clause) on CommonsenseQA v1.0 (Talmor et al., 2019)"),
    "human": Dataset(
        "human", "https://raw.githubusercontent.com/allenai/few_shot_explanations/main/",
        {"published": _human_outputs()}, "published",
        "human judgements of explanations (Wiegreffe et al., 2022; allenai/few_shot_explanations, Apache-2.0)"),
}


def dataset(name: str) -> Dataset:
    """The release called `name` (case-insensitive); an InputError lists the known ones."""
    found = DATASETS.get(name.strip().lower())
    if found is None:
        raise InputError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return found
