"""Per-epoch training checkpoints: everything a training loop needs to continue exactly where it stopped.

A checkpoint holds, after epoch n:
  - the model's weights and the best epoch's weights so far (safetensors),
  - the optimizer's and the LR scheduler's state and the random number generators' states
    (torch CPU / CUDA, the data-order generator; a torch file read back with `weights_only=True`, so loading
    one never runs code), Python's and NumPy's RNG state (JSON),
  - the loop's bookkeeping (history, step counter, ...) as JSON.
Restoring all of it makes a resumed run compute the same weights as an uninterrupted one with the same seed.

Where checkpoints live is the caller's business: a `Checkpointer` has `latest()` and `save(state)`.
`DirectoryCheckpointer` keeps them in a local directory; the task layer keeps them in the artifact store.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from safetensors.torch import load_file, save_file

log = logging.getLogger(__name__)

MODEL_FILE = "model.safetensors"
BEST_FILE = "best_model.safetensors"
TRAINER_FILE = "trainer_state.pt"
PROGRESS_FILE = "progress.json"


@dataclass
class TrainingState:
    """A training loop's full state after `epoch` completed epochs."""

    epoch: int
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    rng: dict[str, Any]
    best_score: float
    best_epoch: int
    best_model: dict[str, torch.Tensor] | None
    progress: dict[str, Any] = field(default_factory=dict)  # loop bookkeeping: JSON-able values only


class Checkpointer(Protocol):
    """Stores training states; `latest()` returns the most recent complete one, or None."""

    def latest(self) -> TrainingState | None: ...

    def save(self, state: TrainingState) -> None: ...


def detached_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A CPU copy of the model's weights in which no two entries share memory (tied weights are copied)."""
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}


def capture_rng(generator: torch.Generator) -> dict[str, Any]:
    """The states of every RNG a training loop draws from: data order, dropout (torch), Python, NumPy."""
    np_state = np.random.get_state()
    return {
        "generator": generator.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": _jsonable(random.getstate()),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
    }


def restore_rng(generator: torch.Generator, rng: dict[str, Any]) -> None:
    """Put every RNG back in the state `capture_rng` recorded."""
    generator.set_state(rng["generator"])
    torch.set_rng_state(rng["torch"])
    if rng.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    version, internal, gauss = rng["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = rng["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def write_state(state: TrainingState, directory: str | os.PathLike[str]) -> None:
    """Write a training state into `directory` (created if missing)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    save_file(state.model, str(out / MODEL_FILE))
    if state.best_model is not None:
        save_file(state.best_model, str(out / BEST_FILE))
    tensors = {k: v for k, v in state.rng.items() if k in ("generator", "torch", "cuda")}
    torch.save({"optimizer": state.optimizer, "scheduler": state.scheduler, "rng": tensors}, out / TRAINER_FILE)
    meta = {"epoch": state.epoch, "best_score": state.best_score, "best_epoch": state.best_epoch,
            "python_rng": state.rng["python"], "numpy_rng": state.rng["numpy"], "progress": state.progress}
    (out / PROGRESS_FILE).write_text(json.dumps(meta))


def read_state(directory: str | os.PathLike[str]) -> TrainingState:
    """Read a training state written by `write_state`. Torch files are loaded with weights_only=True."""
    src = Path(directory)
    meta = json.loads((src / PROGRESS_FILE).read_text())
    trainer = torch.load(src / TRAINER_FILE, map_location="cpu", weights_only=True)
    best = load_file(str(src / BEST_FILE)) if (src / BEST_FILE).exists() else None
    rng = {**trainer["rng"], "python": meta["python_rng"], "numpy": meta["numpy_rng"]}
    return TrainingState(epoch=int(meta["epoch"]), model=load_file(str(src / MODEL_FILE)),
                         optimizer=trainer["optimizer"], scheduler=trainer["scheduler"], rng=rng,
                         best_score=float(meta["best_score"]), best_epoch=int(meta["best_epoch"]),
                         best_model=best, progress=meta["progress"])


class DirectoryCheckpointer:
    """Checkpoints in a local directory: `<root>/epoch-NNNN/`, written under a temporary name and renamed
    into place (a directory with that name is complete); only the latest is kept."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _epochs(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("epoch-*") if p.is_dir())

    def latest(self) -> TrainingState | None:
        found = self._epochs()
        return read_state(found[-1]) if found else None

    def save(self, state: TrainingState) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        write_state(state, tmp)
        final = self.root / f"epoch-{state.epoch:04d}"
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for old in self._epochs():
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
