"""Child process of tests/test_resume.py: runs a pipeline whose checkpoint saves announce themselves and then
pause, so the parent can SIGKILL it at a known point (after the first epoch of phi_base is checkpointed)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from flows.pipeline import PipelineParams, larev_pipeline
from tasks.checkpoints import StoreCheckpointer

torch.set_num_threads(2)  # as the parent test process (tests/conftest.py): same arithmetic, same weights
_save = StoreCheckpointer.save


def _announced_save(self, state):
    _save(self, state)
    print(f"checkpoint saved: {self.label} epoch {state.epoch}", flush=True)
    time.sleep(120)  # the parent kills us in here


if __name__ == "__main__":
    StoreCheckpointer.save = _announced_save
    larev_pipeline(PipelineParams.model_validate_json(Path(sys.argv[1]).read_text()))
