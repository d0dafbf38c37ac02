"""CONTRIBUTING.md's recipe for a new metric, followed to the letter on a copy of the tree: one core module, one task
module and one registry entry, and nothing else. The toy metric has what a real one has (an option, a CLI switch, a
report section, a bench summary), and the test checks each shows up where a user looks:

  - the option in `larev run --help` and in the Prefect UI form (the flow's parameter schema);
  - the switch changes the scores (values worked out by hand) and run.json records it;
  - the report section in report.md, the bench summary in `bench quality`'s results.json and results.md;
  - the score flow finds the toy's model in run.json and scores a new rationale file with it.

The copy runs in a child process (the registry is read at import: PipelineParams and the CLI are built from it),
against this session's Prefect test server (PREFECT_API_URL)."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.test_flows import tiny_params

pytestmark = pytest.mark.usefixtures("prefect_harness")

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("larev", "tasks", "flows", "storage")

# ---- 1. the core module: pure, no Prefect ------------------------------------------------------------------------

CORE = '''
"""Toy metric: the share of a rationale's words that no training rationale has (words shorter than `min_length`
letters are left out)."""

from __future__ import annotations

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from larev.metrics.scores import SCORE_COLUMNS, SCORE_SCHEMA


class NoveltyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="train and score the novelty metric")
    # 1: every word counts; raise it to ignore short function words ("a", "of")
    min_length: int = Field(1, ge=1, description="words shorter than this many letters are not counted")


def words(text: str, min_length: int) -> list[str]:
    return [w for w in text.lower().split() if len(w) >= min_length]


def seen_words(rationales: pl.Series, min_length: int) -> list[str]:
    """Every distinct lower-cased word of the training rationales."""
    return sorted({w for text in rationales.drop_nulls() for w in words(text, min_length)})


def novelty_scores(rationales: pl.DataFrame, known: set[str], min_length: int) -> pl.DataFrame:
    """One score row per rationale: the share of its words never seen in a training rationale."""
    def novelty(text: str) -> float:
        counted = words(text, min_length)
        return sum(w not in known for w in counted) / max(len(counted), 1)

    given = {"id": rationales["id"], "source": rationales["source"], "metric": "novelty",
             "label": rationales["label"], "aggregate": "mean",
             "score": rationales["rationale"].map_elements(novelty, return_dtype=pl.Float64)}
    return (pl.DataFrame(given)
            .with_columns([pl.lit(None, SCORE_SCHEMA[c]).alias(c) for c in SCORE_COLUMNS if c not in given])
            .select(SCORE_COLUMNS).cast(SCORE_SCHEMA))
'''

# ---- 2. the task module: thin steps and the Metric object ----------------------------------------------------------

TASKS = '''
"""The novelty metric's steps and its Metric object."""

from __future__ import annotations

import polars as pl

from larev.metrics.novelty import NoveltyConfig, novelty_scores, seen_words
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.metric import Metric, MetricOption, Run, Trained
from tasks.runtime.outputs import put_bytes, put_table


@larev_task("train-novelty")
def train_novelty(store: ArtifactStore, examples: ArtifactRef, config: NoveltyConfig) -> ArtifactRef:
    ex = store.read_parquet(examples.key).filter(pl.col("split") == "train")
    return put_table(store, "words.parquet", pl.DataFrame({"word": seen_words(ex["rationale"], config.min_length)}))


@larev_task("report-novelty")
def write_novelty_report(store: ArtifactStore, known: ArtifactRef, config: NoveltyConfig) -> ArtifactRef:
    n = store.read_parquet(known.key).height
    text = f"## Novelty\\n\\n{n} distinct training words of at least {config.min_length} letters.\\n"
    return put_bytes(store, "report_section.md", text.encode(), kind="text")


@larev_task("score-novelty")
def score_novelty(store: ArtifactStore, known: ArtifactRef, rationales: ArtifactRef,
                  config: NoveltyConfig) -> ArtifactRef:
    words = set(store.read_parquet(known.key)["word"])
    return put_table(store, "scores.parquet",
                     novelty_scores(store.read_parquet(rationales.key), words, config.min_length))


class Novelty(Metric):
    name = "novelty"
    section = "novelty"
    options = NoveltyConfig
    description = "the toy novelty metric"
    cli_options = (MetricOption("--novelty-min-length", "min_length"),)

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        return Trained(models={"novelty_words": run.steps.run(train_novelty, run.examples, run.params.novelty)})

    def report_section(self, run: Run, trained: Trained) -> ArtifactRef:
        return run.steps.run(write_novelty_report, trained.models["novelty_words"], run.params.novelty)

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return "novelty_words" in models

    def score(self, run: Run, models, rationales) -> list[ArtifactRef]:
        config = NoveltyConfig(**(run.params.novelty.model_dump() if run.params is not None
                                  else (run.saved_params or {}).get("novelty", {})))
        return [run.steps.score(score_novelty, models["novelty_words"], rationales=rationales, config=config,
                                step_label=f"{run.label}score-novelty")]

    def bench_summary(self, artifacts: dict, store) -> dict | None:
        if "novelty_words" not in artifacts:
            return None
        return {"known_words": store.read_parquet(artifacts["novelty_words"]["key"]).height}
'''

# ---- 3. the registry entry ------------------------------------------------------------------------------------------

REGISTRY_LINE = "METRICS: list[Metric] = [Rev(), LeakageAware(), LarevVsEmpty(), ROnly(), Rora(), Accuracy()]"
REGISTERED = ("METRICS: list[Metric] = [Rev(), LeakageAware(), LarevVsEmpty(), ROnly(), Rora(), Accuracy(), "
              "Novelty()]")
IMPORT = "from tasks.rora import Rora\n"

# What the child process runs in the copy: --help, the UI form's schema, a run with the switch, a score of a new
# file with the finished run, and `bench quality` rebuilt from the run.
CHILD = '''
import contextlib, io, json, sys
import polars as pl
from flows.cli import main

