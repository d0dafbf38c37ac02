"""What every metric's training steps share: the run's training split, the embedded tokenizer, saving evaluators,
and the models that read the task input with or without a rationale (RORA's theta, the RQ / LAS proxies).
Training steps are GPU stages: sent to a GPU work pool when one is configured."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl

from larev.config import ModelConfig, TrainConfig
from larev.formats import input_only, input_with_rationale, target_text, task_inputs
from larev.methods.vocabulary import run_vocabularies
from larev.models.evaluator import new_evaluator, save_evaluator
from larev.models.train import train_evaluator
from larev.schema import label_sets
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.checkpoints import epoch_checkpoints
from tasks.runtime.outputs import put_dir


def train_val_examples(store: ArtifactStore, examples: ArtifactRef) -> pl.DataFrame:
    """The examples every training step reads: the train and validation splits."""
    return store.read_parquet(examples.key).filter(pl.col("split").is_in(["train", "validation"]))


def split_train_validation(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The train rows and the validation rows (checkpoint selection) of a frame with a split column."""
    return df.filter(pl.col("split") == "train"), df.filter(pl.col("split") == "validation")


def load_tokenizer(store: ArtifactStore, tokenizer: ArtifactRef | None):
    """The embedded backbone's trained tokenizer; None for a checkpoint, which brings its own."""
    if tokenizer is None:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(store.get_dir(tokenizer.key))


def new_run_evaluator(store: ArtifactStore, tokenizer: ArtifactRef | None, model: ModelConfig, seed: int):
    """A fresh evaluator over the run's vocabularies (the tokenizer step's artifact): the embedded backbone's
    trained tokenizer, or minilm-frozen's output vocabulary (larev/models/frozen.py)."""
    from larev.models.frozen import OUTPUT_VOCABULARY_FILE

    if tokenizer is not None:
        vocabulary = Path(store.get_dir(tokenizer.key)) / OUTPUT_VOCABULARY_FILE
        if vocabulary.is_file():
            return new_evaluator(model, seed=seed, output_vocabulary=json.loads(vocabulary.read_text()))
    return new_evaluator(model, tokenizer=load_tokenizer(store, tokenizer), seed=seed)


def put_evaluator(store: ArtifactStore, name: str, evaluator, role: str) -> ArtifactRef:
    """Save an evaluator (safetensors, configs, tokenizer) as the current step's model directory `name`."""
    with tempfile.TemporaryDirectory() as tmp:
        save_evaluator(evaluator, tmp, role=role)
        return put_dir(store, name, tmp)


def training_frame(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef) -> pl.DataFrame:
    """Train and validation examples joined with their gold-label baseline."""
    ex = train_val_examples(store, examples)
    b = store.read_parquet(baselines.key).select("id", "label", "baseline")
    return ex.join(b, on=["id", "label"], how="left")


def source_frame(store: ArtifactStore, examples: ArtifactRef, training_rationales: ArtifactRef,
                 source: str) -> pl.DataFrame:
    """Train/validation examples with the `source` rationale in place of the gold one (RORA's training
    rationales: larev/data/variants.py built for the training split)."""
    ex = train_val_examples(store, examples).drop("rationale")
    rat = store.read_parquet(training_rationales.key).filter(pl.col("source") == source).select("id", "rationale")
    if rat.is_empty():
        raise ValueError(f"no training rationales for source {source!r}")
    return ex.join(rat, on="id", how="inner")




@larev_task("tokenizer")
def train_tokenizer(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef,
                    model: ModelConfig) -> ArtifactRef | None:
    """The run's vocabularies (larev/methods/vocabulary.py `run_vocabularies`): the embedded backbone's word-level
    tokenizer (from the training texts), or minilm-frozen's output vocabulary (every label text of every split:
    what its decoder predicts); None for other checkpoints, which bring their own."""
    from larev.models.frozen import OUTPUT_VOCABULARY_FILE

    train = (training_frame(store, examples, baselines).filter(pl.col("split") == "train")
             if model.backbone == "embedded" else None)  # only the embedded tokenizer reads the training texts
    tokenizer, output_ids = run_vocabularies(model, train, store.read_parquet(examples.key))
    with tempfile.TemporaryDirectory() as tmp:
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        elif output_ids is not None:
            (Path(tmp) / OUTPUT_VOCABULARY_FILE).write_text(json.dumps(output_ids))
        else:
            return None
        return put_dir(store, "tokenizer", tmp, kind="dir")


@larev_task("train-input-model", task_run_name="train-{role}", gpu=True)
def train_input_model(store: ArtifactStore, role: str, examples: ArtifactRef, training_rationales: ArtifactRef | None,
                      source: str | None, tokenizer: ArtifactRef | None, model: ModelConfig, train: TrainConfig,
                      progress: bool = True) -> ArtifactRef:
    """theta (RORA eq. 9: y from x alone; training_rationales None) or the RQ / LAS proxy (y from (x, r) of the
    source's training rationales)."""
    if training_rationales is None:
        df = train_val_examples(store, examples)
        inputs = [input_only(x) for x in task_inputs(df)]
    else:
        df = source_frame(store, examples, training_rationales, source)
        inputs = [input_with_rationale(x, r) for x, r in zip(task_inputs(df), df["rationale"])]
    df = df.with_columns(input=pl.Series(inputs, dtype=pl.String))
    tr, val = split_train_validation(df)
    ev = new_run_evaluator(store, tokenizer, model, train.seed)
    with epoch_checkpoints(store, role, train.epochs) as checkpoints:
        train_evaluator(ev, tr["input"].to_list(), [target_text(y) for y in tr["label"]], val["input"].to_list(),
                        [target_text(y) for y in val["label"]], label_sets(val), train, progress=progress,
                        desc=role, checkpointer=checkpoints,
                        chance_is_expected=training_rationales is None)  # x alone may not decide the label
        return put_evaluator(store, role, ev, role)
