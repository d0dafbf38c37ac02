"""Load and validate a run's examples (demo generator, files or hub) into one Parquet artifact."""

from __future__ import annotations

import larev.data.sources as sources
import larev.schema as schema
from larev.data.sources import DataConfig, load_data
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.common import larev_task, put_table


@larev_task("examples", code=(sources, schema))
def load_examples(store: ArtifactStore, data: DataConfig, source_digests: list[str]) -> ArtifactRef:
    """source_digests: content hashes of the input files (so an edited file reruns this step and what follows)."""
    return put_table(store, "examples.parquet", load_data(data))


@larev_task("rationales", code=(schema,))
def load_rationales(store: ArtifactStore, path: str, digest: str, examples: ArtifactRef,
                    column_map: dict[str, str] | None = None) -> ArtifactRef:
    """A user's rationale file (id, source, rationale[, label]) validated against the test examples."""
    import polars as pl

    from larev.data.files import load_rationales_file

    test = store.read_parquet(examples.uri).filter(pl.col("split") == "test")
    return put_table(store, "rationales.parquet", load_rationales_file(path, test, column_map=column_map))