help_text = io.StringIO()
with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
    main(["run", "--help"])
from flows.pipeline import larev_pipeline
schema = larev_pipeline.parameters.model_dump()
tmp, params_file = sys.argv[1:]
run = main(["run", "--params", params_file, "--novelty-min-length", "4", "--server", "auto"])
assert run == 0, "larev run failed"
# a new rationale file for two test ids: unseen words, a training word of 4+ letters, a 2-letter word
run_json = json.load(open(f"{tmp}/runs/tiny/run.json"))
known = pl.read_parquet(run_json["artifacts"]["novelty_words"]["uri"])["word"][0]
ids = pl.read_ndjson(f"{tmp}/runs/tiny/test_split.jsonl")["id"].sort()[:2].to_list()
pl.DataFrame({"id": ids, "source": ["mine", "mine"],
              "rationale": ["zyxwv qqqqq", f"zyxwv {known} ab"]}).write_csv(f"{tmp}/new.csv")
score = main(["score", "--run", f"{tmp}/runs/tiny", "--rationales", f"{tmp}/new.csv", "--name", "new",
              "--no-progress", "--server", "auto"])
bench = main(["bench", "quality", "--from-run", f"{tmp}/runs/tiny", "--out", f"{tmp}/bench", "--bootstrap", "0",
              "--no-stress", "--server", "auto"])
print("CHILD-RESULT " + json.dumps({"help": help_text.getvalue(), "schema": schema, "rc": [run, score, bench]}))
'''


def copy_tree(dest: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(REPO / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))


def changed_files(original: Path, copy: Path) -> dict[str, str]:
    """{path: 'added' | 'changed'} of every file in the copy's packages that differs from the original tree."""
    out = {}
    for package in PACKAGES:
        for path in sorted((copy / package).rglob("*.py")):
            rel = path.relative_to(copy)
            if not (original / rel).exists():
                out[str(rel)] = "added"
            elif not filecmp.cmp(original / rel, path, shallow=False):
                out[str(rel)] = "changed"
    return out


def test_a_metric_with_an_option_a_switch_a_report_and_a_bench_summary_needs_three_files(tmp_path):
    tree = tmp_path / "tree"
    copy_tree(tree)
    (tree / "larev/metrics/novelty.py").write_text(CORE.lstrip())
    (tree / "tasks/novelty.py").write_text(TASKS.lstrip())
    registry = tree / "flows/metrics.py"
    text = registry.read_text()
    assert REGISTRY_LINE in text and IMPORT in text
    registry.write_text(text.replace(IMPORT, IMPORT + "from tasks.novelty import Novelty\n")
                        .replace(REGISTRY_LINE, REGISTERED))
    assert changed_files(REPO, tree) == {"larev/metrics/novelty.py": "added", "tasks/novelty.py": "added",
                                         "flows/metrics.py": "changed"}

    params = tiny_params(tmp_path, larev={"enabled": False}, rora={"enabled": False})
    params_file = tmp_path / "params.json"
    params_file.write_text(params.model_dump_json(exclude_none=True))  # None: the CLI derives it (data.task)
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(params_file)], cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    child = json.loads(next(line for line in done.stdout.splitlines()
                            if line.startswith("CHILD-RESULT "))[len("CHILD-RESULT "):])
    assert child["rc"] == [0, 0, 0]

    # the option: in --help (with its description and default) and in the UI form's schema
    assert "--novelty-min-length" in child["help"] and "(novelty.min_length; default 1)" in " ".join(
        child["help"].split())
    form = child["schema"]["definitions"]
    assert form["PipelineParams"]["properties"]["novelty"]["description"] == "the toy novelty metric"
    assert form["NoveltyConfig"]["properties"]["min_length"]["default"] == 1

    # the switch reached the run: run.json records it, the training words are those of 4+ letters
    run_dir = tmp_path / "runs" / "tiny"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["params"]["novelty"] == {"enabled": True, "min_length": 4}
    words = pl.read_parquet(run["artifacts"]["novelty_words"]["uri"])["word"].to_list()
    assert words and min(map(len, words)) >= 4
    scores = pl.read_parquet(run_dir / "scores.parquet")
    assert sorted(scores["metric"].unique()) == ["novelty", "rev"]
    novelty = scores.filter(pl.col("metric") == "novelty")
    assert novelty.height == 7 * 12 and novelty["score"].is_between(0, 1).all()  # 7 variants x 12 test rows
    summary = pl.read_parquet(run_dir / "summary.parquet").filter(pl.col("metric") == "novelty")
    assert summary.height == 7

    # its report section and its bench summary
    assert f"## Novelty\n\n{len(words)} distinct training words of at least 4 letters." in (
        run_dir / "report.md").read_text()
    bench = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert bench["leakage"]["novelty"] == {"known_words": len(words)}
    assert "## novelty: bench summary" in (tmp_path / "bench" / "results.md").read_text()

    # the score flow scored the new file with the run's model and its min_length 4 (worked out by hand): "zyxwv
    # qqqqq" 2 of 2 words unseen; "zyxwv KNOWN ab": "ab" is shorter than 4 letters, so 1 of 2
    mine = pl.read_parquet(run_dir / "new" / "scores.parquet").filter(
        (pl.col("metric") == "novelty") & (pl.col("source") == "mine"))
    assert mine.sort("id")["score"].to_list() == pytest.approx([1.0, 0.5])
