"""The texts the embedded backbone's word-level tokenizer is trained on.

Every text any evaluator reads or writes must be in its vocabulary: REV's and LAREV's inputs ([r, b]), RORA's (x, r)
and infiller inputs, the label words of every label set, and the leaky variant's sentence for each label. It names
what every method's evaluators read, so it sits above the methods (larev/methods/), not with the tokenizer in
larev/models/, which imports no method.
"""

from __future__ import annotations

import polars as pl

from larev.data.variants import LEAKY_TEMPLATE
from larev.formats import infill_input, task_inputs
from larev.methods.rev.inputs import evaluator_inputs
from larev.schema import label_set


def vocabulary_texts(train: pl.DataFrame) -> list[str]:
    """The tokenizer's training texts from the training rows (id, task, choices, label, rationale, baseline and the
    task's input columns)."""
    labels = sorted({lab for t, c, y in zip(train["task"], train["choices"], train["label"])
                     for lab in (label_set(t, c) if t == "nli" or c is not None else [y])})
    rora_inputs = [infill_input(y, x, r) for y, x, r in zip(train["label"], task_inputs(train), train["rationale"])]
    return [*evaluator_inputs("phi", train), *rora_inputs, *labels,
            *(LEAKY_TEMPLATE.format(label=lab) for lab in labels)]


def run_vocabularies(model, train: pl.DataFrame | None, every: pl.DataFrame) -> tuple[object | None, list[int] | None]:
    """What a run's evaluators are built over, per backbone (`model`: a ModelConfig): the embedded backbone's
    word-level tokenizer trained on the training rows `train` (`vocabulary_texts`; read for it only), or a frozen
    backbone's (minilm-frozen, minilm-reader) output
    vocabulary (the checkpoint ids of every label text of every row of `every`: what its decoder predicts);
    (None, None) for other checkpoints, which bring their own."""
    from larev.formats import target_text
    from larev.models import pretrained
    from larev.models.tokenizer import train_word_tokenizer
    from larev.schema import label_sets

    if model.backbone == "embedded":
        return train_word_tokenizer(vocabulary_texts(train), max_vocab=model.max_vocab), None
    spec = pretrained.NAMED_BACKBONES.get(model.backbone)
    if spec is None or not spec.frozen:
        return None, None
    from larev.models.frozen import output_vocabulary

    texts = sorted({target_text(c) for cands in label_sets(every) for c in cands})
    return None, output_vocabulary(pretrained.wordpiece_tokenizer(pretrained.checkpoint_dir(model.backbone)), texts)
