"""Training checkpoints in the artifact store, and per-epoch progress in the Prefect UI.

A training task wraps its loop in `epoch_checkpoints(store, name, epochs)`: after every epoch the loop's full
state (larev/models/checkpoint.py) goes to `<step>/<fingerprint>/checkpoints/<name>/epoch-NNNN` in the store, local or
S3, as a directory artifact whose manifest is written last (an interrupted upload is never read back). The
step's fingerprint is its cache key, so a rerun of the same step, after a crash or a SIGKILL, finds the
checkpoints of exactly this computation and resumes from the latest one; the loop logs that it did. Once the
step's model is stored, its checkpoints are deleted. Only the latest checkpoint is kept meanwhile.
"""

from __future__ import annotations

import logging
import posixpath
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from larev.models.checkpoint import TrainingState, read_state, write_state
from larev.errors import ArtifactError
from storage import ArtifactStore
from tasks.runtime.cache import current_step

log = logging.getLogger(__name__)

_EPOCH_DIR = re.compile(r"^epoch-(\d{4,})$")


class StoreCheckpointer:
    """`larev.models.checkpoint.Checkpointer` over the artifact store, reporting epochs done as a Prefect progress
    artifact."""

    def __init__(self, store: ArtifactStore, prefix: str, *, epochs: int, label: str) -> None:
        self.store, self.prefix, self.epochs, self.label = store, prefix, epochs, label
        self._progress_id = _create_progress(label)

    def _complete(self) -> list[str]:
        """Keys of the complete checkpoints (manifest present), oldest first."""
        keys = [k for k in self.store.ls(self.prefix) if _EPOCH_DIR.match(posixpath.basename(k))]
        return sorted((k for k in keys if self.store.exists(k)), key=lambda k: int(k.rsplit("-", 1)[1]))

    def latest(self) -> TrainingState | None:
        for key in reversed(self._complete()):
            try:
                state = read_state(self.store.get_dir(key))
            except (ArtifactError, OSError, ValueError, KeyError) as exc:
                log.warning("%s: skipping unreadable checkpoint %s (%s)", self.label, self.store.uri(key), exc)
                continue
            self._report(state.epoch)
            return state
        return None

    def save(self, state: TrainingState) -> None:
        key = f"{self.prefix}/epoch-{state.epoch:04d}"
        with tempfile.TemporaryDirectory() as tmp:
            write_state(state, tmp)
            self.store.put_dir(tmp, key)
        for old in self._complete():
            if old != key:
                self.store.delete(old)
        self._report(state.epoch)

    def clear(self) -> None:
        """Delete every checkpoint of this training run (after its model was stored), and the step's
        `checkpoints/` folder once no other training loop of the step has one there."""
        self.store.delete(self.prefix)
        parent = posixpath.dirname(self.prefix)
        if posixpath.basename(parent) == "checkpoints" and not self.store.ls(parent):
            self.store.delete(parent)

    def _report(self, epoch: int) -> None:
        _update_progress(self._progress_id, 100.0 * epoch / max(1, self.epochs))


@contextmanager
def epoch_checkpoints(store: ArtifactStore, name: str, epochs: int,
                      label: str | None = None) -> Iterator[StoreCheckpointer]:
    """Checkpoints for one training loop of the current step; deleted when the block finishes without error."""
    checkpointer = StoreCheckpointer(store, current_step().key(f"checkpoints/{name}"), epochs=epochs,
                                     label=label or name)
    yield checkpointer
    checkpointer.clear()
    _delete_progress(checkpointer._progress_id)  # done: the run's artifacts show its results, not finished bars


def _create_progress(label: str):
    """A Prefect progress artifact for the current task run; None outside a run (plain library use)."""
    from prefect.context import TaskRunContext

    if TaskRunContext.get() is None:
        return None
    try:
        from prefect.artifacts import create_progress_artifact

        return create_progress_artifact(progress=0.0, description=f"{label}: share of training epochs done")
    except Exception as exc:  # the UI is a convenience: never fail a training step over it
        log.debug("no progress artifact for %s: %s", label, exc)
        return None


def _update_progress(artifact_id, percent: float) -> None:
    if artifact_id is None:
        return
    try:
        from prefect.artifacts import update_progress_artifact

        update_progress_artifact(artifact_id=artifact_id, progress=percent)
    except Exception as exc:
        log.debug("progress artifact update failed: %s", exc)


def _delete_progress(artifact_id) -> None:
    """Remove a finished training loop's progress artifact (a failed loop keeps its own, at the epoch it reached)."""
    if artifact_id is None:
        return
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.delete_artifact(artifact_id)
    except Exception as exc:
        log.debug("progress artifact %s not deleted: %s", artifact_id, exc)
