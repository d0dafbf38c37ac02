"""FTC and the AddText stress test as flow steps: on a tiny run's gold rationales (`larev ftc` / `larev addtext`),
inside the score flow, and cached on rerun."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from flows.cli import main
from flows.score import ScoreParams, score_rationales
from flows.stress import StressParams, stress_test
from larev.stress.addtext.config import AddTextConfig
from larev.errors import InputError
from larev.stress.ftc.config import FtcConfig
from larev.methods.rora.config import model_source
from tasks.runtime.sharding import ScaleOutConfig
from tests.test_flows import METRICS

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def trained_run(tiny_trained_run):
    return tiny_trained_run


def latest_artifact(key: str) -> str:
    """The data of the newest Prefect artifact with this key, as text (asked of the API over HTTP)."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    body = {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1, "offset": 0}
    response = httpx.post(PREFECT_API_URL.value().rstrip("/") + "/artifacts/filter", json=body, timeout=30)
    response.raise_for_status()
    assert response.json(), f"no Prefect artifact {key!r}"
    return str(response.json()[0]["data"])


def test_derived_sources_use_their_base_sources_models():
    assert model_source("leaky+addtext-rand-end", ["gold", "leaky"]) == "leaky"
    assert model_source("gpt+addtext-adv-start", ["gold", "leaky"]) == "gold"
    assert model_source("gold", ["gold"]) == "gold"


def test_stress_flow_on_the_runs_gold_rationales_then_a_cached_rerun(trained_run):
    root, run = trained_run
    params = StressParams(run=run["run_dir"], progress=False)
    result = stress_test(params)
    out = Path(result["run_dir"])
    assert {p.name for p in out.iterdir()} >= {"ftc.parquet", "ftc.json", "addtext_shift.parquet", "addtext.md",
                                               "addtext.png", "run.json"}

    ftc = json.loads((out / "ftc.json").read_text())
    gold = ftc["by_source"]["gold"]
    assert ftc["task_model"] == "theta" and list(ftc["by_source"]) == ["gold"]
    assert gold["n_examples"] == 12 and gold["n_extracted"] + gold["n_unextracted"] == gold["n"] >= 12
    assert gold["n_extracted"] > 0 and 0 <= gold["ftc_delta"] <= 1 and gold["ftc_kl"] <= 1
    table = pl.read_parquet(out / "ftc.parquet")
    done = table.filter(pl.col("reason").is_null())
    assert done.height == gold["n_extracted"] and done["x_cf"].null_count() == 0
    assert table.filter(pl.col("reason").is_not_null())["x_cf"].null_count() == gold["n_unextracted"]

    shift = pl.read_parquet(out / "addtext_shift.parquet")
    assert sorted(shift["metric"].unique()) == METRICS and set(shift["orig_source"]) == {"gold"}
    per_cell = shift.filter(pl.col("addtext_kind") != "all")
    assert per_cell.height == len(METRICS) * 3 * 3 and (per_cell["n"] == 12).all()
    assert (shift.filter(pl.col("addtext_kind") == "all")["n"] == 12 * 9).all()
    assert shift["rise_share"].is_between(0, 1).all() and shift["mean_shift"].is_not_null().all()
    assert "| rev |" in (out / "addtext.md").read_text()
    assert (out / "addtext.png").read_bytes()[:4] == b"\x89PNG"

    name = f"{Path(run['run_dir']).name}-stress"  # the UI shows the AddText report and the FTC table
    assert "| rev |" in latest_artifact(f"{name}-addtext") and "gold" in latest_artifact(f"{name}-ftc")

    again = stress_test(params)
    assert all(r.cached for r in again["steps"]), [r.step for r in again["steps"] if not r.cached]
    assert pl.read_parquet(Path(again["run_dir"]) / "addtext_shift.parquet").equals(shift)


