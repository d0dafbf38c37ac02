"""Imported at start-up by the Python processes of the service tests' worker (this folder is on their PYTHONPATH).

A flow run started with the job variable LAREV_TEST_PAUSE_MARKER=<file>, while that file does not exist yet,
writes "<pid> <label> <epoch>" to it right after its first training checkpoint is saved and then sleeps, so the
test can SIGKILL the flow run's process at a known point. A retry of that run finds the marker and runs normally.
Processes without the variable import nothing here.
"""

import os

_marker = os.environ.get("LAREV_TEST_PAUSE_MARKER")
if _marker and not os.path.exists(_marker):
    import time

    from tasks.runtime.checkpoints import StoreCheckpointer

    _save = StoreCheckpointer.save

    def _save_then_pause(self, state):
        _save(self, state)
        partial = _marker + ".partial"
        with open(partial, "w") as f:
            f.write(f"{os.getpid()} {self.label} {state.epoch}\n")
        os.replace(partial, _marker)  # the test sees the marker whole or not at all
        time.sleep(900)  # killed in here

    StoreCheckpointer.save = _save_then_pause
