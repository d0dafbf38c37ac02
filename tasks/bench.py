"""Steps of the benchmarks (`larev bench quality`, `larev bench validity`): the tables a benchmark builds before
its seeds run, stored like any step's output so that they are cached, resumable, visible in the UI and readable by
a seed's flow run on another machine (flows/benchmark.py).

  benchmark-perturbations  the validity protocol's perturbations of the split's gold rationales
  benchmark-rationales     the rationale table every seed scores beside the built-in variants (tables stacked)
  human-half               an annotation file's tune or report half (by instance)
  human-table-inputs       a stored annotation table's instances and explanations, as a run's test data
  stored-rationales        a stored rationale table validated against a run's test split
  answer-masked            QA: the restating gold rationales of the test split, answer masked
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from larev.data.files import read_table
from larev.data.sources import parse_slice
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.data import examples_in_test_split
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_json, put_table


@larev_task("benchmark-perturbations")
def perturbed_rationales(store: ArtifactStore, data: str, digest: str, rows: str, task: str,
                         seed: int = 0) -> dict[str, ArtifactRef]:
    """The perturbations of the gold rationales of `data`'s rows `rows` (larev/validity/perturb.py; its draws
    follow `seed` and each instance's id): {"rationales": the table, "skipped": {kind: rows left out}}. `digest`:
    the data file's content hash."""
    from larev.validity.perturb import perturbations

    perturbed = perturbations(read_table(data)[parse_slice(rows)], task, seed=seed)
    return {"rationales": put_table(store, "perturbations.parquet", perturbed.rows),
            "skipped": put_json(store, "skipped.json", perturbed.skipped)}


@larev_task("benchmark-rationales")
def stacked_rationales(store: ArtifactStore, tables: list[ArtifactRef]) -> ArtifactRef:
    """The rows of every rationale table in `tables`, in order (id, source, rationale, label); an (id, source)
    that two tables both hold is an InputError naming it (it would be scored twice)."""
    from larev.errors import InputError

    frames = [store.read_parquet(t.key).select("id", "source", "rationale", "label") for t in tables]
    stacked = pl.concat(frames, how="diagonal_relaxed")
    twice = stacked.group_by("id", "source").len().filter(pl.col("len") > 1)
    if not twice.is_empty():
        raise InputError(f"{twice.height} (id, source) pair(s) come in more than one rationale table, e.g. "
                         f"({twice['id'][0]!r}, {twice['source'][0]!r}): name each table's sources apart",
                         column="source")
    return put_table(store, "rationales.parquet", stacked)


@larev_task("human-half")
def human_half_table(store: ArtifactStore, path: str, digest: str, split: str) -> ArtifactRef:
    """The rows of the annotation file `path` whose instance is in `split`'s half (larev/validity/human_split.py),
    stored as `<file stem>-<split>.parquet`. `digest`: the file's content hash."""
    from larev.validity.human_split import human_half

    return put_table(store, f"{Path(path).stem}-{split}.parquet", human_half(read_table(path), split))


def read_stored_annotations(store: ArtifactStore, table: ArtifactRef):
    """A stored annotation table read as larev/human/annotations.py reads a file, named by its stored file's
    stem."""
    from larev.human.annotations import read_annotations

    with store.local_copy(table.key) as path:
        read = read_annotations(path)
    read.name = Path(table.key).stem
    return read


@larev_task("human-table-inputs")
def stored_annotation_inputs(store: ArtifactStore, table: ArtifactRef) -> dict[str, ArtifactRef]:
    """A stored annotation table's instances (examples.parquet, split test) and its explanations to score
    (rationales.parquet), as tasks/human.py's `annotation_inputs` makes them of a file."""
    read = read_stored_annotations(store, table)
    return {"examples": put_table(store, "examples.parquet", read.examples),
            "rationales": put_table(store, "rationales.parquet", read.rationales)}


@larev_task("stored-rationales")
def stored_rationales(store: ArtifactStore, table: ArtifactRef, examples: ArtifactRef) -> ArtifactRef:
    """A stored rationale table (id, source, rationale[, label]) validated against the run's test split, as a
    user's rationale file is."""
    from larev.data.files import load_rationales_file

    test = examples_in_test_split(store, examples)
    with store.local_copy(table.key) as path:
        rows = load_rationales_file(path, test)
    return put_table(store, "rationales.parquet", rows)


@larev_task("answer-masked")
def answer_masked_rationales(store: ArtifactStore, examples: ArtifactRef) -> ArtifactRef | None:
    """QA: the restating gold rationales of the test split with their answer masked (larev/data/restating.py),
    for bench quality's natural-leakage table; None when the run has no QA test rows."""
    from larev.data.restating import masked_rationales

    test = examples_in_test_split(store, examples).filter(pl.col("task") == "qa")
    if test.is_empty():
        return None
    return put_table(store, "answer_masked_rationales.parquet", masked_rationales(test))