def test_score_flow_runs_ftc_and_addtext_on_a_user_file(trained_run, tmp_path):
    root, run = trained_run
    test = pl.read_parquet(run["refs"]["examples"].uri).filter(pl.col("split") == "test")
    path = tmp_path / "model.jsonl"
    test.select("id", pl.lit("my-model").alias("source"), "rationale", "label").write_ndjson(path)
    result = score_rationales(ScoreParams(run=run["run_dir"], rationales=str(path), name="with-stress",
                                          progress=False, ftc=FtcConfig(), stress_sources=["my-model"],
                                          addtext=AddTextConfig(kinds=("rand",), positions=("end",))))
    out = Path(result["run_dir"])
    shift = pl.read_parquet(out / "addtext_shift.parquet")
    assert set(shift["orig_source"]) == {"my-model"} and set(shift["addtext_kind"]) == {"rand", "all"}
    assert json.loads((out / "ftc.json").read_text())["by_source"]["my-model"]["n_examples"] == 12
    steps = [r.step for r in result["steps"]]
    assert "addtext-score-rev" in steps and "addtext-score-rora" in steps and "ftc" in steps
    both = pl.read_parquet(out / "addtext_scores.parquet")  # every original and perturbed rationale's scores
    assert set(both["source"]) == {"my-model", "my-model+addtext-rand-end"} and both.height == 2 * 12 * 5

    again = score_rationales(ScoreParams(run=run["run_dir"], rationales=str(path), name="with-stress",
                                         progress=False))
    assert not {"addtext.md", "addtext_shift.parquet", "ftc.json"} & {p.name for p in out.iterdir()}  # stale
    assert all(r.cached for r in again["steps"])


def test_a_changed_corpus_file_reruns_the_perturbations(trained_run, tmp_path):
    _, run = trained_run
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The old mill stands beside the canal.\nA lighthouse was built on the cape in 1850.\n")
    params = StressParams(run=run["run_dir"], name="corpus", ftc=None, progress=False,
                          addtext=AddTextConfig(kinds=("wiki",), positions=("end",), wiki_corpus=str(corpus)))
    first = stress_test(params)
    corpus.write_text("A glacier carved the valley over many centuries.\n")
    second = stress_test(params)
    assert not {r.step: r for r in second["steps"]}["addtext"].cached
    texts = pl.read_parquet(second["refs"]["addtext_rationales"].uri)["inserted"]
    assert (texts == "A glacier carved the valley over many centuries.").all()
    assert {r.step: r for r in first["steps"]}["addtext"].cached is False


def test_ftc_without_theta_or_task_model_is_a_clear_error():
    from larev.errors import ConfigError
    from larev.stress.ftc.config import make_task_model

    with pytest.raises(ConfigError, match="no no-rationale evaluator theta"):
        make_task_model(FtcConfig(), evaluator=None)
    with pytest.raises(ValueError):
        FtcConfig(alpha=0)


def test_stress_options_are_checked_up_front(trained_run):
    root, run = trained_run
    with pytest.raises(ValueError, match="nothing to do"):
        StressParams(run=run["run_dir"], ftc=None, addtext=None)
    with pytest.raises(ValueError, match="shard_rows"):
        ScoreParams(run=run["run_dir"], rationales="x.jsonl", ftc=FtcConfig(),
                    scale_out=ScaleOutConfig(shard_rows=100))
    from storage import ArtifactStore
    from tasks.stress import ftc_problem

    store = ArtifactStore(root / "store")  # tiny_params' artifact root
    without_theta = {k: v for k, v in run["refs"].items() if k != "theta"}
    assert "no no-rationale evaluator theta" in ftc_problem(store, without_theta, FtcConfig())
    assert ftc_problem(store, without_theta, FtcConfig(task_model="some/nli-model")) is None
    assert ftc_problem(store, run["refs"] | {"theta": run["refs"]["examples"]}, FtcConfig()) is None
    with pytest.raises(InputError, match="no rationale of the sources"):
        stress_test(StressParams(run=run["run_dir"], sources=["nobody"], addtext=None, progress=False))


def test_ftc_and_addtext_cli_commands(trained_run, capsys, tmp_path):
    _, run = trained_run
    assert main(["ftc", "--run", run["run_dir"], "--name", "cli-ftc", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "FTC" in printed and "gold" in printed
    assert (Path(run["run_dir"]) / "cli-ftc" / "ftc.json").exists()
    test = pl.read_parquet(run["refs"]["examples"].uri).filter(pl.col("split") == "test")
    path = tmp_path / "theirs.csv"
    test.select("id", pl.lit("their-model").alias("source"), "rationale").write_csv(path)
    assert main(["addtext", "--run", run["run_dir"], "--name", "cli-addtext", "--kinds", "wiki",
                 "--positions", "start", "--rationales", str(path), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "AddText" in printed and "rise" in printed
    shift = pl.read_parquet(Path(run["run_dir"]) / "cli-addtext" / "addtext_shift.parquet")
    assert set(shift["addtext_kind"]) == {"wiki", "all"}
    assert set(shift["orig_source"]) == {"their-model"}  # a file's every source by default
