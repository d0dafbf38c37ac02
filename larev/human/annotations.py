"""Human judgements of rationales, read into what a run scores and what its scores are compared with.

Two layouts (one row per item and annotator; see ../shared/data/human/README.md for the files this was built on):

  fine_grained   id, task columns, label, source, rationale, annotator, new_info, supports_label, ...
                 one explanation per (id, source); `human` = the share of its annotators who found new information
                 (new_info = 1) that supports the label (supports_label = 1); `new_info` and `supports` the
                 shares who answered yes to each question
  acceptability  id, task columns, label, candidate, rationale, annotator, acceptable[, gpt3_nll]
                 several candidate explanations per id (source `candidate-<k>`); `votes` = annotators who found
                 it acceptable, `gpt3_nll` the generator's own normalised NLL (the paper's baseline), `length` in
                 words

`read_annotations` returns the examples (split test: new test rows for a finished run), the rationale rows to
score (id, source, rationale, label), the judgement per (id, source), and the explanations it set aside (empty
ones: judged by people, but nothing to score), each with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from larev.data.files import conform_examples, read_table
from larev.errors import ConfigError, InputError
from larev.schema import RATIONALE_SCHEMA

KINDS = ("fine_grained", "acceptability")
_TASK_COLUMNS = {"nli": ("premise", "hypothesis"), "qa": ("question", "choices")}


@dataclass
class Annotations:
    """One annotation file, ready to score and compare."""

    name: str  # the file's stem, e.g. 'cqa_fine_grained'
    kind: str  # one of KINDS
    task: str  # 'nli' or 'qa'
    examples: pl.DataFrame  # validated examples, split 'test', one row per id
    rationales: pl.DataFrame  # id, source, rationale, label (RATIONALE_SCHEMA)
    judgements: pl.DataFrame  # id, source, then human (fine_grained) or votes, annotators, gpt3_nll, length
    notes: list[str]  # repairs made while reading (said in the outputs)
    skipped: pl.DataFrame  # id, source, row (first file row), reason: explanations set aside, not scored


def _kind(df: pl.DataFrame, file: str) -> str:
    if {"new_info", "supports_label", "source"} <= set(df.columns):
        return "fine_grained"
    if {"acceptable", "candidate"} <= set(df.columns):
        return "acceptability"
    raise InputError("not an annotation file: expected new_info, supports_label and source (fine-grained "
                     f"judgements) or acceptable and candidate (acceptability votes); it has {df.columns}", file=file)


def _task(df: pl.DataFrame, file: str) -> str:
    for task, columns in _TASK_COLUMNS.items():
        if set(columns) <= set(df.columns):
            return task
    raise InputError("no task columns: expected premise and hypothesis (NLI) or question and choices (QA)",
                     file=file)


def read_annotations(path: str | Path) -> Annotations:
    """An annotation file (Parquet, JSON lines or CSV) as examples, rationales and judgements. InputError names
    the file, row and column of anything that does not fit (a missing column, an item whose annotators saw
    different texts, a label outside the task's set)."""
    file = str(path)
    df = read_table(path)
    kind, task = _kind(df, file), _task(df, file)
    source = pl.col("source").cast(pl.String) if kind == "fine_grained" else pl.format(
        "candidate-{}", pl.col("candidate").cast(pl.String))
    required = ["id", "label", "rationale", "annotator"] + (["acceptable"] if kind == "acceptability" else [])
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {missing} for {kind.replace('_', '-')} judgements", file=file,
                         column=missing[0])
    df = df.with_row_index("__row").with_columns(pl.col("id").cast(pl.String), source.alias("__source"))
    # an empty explanation was judged but cannot be scored: set aside with its reason, counted in the outputs
    is_empty = pl.col("rationale").is_null() | (pl.col("rationale").str.strip_chars() == "")
    skipped = (df.filter(is_empty).group_by("id", "__source", maintain_order=True)
               .agg(pl.col("__row").min().alias("row"))
               .select("id", pl.col("__source").alias("source"), "row", pl.lit("empty explanation").alias("reason")))
    df = df.filter(~is_empty)
    # every annotator of an item judged the same text
    texts = df.group_by("id", "__source").agg(pl.col("rationale").n_unique().alias("n"), pl.col("__row").min())
    mixed = texts.filter(pl.col("n") > 1)
    if not mixed.is_empty():
        raise InputError(f"item ({mixed['id'][0]!r}, {mixed['__source'][0]!r}) has different explanation texts "
                         "across its annotators", file=file, row=int(mixed["__row"][0]), column="rationale")
    task_columns = [c for c in _TASK_COLUMNS[task] if c in df.columns]
    instances = df.unique("id", keep="first", maintain_order=True).select("id", *task_columns, "label")
    notes = []
    if task == "qa" and instances.schema["choices"] == pl.List(pl.String):
        repeated = instances.filter(pl.col("choices").list.n_unique() < pl.col("choices").list.len())
        if not repeated.is_empty():  # CommonsenseQA has a few: the same text twice is one choice
            instances = instances.with_columns(pl.col("choices").list.unique(maintain_order=True))
            notes.append(f"{repeated.height} question(s) list a choice twice (first: {repeated['id'][0]!r}); "
                         "each repeated choice counted once")
    examples = conform_examples(instances, file=file, task=task, split="test", require_rationale=False)
    rationales = (df.unique(["id", "__source"], keep="first", maintain_order=True)
                  .select("id", pl.col("__source").alias("source"), "rationale", pl.col("label").cast(pl.String))
                  .select([pl.col(c).cast(t) for c, t in RATIONALE_SCHEMA.items()]))
    if kind == "fine_grained":
        yes = (pl.col("new_info") == 1) & (pl.col("supports_label") == 1)
        judgements = df.group_by("id", "__source", maintain_order=True).agg(
            human=yes.fill_null(False).cast(pl.Float64).mean(), annotators=pl.len(),
            new_info=(pl.col("new_info") == 1).fill_null(False).cast(pl.Float64).mean(),
            supports=(pl.col("supports_label") == 1).fill_null(False).cast(pl.Float64).mean())
    else:
        judgements = df.group_by("id", "__source", maintain_order=True).agg(
            votes=(pl.col("acceptable") == 1).fill_null(False).sum().cast(pl.Int64), annotators=pl.len(),
            gpt3_nll=(pl.col("gpt3_nll").mean() if "gpt3_nll" in df.columns else pl.lit(None, pl.Float64)),
            length=pl.col("rationale").first().str.split(" ").list.len().cast(pl.Float64))
    return Annotations(name=Path(path).stem, kind=kind, task=task, examples=examples, rationales=rationales,
                       judgements=judgements.rename({"__source": "source"}), notes=notes,
                       skipped=skipped.with_columns(pl.col("row").cast(pl.Int64)))


def check_annotations(run: str, annotations: list[str], run_task: str) -> list[Annotations]:
    """Read every annotation file before any step (a bad file fails in seconds, naming what is wrong); each must
    be of the run's task (`run` names the run in the message), and the files of distinct kinds."""
    read = [read_annotations(path) for path in annotations]
    for path, ann in zip(annotations, read, strict=True):
        if ann.task != run_task:
            raise ConfigError(f"{path}: {ann.task.upper()} annotations, but the run {run} was trained on "
                              f"{run_task.upper()}; score it with a {ann.task.upper()} run")
    kinds = [a.kind for a in read]
    if len(set(kinds)) != len(kinds):
        raise ConfigError(f"two annotation files of one kind ({kinds}); give one fine-grained and/or one "
                          "acceptability file per call, and other files to another --out")
    return read
