"""The three IRM environments (thesis section 4.5.2, table 4.2) built from baselines and their leakage terms."""

from __future__ import annotations

import math
import random
import re
import threading
import time

import polars as pl
import pytest
import torch

from larev.methods.leakage_aware.antonyms import AntonymConfig
from larev.methods.leakage_aware.environments import (ABSENT, ENVIRONMENT_SCHEMA, build_environments, coverage,
                                                     masked_baseline)
from larev.errors import InputError
from larev.llm import GenerationError

MASK = "<mask>"
OFFLINE = AntonymConfig(wordnet_path="/nonexistent")  # no WordNet: the same result on every machine

NLI_B = "The presence of cyclists waiting at a crossroads implies that they are on a road."
QA_B = "The man didn't like stepping on the cold tile, so he put carpeting in the bedroom."


def _row(id: str, b: str, term: str | None, *, task: str = "nli", label: str = "entailment",
         question: str | None = None, choices: list[str] | None = None) -> dict:
    start = b.index(term) if term else None
    return {"id": id, "task": task, "question": question, "choices": choices, "label": label, "baseline": b,
            "term": term, "start": start, "end": start + len(term) if term else None}


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"id": pl.String, "task": pl.String, "question": pl.String,
                                      "choices": pl.List(pl.String), "label": pl.String, "baseline": pl.String,
                                      "term": pl.String, "start": pl.Int64, "end": pl.Int64})


ROWS = [
    _row("nli-1", NLI_B, "implies"),
    _row("qa-1", QA_B, "bedroom", task="qa", label="bedroom", question="Where would you put carpeting?",
         choices=["bedroom", "attic", "kitchen", "garage", "office"]),
    _row("none-1", "A dog runs.", None),
    _row("mask-1", "A dog runs through the snow implies an animal moves.", "snow"),
    _row("nli-2", "Given that a dog runs, it cannot be that an animal sleeps.", "cannot", label="contradiction"),
]


def test_three_rows_per_id_in_order():
    env = build_environments(_frame(ROWS), MASK, OFFLINE)
    assert env.schema == pl.Schema(ENVIRONMENT_SCHEMA)
    assert env["id"].to_list() == [r["id"] for r in ROWS for _ in range(3)]
    assert env["env"].to_list() == ["E1", "E2", "E3"] * len(ROWS)
    by = {(r["id"], r["env"]): r for r in env.iter_rows(named=True)}
    for row in ROWS:
        assert by[(row["id"], "E1")]["baseline"] == row["baseline"]
        assert {by[(row["id"], e)]["term"] for e in ("E1", "E2", "E3")} == {row["term"]}


def test_mask_sits_exactly_at_the_term_span():
    env = build_environments(_frame(ROWS), MASK, OFFLINE)
    for row in ROWS:
        if row["term"] is None:
            continue
        b, s, e = row["baseline"], row["start"], row["end"]
        e2 = env.filter((pl.col("id") == row["id"]) & (pl.col("env") == "E2"))["baseline"].item()
        assert e2 == b[:s] + MASK + b[e:] == masked_baseline(b, s, e, MASK)
    assert masked_baseline("A implies B.", 2, 9, "[M]") == "A [M] B."


def test_antonyms_change_only_the_span_and_record_their_backend():
    env = build_environments(_frame(ROWS), MASK, OFFLINE)
    e3 = {r["id"]: r for r in env.filter(pl.col("env") == "E3").iter_rows(named=True)}
    assert e3["nli-1"]["baseline"] == NLI_B.replace("implies", "contradicts")
    assert e3["nli-1"]["backend"] == "lexicon"
    assert e3["nli-2"]["baseline"] == "Given that a dog runs, it must be that an animal sleeps."
    qa = e3["qa-1"]
    assert qa["backend"] == "distractor"
    assert re.fullmatch(re.escape(QA_B[:-len("bedroom.")]) + r"(attic|kitchen|garage|office)\.", qa["baseline"])
    # nothing can reverse 'snow' offline without WordNet: the row has no E3, not a copy of its E2
    assert e3["mask-1"]["backend"] == ABSENT and e3["mask-1"]["baseline"] is None
    e2_text = {r["id"]: r["baseline"] for r in env.filter(pl.col("env") == "E2").iter_rows(named=True)}
    assert all(e3[i]["baseline"] != e2_text[i] for i in e3 if e3[i]["backend"] != "none")  # E3 is never E2
    assert coverage(env) == {"E2": 1.0, "E3": 0.75}  # 3 of the 4 rows with a leakage term have an antonym
    for row in ROWS:
        if row["term"] is not None and e3[row["id"]]["backend"] == "lexicon":
            text = e3[row["id"]]["baseline"]
            assert text.startswith(row["baseline"][:row["start"]])
            assert text.endswith(row["baseline"][row["end"]:]) and text != row["baseline"]
    assert env.filter(pl.col("env") == "E1")["backend"].unique().to_list() == ["original"]
    e2 = env.filter(pl.col("env") == "E2")
    assert e2["backend"].to_list() == ["none" if r["term"] is None else "mask" for r in ROWS]


