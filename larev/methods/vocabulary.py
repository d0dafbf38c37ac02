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
