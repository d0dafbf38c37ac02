"""Signatures (larev/signature.py) and what enters them (tasks/metric.py): pure checks with values by hand."""

from __future__ import annotations

import hashlib

import pytest

from larev.signature import (describe_difference, make_signature, metric_of, parse_signature, settings_digest,
                             signature_difference)


def test_a_signature_reads_as_its_fields_and_its_settings_digest_is_canonical_json():
    digest = hashlib.sha256(b'{"a":1,"b":[2,3]}').hexdigest()[:8]
    assert settings_digest({"b": [2, 3], "a": 1}) == settings_digest({"a": 1, "b": [2, 3]}) == digest
    signature = make_signature("larev", "v1", "minilm-frozen", "ab" * 32, {"a": 1, "b": [2, 3]}, 42, "0.1.0")
    assert signature == f"metric:larev.v1|backbone:minilm-frozen@abababab|settings:{digest}|seed:42|larev:0.1.0"
    assert parse_signature(signature) == {"metric": "larev.v1", "backbone": "minilm-frozen@abababab",
                                          "settings": digest, "seed": "42", "larev": "0.1.0"}
    assert metric_of(signature) == "larev"
    embedded = make_signature("larev_vs_empty", "v1", "embedded", None, {}, 0, "0.1.0")
    assert embedded.startswith("metric:larev_vs_empty.v1|backbone:embedded|") and metric_of(embedded) == \
        "larev_vs_empty"


def test_differences_are_named_field_by_field():
    a = make_signature("rev", "v1", "embedded", None, {"lr": 1e-3}, 42, "0.1.0")
    assert signature_difference(a, a) == [] and describe_difference(a, a) == "the signatures are equal"
    b = make_signature("rev", "v1", "embedded", None, {"lr": 2e-3}, 7, "0.1.0")
    assert signature_difference(a, b) == ["settings", "seed"]
    line = describe_difference(a, b, "gold", "mine")
    assert line.startswith("signatures differ in settings (gold ") and "seed (gold 42, mine 7)" in line
    c = make_signature("rev", "v2", "embedded", None, {"lr": 1e-3}, 42, "0.1.0")
    assert signature_difference(a, c) == ["metric"]  # a new definition version is a different metric


@pytest.mark.parametrize("bad", ["", "metric:rev.v1", "metric:rev.v1|backbone:e|settings:1|seed:1|larev:1|x:2",
                                 "backbone:e|metric:rev.v1|settings:1|seed:1|larev:1", "nonsense"])
def test_a_string_that_is_not_a_signature_is_refused(bad):
    with pytest.raises(ValueError, match="not a larev signature"):
        parse_signature(bad)
    with pytest.raises(ValueError, match="must be non-empty and hold no"):
        make_signature("a|b", "v1", "embedded", None, {}, 0, "0.1.0")


def test_what_enters_a_metrics_signature():
    """The run's own sections and the metric's, data files by digest (not path), placement left out; RQ / LAS sign
    with RORA's section, larev_vs_empty with LAREV's and its own."""
    from flows.metrics import METRICS
    from tasks.metric import metric_settings

    by_name = {m.name: m for m in METRICS}
    params = {"data": {"source": "files", "train": "/a/train.parquet"}, "baselines": {"seed": 0},
              "model": {"backbone": "embedded"}, "train": {"seed": 42, "device": "auto", "epochs": 3},
              "score": {"normalisation": "label_set"}, "larev": {"enabled": True}, "larev_vs_empty": {"enabled": True},
              "rora": {"enabled": True}, "run_name": "x", "progress": True}
    rev = metric_settings(by_name["rev"], params, {"train": "f" * 64})
    assert rev == {"data": {"source": "files", "train": "sha256:" + "f" * 64}, "baselines": {"seed": 0},
                   "model": {"backbone": "embedded"}, "train": {"seed": 42, "epochs": 3},
                   "score": {"normalisation": "label_set"}}
    assert set(metric_settings(by_name["larev"], params)) == {*rev, "larev"}
    assert set(metric_settings(by_name["larev_vs_empty"], params)) == {*rev, "larev", "larev_vs_empty"}
    accuracy = next(m for m in METRICS if "rq" in m.names())
    assert set(metric_settings(accuracy, params)) == {*rev, "rora"}
    moved = {**params, "data": {"source": "files", "train": "/elsewhere/train.parquet"}}
    assert metric_settings(by_name["rev"], moved, {"train": "f" * 64}) == rev  # same file, another path


def test_training_seeds_enter_the_settings_digest_relative_to_the_runs_seed():
    """A benchmark's seeds move every training seed by one offset: only the signature's `seed` field changes. A
    seed set apart from the others, or the data generator's seed, changes the settings digest."""
    from flows.metrics import METRICS
    from flows.pipeline import PipelineParams
    from larev.bench.quality import reseeded
    from larev.signature import relative_seeds
    from tasks.metric import metric_settings

    settings = {"data": {"demo": {"seed": 7}}, "train": {"seed": 42, "epochs": 3},
                "larev": {"probe_train": {"seed": 42}, "antonyms": {"seed": 0}, "ablations": [{"seed": 44}]}}
    assert relative_seeds(settings, 42) == {"data": {"demo": {"seed": 7}}, "train": {"seed": 0, "epochs": 3},
                                            "larev": {"probe_train": {"seed": 0}, "antonyms": {"seed": -42},
                                                      "ablations": [{"seed": 2}]}}
    larev = next(m for m in METRICS if m.name == "larev")

    def signature(params: PipelineParams) -> str:
        dumped = params.model_dump(mode="json")
        return make_signature("larev", "v1", "embedded", None, metric_settings(larev, dumped), dumped["train"]["seed"],
                              "0.1.0")

    base = PipelineParams()
    third = reseeded(base, 3)
    assert third.train.seed == base.train.seed + 3 and third.larev.probe_train.seed != base.larev.probe_train.seed
    assert signature_difference(signature(base), signature(third)) == ["seed"]
    apart = base.model_copy(update={"larev": base.larev.model_copy(update={
        "probe_train": base.larev.probe_train.model_copy(update={"seed": base.larev.probe_train.seed + 1})})})
    assert signature_difference(signature(base), signature(apart)) == ["settings"]
    demo = base.data.demo.model_copy(update={"seed": base.data.demo.seed + 1})
    other_data = base.model_copy(update={"data": base.data.model_copy(update={"demo": demo})})
    assert signature_difference(signature(base), signature(other_data)) == ["settings"]
