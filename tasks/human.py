"""Steps of the human-agreement flow: an annotation file's instances and explanations as a run's test data."""

from __future__ import annotations

import larev.human.annotations as annotations
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_table


@larev_task("human-inputs")
def annotation_inputs(store: ArtifactStore, path: str, digest: str) -> dict[str, ArtifactRef]:
    """An annotation file's instances (examples.parquet, split test) and its explanations to score
    (rationales.parquet). `digest`: the file's content hash (an edited file reruns this step and what follows);
    the flow compares the scores with the judgements it read from the same file."""
    read = annotations.read_annotations(path)
    return {"examples": put_table(store, "examples.parquet", read.examples),
            "rationales": put_table(store, "rationales.parquet", read.rationales)}
