"""A score's signature: one short, readable string per (metric, run) that says how its numbers were made, as
SacreBLEU's signature does for BLEU.

    metric:larev.v1|backbone:embedded|settings:3f9a01c2|seed:42|larev:0.2.0

Fields, in order (SIGNATURE_FIELDS):

  metric    the score rows' metric name and its definition's version (`Metric.definition_version`): a new formula
            under a name is a new version
  backbone  the evaluator backbone, with the first 8 hex digits of the sha256 of the pretrained weights it starts
            from (`backbone@digest`; the embedded model is built from the settings and has none)
  settings  the first 8 hex digits of the sha256 of the resolved settings that enter training or scoring (the data
            and its files' digests, baselines, model, training, scoring, and the metric's own resolved section),
            as canonical JSON, with every training seed written relative to `seed` (`relative_seeds`): runs that
            differ only by one seed offset, as a benchmark's seeds do, share it
  seed      the evaluators' training seed (`train.seed`)
  larev     the larev version that scored

Two scores are comparable only when their signatures are equal; `signature_difference` names the fields that
differ. Pure: no Prefect, no models.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

SIGNATURE_FIELDS = ("metric", "backbone", "settings", "seed", "larev")
SIGNATURE_COLUMN = "signature"
DIGEST_CHARS = 8


def settings_digest(settings: Any) -> str:
    """The first DIGEST_CHARS hex digits of the sha256 of `settings` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def relative_seeds(settings: Any, seed: int) -> Any:
    """`settings` (run.json-shaped sections) with every `seed` field outside the `data` section replaced by its
    offset from `seed`, the run's training seed. A benchmark moves every training seed by the same offset (a model's
    initialisation, data order, the probe and antonym draws), which then changes the signature's `seed` field only;
    a seed set apart from the others still changes the settings digest. The data generator's seed stays as it is:
    it changes the data, not the training."""
    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v - seed if k == "seed" and isinstance(v, int) and not isinstance(v, bool) else walk(v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    if not isinstance(settings, dict):
        return settings
    return {k: v if k == "data" else walk(v) for k, v in settings.items()}


def make_signature(metric: str, definition_version: str, backbone: str, weights_sha256: str | None,
                   settings: Any, seed: int, version: str) -> str:
    """The signature string (module docstring). `weights_sha256`: the pretrained weights' digest, or None for a
    backbone built from its settings."""
    for name, value in (("metric", metric), ("definition_version", definition_version), ("backbone", backbone),
                        ("version", version)):
        if not value or "|" in value:
            raise ValueError(f"signature field {name} must be non-empty and hold no '|', got {value!r}")
    backbone_field = backbone if not weights_sha256 else f"{backbone}@{weights_sha256[:DIGEST_CHARS]}"
    fields = {"metric": f"{metric}.{definition_version}", "backbone": backbone_field,
              "settings": settings_digest(relative_seeds(settings, seed)), "seed": str(seed), "larev": version}
    return "|".join(f"{k}:{fields[k]}" for k in SIGNATURE_FIELDS)


def parse_signature(signature: str) -> dict[str, str]:
    """{field: value} of a signature string; ValueError naming what is wrong when it is not one."""
    fields: dict[str, str] = {}
    for part in signature.split("|"):
        name, sep, value = part.partition(":")
        if not sep or name not in SIGNATURE_FIELDS or name in fields:
            raise ValueError(f"not a larev signature (expected {'|'.join(f + ':...' for f in SIGNATURE_FIELDS)}): "
                             f"{signature!r}")
        fields[name] = value
    if tuple(fields) != SIGNATURE_FIELDS:
        raise ValueError(f"not a larev signature (fields {list(fields)}, expected {list(SIGNATURE_FIELDS)}): "
                         f"{signature!r}")
    return fields


def metric_of(signature: str) -> str:
    """The metric name a signature is for (its metric field without the definition version)."""
    return parse_signature(signature)["metric"].rsplit(".", 1)[0]


def signature_difference(a: str, b: str) -> list[str]:
    """The fields whose values differ between signatures `a` and `b`, in SIGNATURE_FIELDS order ([] when equal)."""
    fa, fb = parse_signature(a), parse_signature(b)
    return [f for f in SIGNATURE_FIELDS if fa[f] != fb[f]]


def describe_difference(a: str, b: str, what_a: str = "a", what_b: str = "b") -> str:
    """One line naming the fields in which two signatures differ, with both values of each."""
    diff = signature_difference(a, b)
    if not diff:
        return "the signatures are equal"
    fa, fb = parse_signature(a), parse_signature(b)
    parts = ", ".join(f"{f} ({what_a} {fa[f]}, {what_b} {fb[f]})" for f in diff)
    return f"signatures differ in {parts}"
