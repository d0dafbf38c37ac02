"""CONTRIBUTING.md's recipe for a new metric, followed to the letter: a core function, a task module (one train
step, one score step, a `Metric` object) and one registry entry. Both flows must then train / score it with no
other change: the pipeline trains and scores it, run.json records its model, the score flow finds that model and
scores a new rationale file with it, and the summary and report carry it like every other metric."""

from __future__ import annotations

import polars as pl
import pytest

from flows.metrics import METRICS
from flows.pipeline import larev_pipeline
from flows.score import ScoreParams, score_rationales
from larev.metrics.scores import SCORE_COLUMNS, SCORE_SCHEMA
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.cache import larev_task
from tasks.metric import Run, Trained
from tasks.outputs import put_table
from tests.test_flows import tiny_params

pytestmark = pytest.mark.usefixtures("prefect_harness")


# ---- 1. the core module: pure, no Prefect ------------------------------------------------------------------------

def seen_words(rationales: pl.Series) -> list[str]:
    """Every lower-cased word of the training rationales."""
    return sorted({w for text in rationales.drop_nulls() for w in text.lower().split()})


def novelty_scores(rationales: pl.DataFrame, known: set[str]) -> pl.DataFrame:
    """Toy metric: the share of a rationale's words never seen in a training rationale (one row per rationale)."""
    def novelty(text: str) -> float:
        words = text.lower().split()
        return sum(w not in known for w in words) / max(len(words), 1)

    score = rationales["rationale"].map_elements(novelty, return_dtype=pl.Float64)
    return pl.DataFrame({"id": rationales["id"], "source": rationales["source"], "metric": "novelty",
                         "label": rationales["label"], "score": score, "aggregate": "mean"},
                        ).with_columns([pl.lit(None, SCORE_SCHEMA[c]).alias(c) for c in SCORE_COLUMNS
                                        if c not in ("id", "source", "metric", "label", "score", "aggregate")]
                                       ).select(SCORE_COLUMNS).cast(SCORE_SCHEMA)


# ---- 2. the task module: thin steps and the Metric object ----------------------------------------------------------

@larev_task("train-novelty")
def train_novelty(store: ArtifactStore, examples: ArtifactRef) -> ArtifactRef:
    ex = store.read_parquet(examples.key).filter(pl.col("split") == "train")
    return put_table(store, "words.parquet", pl.DataFrame({"word": seen_words(ex["rationale"])}))


@larev_task("score-novelty")
def score_novelty(store: ArtifactStore, words: ArtifactRef, rationales: ArtifactRef) -> ArtifactRef:
    known = set(store.read_parquet(words.key)["word"])
    return put_table(store, "scores.parquet", novelty_scores(store.read_parquet(rationales.key), known))


class Novelty:
    name = "novelty"

    def enabled(self, params) -> bool:
        return True

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        return Trained(models={"novelty_words": run.steps.run(train_novelty, run.examples)})

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return "novelty_words" in models

    def score(self, run: Run, models, rationales) -> list[ArtifactRef]:
        return [run.steps.score(score_novelty, models["novelty_words"], rationales=rationales,
                                step_label=f"{run.label}score-novelty")]


# ---- 3. the registry entry ------------------------------------------------------------------------------------------

@pytest.fixture
def registered():
    METRICS.append(Novelty())  # what `METRICS = [..., Novelty()]` in flows/metrics.py does
    try:
        yield
    finally:
        METRICS.pop()


def test_a_registered_metric_is_trained_and_scored_by_both_flows(registered, tmp_path):
    params = tiny_params(tmp_path, larev={"enabled": False}, rora={"enabled": False})
    result = larev_pipeline(params)
    ran = [s.step for s in result["steps"]]
    assert ran.index("train-novelty") < ran.index("score-novelty") < ran.index("report")
    run_dir = result["run_dir"]
    scores = pl.read_parquet(f"{run_dir}/scores.parquet")
    assert sorted(scores["metric"].unique()) == ["novelty", "rev"]
    novelty = scores.filter(pl.col("metric") == "novelty")
    assert novelty.height == 7 * 12 and novelty["score"].is_between(0, 1).all()
    summary = pl.read_parquet(f"{run_dir}/summary.parquet").filter(pl.col("metric") == "novelty")
    assert summary.height == 7 and "novelty" in open(f"{run_dir}/report.md").read()

    # the score flow finds the toy's model in run.json and scores a new file with it
    words = set(pl.read_parquet(result["refs"]["novelty_words"].uri)["word"])
    known = sorted(words)[:3]
    test_ids = novelty["id"].unique().sort()[:2].to_list()
    file = tmp_path / "new.csv"
    pl.DataFrame({"id": test_ids, "source": ["mine", "mine"],
                  "rationale": [" ".join(known), "zyxwv qqqqq " + known[0] + " " + known[1]]}).write_csv(file)
    scored = score_rationales(ScoreParams(run=run_dir, rationales=str(file), name="new", progress=False))
    mine = pl.read_parquet(f"{scored['run_dir']}/scores.parquet").filter(pl.col("metric") == "novelty")
    assert mine.sort("id")["score"].to_list() == pytest.approx([0.0, 0.5])  # worked out by hand: 0/3, 2/4
    assert "score-novelty" in [s.step for s in scored["steps"] if not s.cached]

