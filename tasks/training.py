"""Train the embedded tokenizer and the evaluators (GPU stages: sent to a GPU work pool when one is configured)."""

from __future__ import annotations

import tempfile

import polars as pl

import larev.formats as formats
import larev.models.evaluator as evaluator_mod
import larev.models.tokenizer as tokenizer_mod
import larev.models.train as train_mod
import larev.rora as rora_mod
from larev.config import ModelConfig, TrainConfig
from larev.errors import ConfigError
from larev.formats import baseline_input, infill_input, rationale_input, target_text
from larev.models.evaluator import new_evaluator, save_evaluator
from larev.models.tokenizer import train_word_tokenizer
from larev.models.train import train_evaluator
from larev.rora import x_texts
from larev.schema import label_set, label_sets
from larev.variants import LEAKY_TEMPLATE
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.checkpoints import epoch_checkpoints
from tasks.common import larev_task, put_dir

ROLES = ("phi_base", "phi")


def train_val_examples(store: ArtifactStore, examples: ArtifactRef) -> pl.DataFrame:
    """The examples every training step reads: the train and validation splits."""
    return store.read_parquet(examples.key).filter(pl.col("split").is_in(["train", "validation"]))


def split_train_validation(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The train rows and the validation rows (checkpoint selection) of a frame with a split column."""
    return df.filter(pl.col("split") == "train"), df.filter(pl.col("split") == "validation")


def load_tokenizer(store: ArtifactStore, tokenizer: ArtifactRef | None):
    """The embedded backbone's trained tokenizer; None for a hub checkpoint, which brings its own."""
    if tokenizer is None:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(store.get_dir(tokenizer.key))


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


def evaluator_inputs(role: str, df: pl.DataFrame) -> list[str]:
    """phi_base reads b (REV's g); phi reads [r, b] (REV's g')."""
    if role == "phi_base":
        return [baseline_input(b) for b in df["baseline"]]
    if role == "phi":
        return [rationale_input(r, b) for r, b in zip(df["rationale"], df["baseline"])]
    raise ConfigError(f"unknown evaluator role {role!r}; expected one of {ROLES}")


@larev_task("tokenizer", code=(tokenizer_mod, formats, rora_mod))
def train_tokenizer(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef,
                    model: ModelConfig) -> ArtifactRef | None:
    """The embedded backbone's word-level vocabulary, from the training texts; None for a hub checkpoint."""
    if model.backbone != "embedded":
        return None
    df = training_frame(store, examples, baselines).filter(pl.col("split") == "train")
    labels = sorted({lab for t, c, y in zip(df["task"], df["choices"], df["label"])
                     for lab in (label_set(t, c) if t == "nli" or c is not None else [y])})
    # REV's and LAREV's inputs, RORA's (x, r) and infiller inputs, the labels and the leaky variant's sentence
    rora_inputs = [infill_input(y, x, r) for y, x, r in zip(df["label"], x_texts(df), df["rationale"])]
    texts = [*evaluator_inputs("phi", df), *rora_inputs, *labels,
             *(LEAKY_TEMPLATE.format(label=lab) for lab in labels)]
    tok = train_word_tokenizer(texts, max_vocab=model.max_vocab)
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        return put_dir(store, "tokenizer", tmp, kind="dir")


@larev_task("train", code=(evaluator_mod, train_mod, formats), task_run_name="train-{role}", gpu=True)
def train_model(store: ArtifactStore, role: str, examples: ArtifactRef, baselines: ArtifactRef,
                tokenizer: ArtifactRef | None, model: ModelConfig, train: TrainConfig,
                progress: bool = True) -> ArtifactRef:
    """Train one evaluator (phi_base on b, or phi on [r, b]) and save it with its configs and history."""
    tr, val = split_train_validation(training_frame(store, examples, baselines))
    ev = new_evaluator(model, tokenizer=load_tokenizer(store, tokenizer), seed=train.seed)
    with epoch_checkpoints(store, role, train.epochs) as checkpoints:
        train_evaluator(ev, evaluator_inputs(role, tr), [target_text(y) for y in tr["label"]],
                        evaluator_inputs(role, val), [target_text(y) for y in val["label"]], label_sets(val), train,
                        progress=progress, desc=role, checkpointer=checkpoints)
        return put_evaluator(store, role, ev, role)