def test_phi_la_trains_on_rows_that_lack_an_environment():
    """IRM over the environments each row has: rows without E3 add no E3 term, and validation of E3 reads only the
    rows that have it; the parameters move and every environment is validated."""
    from larev.config import TrainConfig
    from larev.formats import rationale_input
    from larev.methods.leakage_aware.config import LeakageAwareConfig
    from larev.methods.leakage_aware.training import LAInstance, train_leakage_aware
    from tests.helpers import tiny_evaluator

    labels = ["entailment", "contradiction", "neutral"]
    data = [LAInstance(inputs=(rationale_input("a fruit", f"a man {w} a dog"),
                               rationale_input("a fruit", "a man <mask> a dog"),
                               None if i % 3 == 0 else rationale_input("a fruit", f"a man not {w} a dog")),
                       probe_input="", label=y, candidates=tuple(labels))
            for i, (w, y) in enumerate(zip(["implies", "contradicts", "unrelated"] * 5, labels * 5))]
    phi_la = tiny_evaluator(["a fruit man dog implies contradicts unrelated not <mask>"] + labels, seed=3)
    before = {n: p.clone() for n, p in phi_la.model.named_parameters()}
    for irm_on in ("tokens", "label_set"):
        result = train_leakage_aware(phi_la, None, data[:12], data[12:], [labels] * 3,
                                     TrainConfig(epochs=1, batch_size=4), LeakageAwareConfig(lambda_probe=0.0,
                                                                                             irm_on=irm_on),
                                     "nli", progress=False, log_every=1)
        assert {"val_logp_E1", "val_logp_E2", "val_logp_E3"} <= set(result.history[0])
        assert all(math.isfinite(t.erm) and t.irm >= 0 for t in result.trace)
    assert any(not torch.equal(p, before[n]) for n, p in phi_la.model.named_parameters())
    with pytest.raises(ValueError, match="never the first"):
        train_leakage_aware(phi_la, None, [LAInstance((None, "x", "y"), "", "neutral", tuple(labels))], [], [],
                            TrainConfig(epochs=1), LeakageAwareConfig(lambda_probe=0.0), "nli", progress=False)


def test_rows_without_a_leakage_term():
    env = build_environments(_frame(ROWS), MASK, OFFLINE).filter(pl.col("id") == "none-1")
    assert env["baseline"].to_list() == ["A dog runs."] * 3
    assert env["backend"].to_list() == ["original", "none", "none"]
    assert env["term"].to_list() == [None, None, None]


def test_minimal_columns_and_empty_input():
    rows = pl.DataFrame({"id": ["a"], "baseline": ["X implies Y."], "term": ["implies"], "start": [2], "end": [9]})
    env = build_environments(rows, MASK, OFFLINE)
    assert env["baseline"].to_list() == ["X implies Y.", "X <mask> Y.", "X contradicts Y."]
    empty = build_environments(rows.clear(), MASK, OFFLINE)
    assert empty.is_empty() and empty.schema == pl.Schema(ENVIRONMENT_SCHEMA)


@pytest.mark.parametrize("change, message", [
    ({"term": "contradicts"}, "does not match"),
    ({"start": 0, "end": 500}, "not inside"),
    ({"start": None}, "all null or all set"),
])
def test_bad_rows_are_input_errors(change, message):
    row = {**_row("nli-1", NLI_B, "implies"), **change}
    with pytest.raises(InputError, match=message) as err:
        build_environments(_frame([row]), MASK, OFFLINE)
    assert err.value.row == 0


def test_duplicate_ids_and_missing_columns_are_input_errors():
    with pytest.raises(InputError, match="duplicate id"):
        build_environments(_frame([ROWS[0], ROWS[0]]), MASK, OFFLINE)
    with pytest.raises(InputError, match="missing column"):
        build_environments(_frame(ROWS).drop("start"), MASK, OFFLINE)


