"""Child process of tests/test_resume.py: runs a pipeline whose first checkpoint save is announced by a marker
file and then pauses, so the parent can SIGKILL it at a known point (after the first epoch of phi_base is
checkpointed).

The handshake is a file, not a log line: whether a print or a log record reaches the parent depends on the
logging settings the child inherits (`larev`'s CLI, called by earlier tests in the same session, sets
PREFECT_LOGGING_LEVEL=WARNING in the environment), and a pipe the parent stops reading can block the child.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from flows.pipeline import PipelineParams, larev_pipeline
from tasks.runtime.checkpoints import StoreCheckpointer

torch.set_num_threads(2)  # as the parent test process (tests/conftest.py): same arithmetic, same weights
_save = StoreCheckpointer.save


def announce_saves(marker: Path):
    def _announced_save(self, state):
        _save(self, state)
        partial = marker.with_suffix(".partial")
        partial.write_text(f"{self.label} epoch {state.epoch}\n")
        partial.replace(marker)  # the parent sees the marker whole or not at all
        time.sleep(600)  # the parent kills us in here

    return _announced_save


if __name__ == "__main__":
    params_file, marker = Path(sys.argv[1]), Path(sys.argv[2])
    StoreCheckpointer.save = announce_saves(marker)
    larev_pipeline(PipelineParams.model_validate_json(params_file.read_text()))
