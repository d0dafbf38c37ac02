"""LAREV's steps: IG leakage terms on phi_base, the three baseline environments, the leakage probe, phi_LA."""

from __future__ import annotations

import polars as pl

import larev.antonyms as antonyms
import larev.attribution as attribution
import larev.environments as environments
import larev.formats as formats
import larev.irm as irm
import larev.leakage_aware as leakage_aware
import larev.llm as llm
import larev.models.evaluator as evaluator_mod
import larev.models.train as train_mod
from larev.antonyms import AntonymConfig
from larev.attribution import AttributionConfig
from larev.config import ModelConfig, TrainConfig
from larev.formats import baseline_input, rationale_input
from larev.leakage_aware import LAInstance, LeakageAwareConfig
from larev.schema import label_set, label_sets
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.checkpoints import epoch_checkpoints
from tasks.common import larev_task, put_table
from tasks.training import (load_tokenizer, put_evaluator, split_train_validation, train_val_examples,
                            training_frame)


@larev_task("leakage-terms", code=(attribution, formats, evaluator_mod), gpu=True)
def find_leakage_terms(store: ArtifactStore, phi_base: ArtifactRef, examples: ArtifactRef, baselines: ArtifactRef,
                       config: AttributionConfig, device: str = "auto",
                       progress: bool = True) -> dict[str, ArtifactRef]:
    """Integrated Gradients of phi_base's label log-likelihood over b (train and validation rows): the leakage
    term of every baseline, and the global per-token mean attribution table."""
    from larev.attribution import leakage_terms
    from larev.models.evaluator import load_evaluator

    df = training_frame(store, examples, baselines)
    phi_b = load_evaluator(store.get_dir(phi_base.key), device=device)
    rows, table = leakage_terms(phi_b, df["baseline"].to_list(), df["label"].to_list(), config, progress=progress)
    rows = rows.drop("row").insert_column(0, df["id"])
    return {"terms": put_table(store, "leakage_terms.parquet", rows),
            "tokens": put_table(store, "token_attributions.parquet", table)}


@larev_task("environments", code=(environments, antonyms, llm))
def make_environments(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef, terms: ArtifactRef,
                      phi_base: ArtifactRef, config: AntonymConfig, progress: bool = True) -> ArtifactRef:
    """E1 (b), E2 (leakage term masked), E3 (term replaced by an antonym) for every train/validation example,
    with the backend that produced each E3."""
    from transformers import AutoTokenizer

    from larev.antonyms import make_generator
    from larev.environments import build_environments
    from larev.models.evaluator import mask_token_of
    from tasks.secrets import gemini_options

    df = training_frame(store, examples, baselines).join(
        store.read_parquet(terms.key).select("id", "term", "start", "end"), on="id", how="left")
    mask = mask_token_of(AutoTokenizer.from_pretrained(store.get_dir(phi_base.key)))
    generator = None
    if config.backend == "llm":
        generator = make_generator(config, **gemini_options(store))
    envs = build_environments(df.select("id", "task", "question", "choices", "label", "baseline", "term", "start",
                                        "end"), mask, config, generator=generator, progress=progress)
    return put_table(store, "environments.parquet", envs)


def environment_frame(store: ArtifactStore, examples: ArtifactRef, environments_ref: ArtifactRef) -> pl.DataFrame:
    """Train/validation examples with their three environment texts as columns E1, E2, E3."""
    ex = train_val_examples(store, examples)
    wide = store.read_parquet(environments_ref.key).pivot(on="env", index="id", values="baseline")
    return ex.join(wide, on="id", how="inner")


@larev_task("probe", code=(leakage_aware, train_mod, evaluator_mod, formats), gpu=True)
def train_probe(store: ArtifactStore, phi: ArtifactRef, examples: ArtifactRef, environments_ref: ArtifactRef,
                train: TrainConfig, progress: bool = True) -> ArtifactRef:
    """psi (eq. 4.8): phi's copy with its encoder frozen; the decoder learns y from Enc_phi(b~)."""
    from larev.leakage_aware import probe_from
    from larev.models.evaluator import load_evaluator
    from larev.models.train import train_evaluator

    tr, val = split_train_validation(environment_frame(store, examples, environments_ref))
    psi = probe_from(load_evaluator(store.get_dir(phi.key), device=train.device))
    with epoch_checkpoints(store, "probe", train.epochs) as checkpoints:
        train_evaluator(psi, [baseline_input(b) for b in tr["E2"]], tr["label"].to_list(),
                        [baseline_input(b) for b in val["E2"]], val["label"].to_list(), label_sets(val), train,
                        progress=progress, desc="probe", keep_eval=[psi.model.get_encoder()],
                        checkpointer=checkpoints)
        return put_evaluator(store, "probe", psi, "probe")


def la_instances(df: pl.DataFrame) -> list[LAInstance]:
    return [LAInstance(inputs=(rationale_input(r, e1), rationale_input(r, e2), rationale_input(r, e3)),
                       probe_input=baseline_input(e2), label=y, candidates=tuple(label_set(t, c)))
            for r, e1, e2, e3, y, t, c in zip(df["rationale"], df["E1"], df["E2"], df["E3"], df["label"],
                                              df["task"], df["choices"])]


@larev_task("train-la", code=(leakage_aware, irm, evaluator_mod, formats), task_run_name="train-{name}", gpu=True)
def train_phi_la(store: ArtifactStore, name: str, examples: ArtifactRef, environments_ref: ArtifactRef,
                 probe: ArtifactRef, tokenizer: ArtifactRef | None, model: ModelConfig, train: TrainConfig,
                 objective: LeakageAwareConfig, progress: bool = True) -> ArtifactRef:
    """phi_LA (eq. 4.10), a fresh model trained on the environments with the IRM and probe terms."""
    from larev.leakage_aware import train_leakage_aware
    from larev.models.evaluator import load_evaluator, new_evaluator

    df = environment_frame(store, examples, environments_ref)
    tr, val = split_train_validation(df)
    phi_la = new_evaluator(model, tokenizer=load_tokenizer(store, tokenizer), seed=train.seed)
    psi = load_evaluator(store.get_dir(probe.key), device=train.device)
    with epoch_checkpoints(store, name, train.epochs) as checkpoints:
        train_leakage_aware(phi_la, psi, la_instances(tr), la_instances(val), label_sets(val), train, objective,
                            task=df["task"][0], progress=progress, checkpointer=checkpoints)
        return put_evaluator(store, name, phi_la, name)