class SlowEcho:
    """A fake LLM answering like a good model after a random delay, so replies finish out of order."""

    model = "fake"

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    def generate(self, prompt: str) -> str:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(random.uniform(0.0, 0.03))
        with self.lock:
            self.active -= 1
        masked = re.search(r"Masked sentence: <data>(.*?)</data>", prompt).group(1)
        term = re.search(r"The masked term to be changed: <data>(.*?)</data>", prompt).group(1)
        return masked.replace("<mask>", f"not-{term}")


def test_llm_environments_run_concurrently_but_keep_row_order():
    rows = [_row(f"r{i}", f"Sentence {i} mentions word{i} here.", f"word{i}") for i in range(24)]
    generator = SlowEcho()
    config = AntonymConfig(backend="llm", max_concurrency=4, wordnet_path="/nonexistent")
    env = build_environments(_frame(rows), MASK, config, generator=generator)
    e3 = env.filter(pl.col("env") == "E3")
    assert e3["baseline"].to_list() == [f"Sentence {i} mentions not-word{i} here." for i in range(24)]
    assert e3["backend"].unique().to_list() == ["llm:fake"]
    assert 1 < generator.peak <= 4


class Broken:
    """A fake LLM whose every request fails for good."""

    model = "broken"

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def generate(self, prompt: str) -> str:
        with self.lock:
            self.calls += 1
        time.sleep(0.005)
        raise GenerationError("HTTP 403 PERMISSION_DENIED: bad key")


def test_a_failing_llm_stops_the_run_early():
    rows = [_row(f"r{i}", f"Sentence {i} mentions word{i} here.", f"word{i}") for i in range(200)]
    generator = Broken()
    config = AntonymConfig(backend="llm", max_concurrency=4, wordnet_path="/nonexistent")
    with pytest.raises(GenerationError, match="5 requests in a row failed"):
        build_environments(_frame(rows), MASK, config, generator=generator)
    assert generator.calls < 20  # not one request per row


def test_a_fourth_environment_is_one_entry_and_reaches_training(monkeypatch):
    """CONTRIBUTING.md: a new environment is one more (name, builder) entry; the table, the instances and phi_LA's
    training (one input per environment, per-environment validation) follow without another change."""
    import larev.methods.leakage_aware.environments as environments
    from larev.config import TrainConfig
    from larev.leakage.text import replace_spans
    from larev.methods.leakage_aware.config import LeakageAwareConfig
    from larev.methods.leakage_aware.training import train_leakage_aware
    from larev.methods.leakage_aware.instances import la_instances
    from tests.helpers import tiny_evaluator

    def deleted(requests, baselines, ctx):  # E5 (E4 is the label edits'): the leakage spans removed outright
        return [(b, "none") if r is None else (replace_spans(b, [(q.start, q.end, "") for q in r]), "delete")
                for r, b in zip(requests, baselines)]

    monkeypatch.setattr(environments, "ENVIRONMENTS", (*environments.ENVIRONMENTS, ("E5", deleted)))
    rows = [_row(f"n{i}", f"a man {w} a dog", w, label=y) for i, (w, y) in
            enumerate([("implies", "entailment"), ("contradicts", "contradiction"), ("unrelated", "neutral")] * 4)]
    table = build_environments(_frame(rows), MASK, OFFLINE)
    names = environments.environment_names(table)
    assert names == ["E1", "E2", "E3", "E5"]
    assert table.filter(pl.col("env") == "E5")["baseline"].to_list()[:2] == ["a man  a dog"] * 2
    wide = table.pivot(on="env", index="id", values="baseline").join(
        pl.DataFrame({"id": [r["id"] for r in rows], "label": [r["label"] for r in rows], "task": "nli",
                      "choices": [None] * len(rows), "rationale": "a fruit"},
                     schema_overrides={"choices": pl.List(pl.String)}), on="id")
    instances = la_instances(wide, names)
    assert all(len(x.inputs) == 4 for x in instances)
    phi_la = tiny_evaluator([r["baseline"] for r in rows] + ["a fruit", MASK, "entailment", "contradiction",
                                                               "neutral"])
    labels = [["entailment", "contradiction", "neutral"]] * 3
    result = train_leakage_aware(phi_la, None, instances[:9], instances[9:], labels,
                                 TrainConfig(epochs=1, batch_size=3), LeakageAwareConfig(lambda_probe=0.0), "nli",
                                 progress=False, env_names=tuple(names))
    assert {"val_logp_E1", "val_logp_E5"} <= set(result.history[0])
