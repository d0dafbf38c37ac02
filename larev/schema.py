"""The data contract: canonical columns of examples, rationales to score and scores, and their validation.

examples   id, task ('nli'|'qa'), premise, hypothesis (nli), question, choices (qa), label, rationale, split
rationales id (joins examples), source (e.g. 'gpt-4', 'gold', 'leaky'), rationale, label (optional: gold when absent)
scores     one row per (id, source, metric): logp_with, logp_base, score, correct_with, correct_base, ...

Every validator raises `InputError` naming the file, the 0-based row and the column of the first problem,
and returns a frame with exactly the canonical columns and dtypes.
"""

from __future__ import annotations

import logging

import polars as pl

from larev.errors import InputError

log = logging.getLogger(__name__)

TASKS = ("nli", "qa")
SPLITS = ("train", "validation", "test")
NLI_LABELS = ("entailment", "contradiction", "neutral")

EXAMPLE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String,
    "task": pl.String,
    "premise": pl.String,
    "hypothesis": pl.String,
    "question": pl.String,
    "choices": pl.List(pl.String),
    "label": pl.String,
    "rationale": pl.String,
    "split": pl.String,
}
# Columns a file must carry; the others are filled with nulls when absent.
EXAMPLE_REQUIRED = ("id", "label")
TASK_REQUIRED = {"nli": ("premise", "hypothesis"), "qa": ("question",)}

RATIONALE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String,
    "source": pl.String,
    "rationale": pl.String,
    "label": pl.String,
}
RATIONALE_REQUIRED = ("id", "source", "rationale")


def label_set(task: str, choices: list[str] | None = None) -> list[str]:
    """The labels an evaluator chooses among for one example: NLI's three relations or the row's choices."""
    if task == "nli":
        return list(NLI_LABELS)
    if choices is not None and len(choices) > 0:  # a list, or a polars Series from a List column
        return list(choices)
    raise InputError("a QA example without choices has no label set; give choices or use normalisation='sum'")


def label_sets(frame: pl.DataFrame) -> list[list[str]]:
    """`label_set` of every row of a frame with task and choices columns."""
    return [label_set(t, c) for t, c in zip(frame["task"], frame["choices"])]


def _first_bad_row(df: pl.DataFrame, ok: pl.Expr) -> int | None:
    bad = df.with_row_index("__bad_row").filter(~ok.fill_null(False)).select("__bad_row").head(1)
    return None if bad.is_empty() else int(bad.item())


def _nonempty(col: str) -> pl.Expr:
    return pl.col(col).is_not_null() & (pl.col(col).str.strip_chars().str.len_chars() > 0)


def _check(df: pl.DataFrame, ok: pl.Expr, *, file: str, column: str, problem) -> None:
    """Raise on the first row where `ok` is false; `problem(row_dict)` words the message."""
    row = _first_bad_row(df, ok)
    if row is not None:
        raise InputError(problem(df.row(row, named=True)), file=file, row=row, column=column)


def _conform(df: pl.DataFrame, schema: dict[str, pl.DataType], required: tuple[str, ...], *,
             file: str) -> pl.DataFrame:
    """Check required columns and dtypes, add missing optional columns as nulls, drop extras (logged)."""
    if df.height == 0:
        raise InputError("the file has no rows", file=file)
    missing = [c for c in required if c not in df.columns]
    if missing:
        hint = " (or give the task: --task nli|qa, or task='nli'|'qa' in Python)" if "task" in missing else ""
        raise InputError(f"missing required column(s) {missing}{hint}; the file has columns {df.columns}", file=file,
                         column=missing[0])
    extra = [c for c in df.columns if c not in schema]
    if extra:
        log.info("%s: ignoring column(s) outside the data contract: %s", file, extra)
    out = []
    for name, dtype in schema.items():
        if name not in df.columns:
            out.append(pl.lit(None, dtype=dtype).alias(name))
            continue
        col = df.get_column(name)
        if col.dtype == dtype or col.dtype == pl.Null:
            out.append(pl.col(name).cast(dtype))
        elif dtype == pl.String and col.dtype.is_numeric():
            out.append(pl.col(name).cast(pl.String))  # numeric ids are fine as strings
        elif dtype == pl.List(pl.String) and isinstance(col.dtype, (pl.List, pl.Array)):
            out.append(pl.col(name).cast(pl.List(pl.String)))
        else:
            raise InputError(f"has dtype {col.dtype}, expected {dtype}", file=file, column=name)
    return df.select(out)


def _check_ids(df: pl.DataFrame, *, file: str, key: tuple[str, ...] = ("id",)) -> None:
    _check(df, _nonempty("id"), file=file, column="id", problem=lambda r: "id is null or empty")
    dup = df.with_row_index("__row").filter(pl.struct(list(key)).is_duplicated())
    if not dup.is_empty():
        first = dup.row(0, named=True)
        where = ", ".join(f"{k}={first[k]!r}" for k in key)
        rows = dup.filter(pl.all_horizontal([pl.col(k) == first[k] for k in key]))["__row"].to_list()
        raise InputError(f"duplicate {where} (rows {rows[:5]})", file=file, row=rows[1], column="id")


