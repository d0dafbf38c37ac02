"""The accuracy-based baselines RQ and LAS (REV paper 3.3): per rationale source an (x, r) proxy; RORA's theta is
the no-rationale proxy and RORA's rationale-only model the leakage indicator."""

from __future__ import annotations

import polars as pl

from larev.config import ScoreConfig
from larev.methods.rora.config import training_sources
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.metric import Metric, Run, Trained
from tasks.runtime.outputs import put_table
from tasks.rora import by_model_source, per_source, train_rationale_only
from tasks.training import train_input_model


@larev_task("score-rq-las")
def score_rq_las(store: ArtifactStore, proxies: dict[str, ArtifactRef], rationale_models: dict[str, ArtifactRef],
                 theta: ArtifactRef, rationales: ArtifactRef, examples: ArtifactRef, score: ScoreConfig,
                 device: str = "auto", progress: bool = True) -> ArtifactRef:
    """RQ and LAS for every rationale, each source with its own proxy and leakage indicator (gold's otherwise)."""
    from larev.leakage.rationale_model import load_rationale_model
    from larev.metrics.accuracy import score_rq_las as score_fn
    from larev.models.evaluator import load_evaluator

    ex = store.read_parquet(examples.key)
    th = load_evaluator(store.get_dir(theta.key), device=device)
    frames = []
    for model_source, part in by_model_source(store.read_parquet(rationales.key), list(proxies)):
        proxy = load_evaluator(store.get_dir(proxies[model_source].key), device=device)
        small = load_rationale_model(store.get_dir(rationale_models[model_source].key))
        frames.append(score_fn(proxy, th, small, part, ex, score, progress=progress))
    return put_table(store, "scores.parquet", pl.concat(frames))


class Accuracy(Metric):
    """RQ and LAS: per built-in rationale source a proxy on (x, r) (model keys proxy:<source>) and a rationale-only
    model as LAS's leakage indicator (RORA's where it trained one for that source, else rationale_model:<source>
    here), with RORA's theta; trained and scored with RORA (`rora.enabled`)."""

    name = "rq_las"
    score_names = ("rq", "las")
    section = "rora"  # RORA's section (RoraConfig declares it): `rora.enabled` trains both

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        p, steps = run.params, run.steps

        def chain(source: str) -> dict[str, ArtifactRef]:
            """One source's (x, r) proxy, and its rationale-only model when RORA did not train one."""
            out = {f"proxy:{source}": steps.run(train_input_model, f"proxy-{source}", run.examples,
                                                models["training_rationales"], source, run.tokenizer, p.model,
                                                p.train, step_label=f"train-proxy-{source}")}
            if f"rationale_model:{source}" not in models:
                out[f"rationale_model:{source}"] = steps.run(
                    train_rationale_only, source, run.examples, models["training_rationales"],
                    p.rora.detection.model, step_label=f"rationale-model-{source}")
            return out

        out: dict[str, ArtifactRef] = {}
        for source_models in steps.map_chains(chain, training_sources(p.variants), name="rq-las-source"):
            out.update(source_models)
        return Trained(models=out)

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return "theta" in models and bool(per_source(models, "proxy")) and bool(per_source(models, "rationale_model"))

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        return [run.steps.score(score_rq_las, per_source(models, "proxy"), per_source(models, "rationale_model"),
                                models["theta"], rationales=rationales, examples=run.examples, score=run.score,
                                device=run.device, step_label=f"{run.label}score-rq-las")]
