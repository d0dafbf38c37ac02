"""Load and validate a run's examples (demo generator, files or hub) into one Parquet artifact."""

from __future__ import annotations

import larev.data.stream as stream
from larev.data.logged import RationaleReading
from larev.data.sources import DataConfig, load_data
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_table


def examples_task(store: ArtifactStore, examples: ArtifactRef) -> str:
    """The examples' task ('nli' or 'qa'): every row of an examples table has the same one."""
    return str(store.read_parquet(examples.key)["task"][0])


def examples_in_test_split(store: ArtifactStore, examples: ArtifactRef):
    """The test split of a run's examples: what rationales are validated against and scored on."""
    import polars as pl

    return store.read_parquet(examples.key).filter(pl.col("split") == "test")


def check_rationale_file(store: ArtifactStore, examples: ArtifactRef, path: str,
                         column_map: dict[str, str] | None = None, shard_rows: int = 0,
                         shown_as: str | None = None, reading: RationaleReading | None = None) -> int:
    """Validate a rationale file (any format larev/data/logged.py reads, as `reading` says) against the run's test
    examples without storing anything (read `shard_rows` rows at a time when > 0); its row count. InputError on
    bad input, naming the file as `shown_as` (where the user knows it, e.g. its place in an inbox) instead of a
    local working copy's path."""
    from larev.data.files import load_rationales_file
    from larev.errors import InputError

    test = examples_in_test_split(store, examples)
    try:
        if shard_rows > 0:
            return stream.validate_rationale_file(path, test, batch_rows=shard_rows, column_map=column_map,
                                                  reading=reading)
        return load_rationales_file(path, test, column_map=column_map, reading=reading).height
    except InputError as exc:
        if shown_as is None:
            raise
        raise InputError(exc.problem, file=shown_as, row=exc.row, column=exc.column) from None


@larev_task("examples")
def load_examples(store: ArtifactStore, data: DataConfig, source_digests: list[str]) -> ArtifactRef:
    """source_digests: content hashes of the input files (so an edited file reruns this step and what follows)."""
    return put_table(store, "examples.parquet", load_data(data))


@larev_task("rationales")
def load_rationales(store: ArtifactStore, path: str, digest: str, examples: ArtifactRef,
                    column_map: dict[str, str] | None = None, reading: RationaleReading | None = None) -> ArtifactRef:
    """A user's rationale file (id, source, rationale[, label]; or a format larev/data/logged.py reads, as
    `reading` says) validated against the test examples."""
    from larev.data.files import load_rationales_file

    test = examples_in_test_split(store, examples)
    return put_table(store, "rationales.parquet", load_rationales_file(path, test, column_map=column_map,
                                                                       reading=reading))


@larev_task("rationale-shards")
def load_rationale_shards(store: ArtifactStore, path: str, digest: str, examples: ArtifactRef,
                          column_map: dict[str, str] | None = None, shard_rows: int = 5000,
                          reading: RationaleReading | None = None) -> list[ArtifactRef]:
    """A user's rationale file validated and cut into shards of `shard_rows` rows, reading `shard_rows` rows at a
    time (memory bounded by a shard, whatever the file's size). The whole file is validated before the first
    shard is written, so a bad file leaves nothing behind."""
    test = examples_in_test_split(store, examples)
    stream.validate_rationale_file(path, test, batch_rows=shard_rows, column_map=column_map, reading=reading)
    batches = stream.iter_rationale_batches(path, test, batch_rows=shard_rows, column_map=column_map, reading=reading)
    return [put_table(store, f"shard-{i:05d}.parquet", batch) for i, batch in enumerate(batches)]
