"""What a score is, as one digest: every registered metric's formula version and the settings its steps resolve by
default, for every backbone larev knows, task and kind of data, with what the presets fill and the named
backbones' checkpoints.

A change to any of it changes what some score is: the package version must move with it (CHANGELOG.md's newest
section names the version and this digest; tests/test_versions.py fails until both moved), so a signature's
`larev:` field says which definitions computed a score. `python -m flows.definitions` prints the digest.
"""

from __future__ import annotations

import hashlib
import json

#: the backbones whose defaults a score depends on: the embedded model and the named offline checkpoints
KNOWN_BACKBONES = ("embedded", "minilm", "minilm-frozen", "minilm-reader")


def score_definitions() -> dict:
    """The metrics' formula versions and their default settings resolved per (backbone, task, data), what every
    preset fills (for the backbones not listed here too), and the named backbones' specifications."""
    from dataclasses import asdict

    from flows.metrics import METRICS
    from flows.pipeline import PipelineParams
    from larev.models.pretrained import NAMED_BACKBONES
    from larev.presets import DATA_KINDS, TASKS, load_presets, resolve_settings

    metrics = {m.name: {"score_names": list(m.names()), "definition_version": m.definition_version,
                        "signature_sections": list(m.signature_sections())} for m in METRICS}
    defaults = {}
    for backbone in KNOWN_BACKBONES:
        for task in TASKS:
            for data in DATA_KINDS:
                params = PipelineParams.model_validate({"model": {"backbone": backbone}}).model_dump(mode="json")
                filled, _ = resolve_settings(params, backbone=backbone, task=task, data=data)
                for where in ("run_name", "artifact_root", "run_dir", "progress", "gpu_deployment", "scale_out",
                              "concurrent_chains", "rationales"):
                    filled.pop(where, None)  # where a run runs and what it scores, not what a score is
                for where in ("train", "test", "validation", "train_rows", "test_rows", "column_map"):
                    filled["data"].pop(where, None)  # which files: the data, not the definitions
                defaults[f"{backbone}/{task}/{data}"] = filled
    presets = {p.name: {"backbone": p.backbone, "task": p.task, "data": p.data, "settings": p.settings}
               for p in load_presets()}  # what they fill, not the prose saying where it was chosen
    return {"metrics": metrics, "defaults": defaults, "presets": presets,
            "backbones": {name: asdict(spec) for name, spec in NAMED_BACKBONES.items()}}


def definitions_digest() -> str:
    """sha256 of `score_definitions()` as canonical JSON, its first 16 hex digits."""
    blob = json.dumps(score_definitions(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


if __name__ == "__main__":
    print(definitions_digest())
