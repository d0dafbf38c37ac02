"""The generators trained here: the embedded T5 as a rationale generator (issue 54; thesis section 5.4.5 scores
task models' rationales, these are task models of graded, known quality).

It is an evaluator network (larev/models/evaluator.py) over the run's tokenizer, trained by the same loop
(larev/models/train.py) on other pairs: input the label to explain and the task input x (what the C.3 prompt
gives a task model: the question and its answer), target the gold rationale. Its budget is a share of the
training rows (`budget_rows`: a smaller share's rows are among a larger one's); the shuffled-pairs defect trains
on the same rows with each rationale dealt to another input (larev/generate/defects.py). The kept epoch has the
highest log-likelihood of the validation rationales.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import polars as pl
import torch

from larev.errors import ConfigError
from larev.formats import task_inputs
from larev.generate.config import DecodingConfig, EmbeddedGeneratorConfig
from larev.generate.defects import deranged
from larev.generate.prompt import clean_reply
from larev.models.checkpoint import Checkpointer
from larev.models.evaluator import Evaluator, pad_batch, tokenize
from larev.models.train import TrainResult, train_evaluator
from larev.progress import progress_bar


def generator_input(label: str, x: str) -> str:
    """Input of the embedded generator: the label to explain and the task input x (larev.formats.task_input)."""
    return f"label: {label.strip()} input: {x}"


def generator_inputs(frame: pl.DataFrame) -> list[str]:
    """`generator_input` of every row of an examples-shaped frame (its label and task input)."""
    return [generator_input(y, x) for y, x in zip(frame["label"], task_inputs(frame))]


def budget_rows(n: int, fraction: float, seed: int) -> list[int]:
    """Positions (ascending) of the training rows a budget keeps: the first ceil(fraction * n) rows (at least one) of
    one seeded order of all n rows, so for one seed the rows of a smaller fraction are among a larger one's."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    kept = max(1, math.ceil(round(fraction * n, 9)))
    return sorted(order[:kept])


def training_pairs(frame: pl.DataFrame, config: EmbeddedGeneratorConfig) -> tuple[list[str], list[str]]:
    """(inputs, target rationales) of the rows of `frame`; shuffled pairs deal the rationales to other inputs
    (none when fewer than two rows)."""
    inputs = generator_inputs(frame)
    targets = [r.strip() for r in frame["rationale"]]
    if config.pairs == "shuffled":
        if len(targets) < 2:
            return [], []
        targets = deranged(targets, config.budget_seed)
    return inputs, targets


def train_rationale_generator(generator: Evaluator, train: pl.DataFrame, validation: pl.DataFrame,
                              config: EmbeddedGeneratorConfig, *, progress: bool = True,
                              checkpointer: Checkpointer | None = None) -> TrainResult:
    """Train `generator` in place on its budget of the `train` rows (examples with their gold rationale), keeping
    the epoch whose `validation` rationales are likeliest; its meta records the config and the rows it read."""
    kept = train[budget_rows(train.height, config.fraction, config.budget_seed)]
    train_in, train_out = training_pairs(kept, config)
    if not train_in:
        raise ConfigError(f"generator {config.name!r}: its budget keeps {kept.height} training row(s); shuffled "
                          "pairs need at least 2")
    val_in, val_out = training_pairs(validation, config)
    generator.meta["generator"] = config.model_dump(mode="json")
    generator.meta["training_rows"] = kept.height
    return train_evaluator(generator, train_in, train_out, val_in, val_out, [[t] for t in val_out], config.train,
                           progress=progress, desc=f"generator[{config.name}]", checkpointer=checkpointer)


@torch.no_grad()
def generate_from_model(generator: Evaluator, inputs: Sequence[str], decoding: DecodingConfig, *,
                        progress: bool = False, desc: str = "generating") -> list[str | None]:
    """One rationale per input, decoded deterministically, in input order (None where nothing was decoded).

    At least one token is decoded and special tokens other than the end token are never emitted, so a rationale is
    empty only when its tokens decode to nothing."""
    model, tok = generator.model, generator.tokenizer
    model.eval()
    encoded, _ = tokenize(tok, list(inputs), generator.config.max_input_tokens, generator.eos_id)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths batch together
    suppressed = [i for i in tok.all_special_ids if i != tok.eos_token_id] or None
    out: list[str | None] = [None] * len(encoded)
    starts = range(0, len(order), decoding.batch_size)
    for start in progress_bar(starts, desc=desc, enabled=progress, unit="batch"):
        chunk = order[start:start + decoding.batch_size]
        ids, mask = pad_batch([encoded[i] for i in chunk], generator.pad_id)
        generated = model.generate(input_ids=ids.to(generator.device), attention_mask=mask.to(generator.device),
                                   max_new_tokens=decoding.max_new_tokens, min_new_tokens=1,
                                   num_beams=decoding.num_beams, do_sample=False,
                                   no_repeat_ngram_size=decoding.no_repeat_ngram_size, suppress_tokens=suppressed)
        texts = tok.batch_decode(generated, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        for i, text in zip(chunk, texts):
            out[i] = clean_reply(text)
    return out