def validate_examples(df: pl.DataFrame, *, file: str = "<examples>", task: str | None = None,
                      require_rationale: bool = True, default_split: str | None = None) -> pl.DataFrame:
    """Validate a frame of examples against the contract and return it in canonical form.

    task: fills a missing `task` column, and must match it when present (one task per file).
    require_rationale: training needs a gold rationale on every row.
    default_split: fills a missing or null `split` column.
    """
    if "task" not in df.columns and task is not None and df.height:
        df = df.with_columns(pl.lit(task).alias("task"))
    if default_split is not None and df.height:
        if "split" not in df.columns:
            df = df.with_columns(pl.lit(default_split).alias("split"))
        else:
            df = df.with_columns(pl.col("split").cast(pl.String).fill_null(default_split))
    df = _conform(df, EXAMPLE_SCHEMA, EXAMPLE_REQUIRED + ("task", "split"), file=file)
    _check_ids(df, file=file)
    _check(df, pl.col("task").is_in(TASKS), file=file, column="task",
           problem=lambda r: f"unknown task {r['task']!r}; expected one of {list(TASKS)}")
    tasks = df["task"].unique().to_list()
    if len(tasks) > 1:
        first_other = df["task"].to_list().index(next(t for t in tasks if t != df["task"][0]))
        raise InputError(f"mixed tasks {sorted(tasks)} in one file; split them into one file per task",
                         file=file, row=first_other, column="task")
    the_task = tasks[0]
    if task is not None and the_task != task:
        raise InputError(f"the file's task is {the_task!r} but {task!r} was asked for", file=file, row=0,
                         column="task")
    _check(df, pl.col("split").is_in(SPLITS), file=file, column="split",
           problem=lambda r: f"unknown split {r['split']!r}; expected one of {list(SPLITS)}")
    for col in TASK_REQUIRED[the_task]:
        _check(df, _nonempty(col), file=file, column=col, problem=lambda r: "null or empty text")
    _check(df, _nonempty("label"), file=file, column="label", problem=lambda r: "null or empty label")
    if the_task == "nli":
        _check(df, pl.col("label").is_in(NLI_LABELS), file=file, column="label",
               problem=lambda r: f"unknown label {r['label']!r}; expected one of {list(NLI_LABELS)}")
    else:
        has_choices = pl.col("choices").is_not_null() & (pl.col("choices").list.len() > 0)
        _check(df, ~has_choices | (pl.col("choices").list.len() >= 2), file=file, column="choices",
               problem=lambda r: f"needs at least 2 choices, has {r['choices']}")
        _check(df, ~has_choices | (pl.col("choices").list.n_unique() == pl.col("choices").list.len()),
               file=file, column="choices", problem=lambda r: f"repeated choice in {r['choices']}")
        _check(df, ~has_choices | pl.col("label").is_in(pl.col("choices")), file=file, column="label",
               problem=lambda r: f"label {r['label']!r} is not one of the row's choices {r['choices']}")
    if require_rationale:
        _check(df, _nonempty("rationale"), file=file, column="rationale",
               problem=lambda r: "null or empty rationale (training needs a gold rationale on every row)")
    return df


def validate_rationales(df: pl.DataFrame, examples: pl.DataFrame, *, file: str = "<rationales>") -> pl.DataFrame:
    """Validate rationales to score against the examples they explain; fill a missing label with the gold one.

    Null or empty rationales are an error: score them as the empty string on purpose by writing "" explicitly
    is not allowed either, since an empty input is no rationale (use the 'vacuous' variant instead).
    """
    df = _conform(df, RATIONALE_SCHEMA, RATIONALE_REQUIRED, file=file)
    _check(df, _nonempty("source"), file=file, column="source", problem=lambda r: "null or empty source")
    _check_ids(df, file=file, key=("id", "source"))
    _check(df, _nonempty("rationale"), file=file, column="rationale", problem=lambda r: "null or empty rationale")
    known = examples.select("id", pl.col("label").alias("__gold"), "task", "choices")
    joined = df.with_row_index("__row").join(known, on="id", how="left")
    missing = joined.filter(pl.col("__gold").is_null())
    if not missing.is_empty():
        r = missing.row(0, named=True)
        raise InputError(f"id {r['id']!r} is not among the test examples", file=file, row=int(r["__row"]),
                         column="id")
    joined = joined.sort("__row").with_columns(pl.col("label").fill_null(pl.col("__gold")))
    task = joined["task"][0]
    if task == "nli":
        ok = pl.col("label").is_in(NLI_LABELS)
    else:
        ok = pl.col("choices").is_null() | pl.col("label").is_in(pl.col("choices"))
    _check(joined, ok, file=file, column="label",
           problem=lambda r: f"label {r['label']!r} is outside the label set of example {r['id']!r}")
    return joined.select(list(RATIONALE_SCHEMA))
