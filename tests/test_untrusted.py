"""Artifacts of unknown origin: pickled model weights, pickled trainer state and planted cache records are refused
without running what they carry. Each payload, if it ran, would create a marker file; the tests check it did not."""

from __future__ import annotations

import base64
import json
import pickle
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import torch
from prefect import flow
from safetensors.torch import load_file

from larev.models.checkpoint import TRAINER_FILE, TrainingState, capture_rng, read_state, write_state
from larev.config import ModelConfig
from larev.errors import ConfigError
from larev.llm import HFSeq2SeqGenerator
from larev.models.evaluator import load_evaluator, load_hf_checkpoint, save_evaluator
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_bytes
from tasks.runtime.results import RESULT_SERIALIZER, UntrustedResultError
from tasks.runtime.runner import StepRunner
from tests.helpers import tiny_evaluator


class Payload:
    """Unpickling this calls open(marker, "w"): it creates the marker file (a stand-in for os.system)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


# ------------------------------------------------------------------------------------------- model weights


@pytest.fixture
def pickled_model_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A larev evaluator directory whose weights are only a pickle (pytorch_model.bin) carrying a payload."""
    path = save_evaluator(tiny_evaluator(["premise hypothesis entailment neutral"]), tmp_path / "model")
    weights = load_file(str(path / "model.safetensors"))
    (path / "model.safetensors").unlink()
    marker = tmp_path / "weights-payload-ran"
    torch.save({**weights, "payload": Payload(marker)}, path / "pytorch_model.bin")
    return path, marker


def test_evaluator_with_only_pickled_weights_is_refused(pickled_model_dir, monkeypatch):
    path, marker = pickled_model_dir
    loads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    with pytest.raises(ConfigError, match=r"holds pickled weights \(pytorch_model.bin\) and no safetensors: larev "
                                          r"never unpickles"):
        load_evaluator(path, device="cpu")
    with pytest.raises(ConfigError, match=r"pytorch_model.bin.*never unpickles"):
        load_hf_checkpoint(ModelConfig(backbone=str(path)))
    with pytest.raises(ConfigError, match="cannot load the Hugging Face seq2seq model"):
        HFSeq2SeqGenerator(str(path), device="cpu").generate_batch(["paraphrase: x"])
    assert loads == [] and not marker.exists()  # the pickle was never opened


# ----------------------------------------------------------------------------------------- trainer state


def test_read_state_refuses_a_pickled_object_in_the_trainer_state(tmp_path):
    state = TrainingState(epoch=1, model={"w": torch.zeros(2)}, optimizer={}, scheduler={},
                          rng=capture_rng(torch.Generator().manual_seed(0)), best_score=0.0, best_epoch=1,
                          best_model=None)
    write_state(state, tmp_path)
    assert read_state(tmp_path).epoch == 1  # the genuine checkpoint loads
    genuine = torch.load(tmp_path / TRAINER_FILE, weights_only=True)
    marker = tmp_path / "trainer-payload-ran"
    torch.save({**genuine, "optimizer": {"state": Payload(marker)}}, tmp_path / TRAINER_FILE)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        read_state(tmp_path)
    assert not marker.exists()


# ----------------------------------------------------------------------------------------- cache records

ECHO_CALLS: list[str] = []


@larev_task("echo")
def echo(store: ArtifactStore, text: str) -> dict[str, Any]:
    """A larev step returning what larev steps return: refs inside containers."""
    ECHO_CALLS.append(text)
    ref = put_bytes(store, "echo.txt", text.encode())
    return {"refs": [ref, None], "text": text}


@flow(name="larev-untrusted-echo")
def echo_flow(root: str, text: str) -> tuple[dict[str, Any], bool]:
    runner = StepRunner(ArtifactStore(root))
    result = runner.run(echo, runner.store, text)
    return result, runner.records[0].cached


def only_record(root: Path) -> Path:
    (record,) = [p for p in (root / "_prefect" / "results").iterdir() if p.is_file()]
    return record


def test_result_serializer_decodes_only_larev_results():
    ref = ArtifactRef(uri="/r/echo/f/echo.txt", key="echo/f/echo.txt", digest="0" * 64, kind="text")
    value = {"refs": [ref, None], "text": "x", "n": 1.5}
    blob = RESULT_SERIALIZER.dumps(value)
    assert RESULT_SERIALIZER.loads(blob) == value
    for name in ("os.system", "prefect.serializers.PickleSerializer", "storage.store.ArtifactStore"):
        with pytest.raises(UntrustedResultError, match=f"names the class '{name}'.*only hold "
                                                       r"\['storage.ref.ArtifactRef'\]"):
            RESULT_SERIALIZER.loads(blob.replace(b"storage.ref.ArtifactRef", name.encode()))


@pytest.mark.usefixtures("prefect_harness")
def test_planted_cache_record_is_ignored_and_the_step_reruns(tmp_path, monkeypatch, caplog):
    """A record whose value names another class is never decoded (nothing is imported): Prefect's cache lookup
    (ResultStore.exists deserializes the record and counts any error as 'no record') takes it for a miss, so the
    step reruns and overwrites the record."""
    root = tmp_path / "store"
    ECHO_CALLS.clear()
    first, cached = echo_flow(str(root), "hello")
    assert not cached and ECHO_CALLS == ["hello"]
    record_file = only_record(root)
    record = json.loads(record_file.read_text())
    assert record["metadata"]["serializer"]["object_decoder"] == "tasks.runtime.results.safe_object_decoder"
    assert '"__class__": "storage.ref.ArtifactRef"' in record["result"]
    again, cached = echo_flow(str(root), "hello")
    assert cached and ECHO_CALLS == ["hello"] and again == first  # a genuine record is served

    # plant: the value names a class in a module that leaves a marker when it is imported
    module = f"larev_planted_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "planted-module-imported"
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / f"{module}.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n\nclass Evil:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "planted"))
    record["result"] = record["result"].replace("storage.ref.ArtifactRef", f"{module}.Evil")
    record_file.write_text(json.dumps(record))

    rerun, cached = echo_flow(str(root), "hello")
    assert not marker.exists() and module not in sys.modules
    assert any(f"ignoring cache record {record_file} of step 'echo': it names the class '{module}.Evil'" in r.message
               for r in caplog.records)
    assert not cached and ECHO_CALLS == ["hello", "hello"] and rerun == first  # recomputed, same output
    assert only_record(root) == record_file and "larev_planted" not in record_file.read_text()  # overwritten
    assert echo_flow(str(root), "hello")[1]  # and served from the cache again


@pytest.mark.usefixtures("prefect_harness")
def test_planted_record_naming_the_pickle_serializer_is_refused(tmp_path):
    root = tmp_path / "store"
    echo_flow(str(root), "pickle")
    record_file = only_record(root)
    record = json.loads(record_file.read_text())
    marker = tmp_path / "pickle-payload-ran"
    record["metadata"]["serializer"] = {"type": "pickle", "picklelib": "pickle"}
    record["result"] = base64.encodebytes(pickle.dumps(Payload(marker))).decode()
    record_file.write_text(json.dumps(record))
    echo_flow(str(root), "pickle")
    assert not marker.exists()

