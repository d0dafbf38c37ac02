"""Steps of the human-agreement flow: an annotation file's instances and explanations as a run's test data."""

from __future__ import annotations

import larev.human.annotations as annotations
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.cache import larev_task
from tasks.outputs import put_table


@larev_task("human-inputs", code=(annotations,))
def annotation_inputs(store: ArtifactStore, path: str, digest: str) -> dict[str, ArtifactRef]:
    """An annotation file's instances (examples.parquet, split test) and its explanations to score
    (rationales.parquet), plus the judgements and what was set aside. `digest`: the file's content hash (an edited
    file reruns this step and what follows)."""
    read = annotations.read_annotations(path)
    return {"examples": put_table(store, "examples.parquet", read.examples),
            "rationales": put_table(store, "rationales.parquet", read.rationales),
            "judgements": put_table(store, "judgements.parquet", read.judgements),
            "skipped": put_table(store, "skipped.parquet", read.skipped)}
