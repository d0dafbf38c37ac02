"""QA end to end through the CLI on a tiny demo run: `bench quality --task qa` writes the natural-leakage table,
and `--human` / `bench human` score annotation files' explanations as new test examples with a per-row choice set."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from flows.cli import main
from larev.config import DemoDataConfig
from larev.data.sources import DataConfig
from tests.test_flows import tiny_params

pytestmark = pytest.mark.usefixtures("prefect_harness")
METRICS = ["rev", "larev", "rora", "rq", "las"]


def _fine_grained_file(path: Path, test: pl.DataFrame) -> Path:
    """Judgements of two explanation sources on new questions (ids not in the run) with three of the five
    choices: the label and the first two others."""
    rows = []
    for k, ex in enumerate(test.head(6).iter_rows(named=True)):
        choices = [ex["label"], *[c for c in ex["choices"] if c != ex["label"]][:2]]
        for source, text, votes in [("human", ex["rationale"], (1, 1, 0)),
                                    ("model", f"It is {ex['label']}.", (0, 0, k % 2))]:
            for annotator, vote in enumerate(votes):
                rows.append({"id": f"new-{k}", "question": ex["question"], "choices": choices, "label": ex["label"],
                             "source": source, "rationale": text, "annotator": annotator,
                             "new_info": 1 if vote else -1, "supports_label": 1 if vote else None})
    pl.DataFrame(rows).write_parquet(path)
    return path


@pytest.fixture(scope="module")
def qa_bench(tmp_path_factory):
    from larev.data.sources import load_data

    root = tmp_path_factory.mktemp("qa-bench")
    data = DataConfig(task="qa", demo=DemoDataConfig(task="qa", n_train=40, n_validation=8, n_test=12,
                                                     rationale_leakage=0.5))
    params = tiny_params(root, run_name="tiny-qa-bench", data=data)
    params_file = root / "params.json"
    params_file.write_text(params.model_dump_json())
    test = load_data(params.data).filter(pl.col("split") == "test")
    annotations = _fine_grained_file(root / "fine.parquet", test)
    out = root / "bench"
    code = main(["bench", "quality", "--params", str(params_file), "--out", str(out), "--bootstrap", "20",
                 "--no-stress", "--human", str(annotations)])
    return code, root, out, annotations, test


def test_qa_bench_quality_writes_the_natural_leakage_table(qa_bench):
    code, _, out, _, test = qa_bench
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    natural = results["natural_leakage"]
    assert sorted(natural) == sorted(METRICS)
    masked = pl.read_parquet(out / "answer_masked_rationales.parquet")
    restating = [i for i, r, y in test.select("id", "rationale", "label").iter_rows() if y.lower() in r.lower()]
    assert sorted(masked["id"]) == sorted(restating) and restating  # the planted restatements, found
    assert all("___" in r for r in masked["rationale"])
    for entry in natural.values():
        assert entry["share"] == pytest.approx(len(restating) / test.height)
        assert entry["restating_minus_masked"] == pytest.approx(entry["restating"] - entry["restating_masked"])
    assert "## Natural leakage" in (out / "results.md").read_text()


def test_bench_human_scores_new_questions_with_their_own_choices(qa_bench):
    code, _, out, _, _ = qa_bench
    assert code == 0
    human = json.loads((out / "human.json").read_text())
    fine = human["fine_grained"]
    assert list(fine) == METRICS
    for metric, entry in fine.items():
        assert set(entry["by_source"]) == {"human", "model"}, metric
        assert entry["n"] == 12
        # a metric whose tiny evaluators give every explanation one score (RQ / LAS: 0 gains) has no ranking
        assert (entry["spearman"] is None and metric in ("rq", "las")) or -1 <= entry["spearman"] <= 1
        assert entry["by_source"]["human"]["human"] == pytest.approx(2 / 3)
    assert human["files"]["fine"]["instances"] == 6 and human["files"]["fine"]["explanations"] == 12
    assert (out / "human.png").read_bytes()[:4] == b"\x89PNG" and "Spearman" in (out / "human.md").read_text()


def test_bench_human_refuses_an_annotation_file_of_another_task(qa_bench, tmp_path, capsys):
    _, root, _, _, _ = qa_bench
    nli = tmp_path / "snli.parquet"
    pl.DataFrame({"id": ["p1"] * 2, "premise": ["A dog runs."] * 2, "hypothesis": ["An animal moves."] * 2,
                  "label": ["entailment"] * 2, "candidate": [1, 2], "rationale": ["Dogs are animals."] * 2,
                  "annotator": [0, 0], "acceptable": [1, 0]}).write_parquet(nli)
    code = main(["bench", "human", "--run", str(root / "runs" / "tiny-qa-bench"), "--annotations", str(nli),
                 "--out", str(tmp_path / "out")])
    assert code == 2
    assert "NLI annotations, but the run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
