"""The known-defect generators: rationales whose flaw is known by construction (issue 54; docs/methods.md,
"Generated rationales").

  label-only       LABEL_ONLY_TEMPLATE with the label: the label and nothing else. No other template of the
                   project says it this way (the leaky variant is "The answer is {label}.", larev/data/variants.py),
                   so no evaluator has trained on these exact sentences.
  hypothesis-copy  the hypothesis as it is (QA: the question): nothing beyond the input.
  shuffled-pairs   the training pairs with their rationales dealt to other inputs (`deranged`): a generator
                   trained on them writes rationale-like text unrelated to its input (larev/generate/trained.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from larev.errors import ConfigError

LABEL_ONLY_TEMPLATE = "Verdict: {label}."


def label_only(labels: Sequence[str]) -> list[str]:
    """The label-only rationale of each label: LABEL_ONLY_TEMPLATE filled in."""
    return [LABEL_ONLY_TEMPLATE.format(label=label.strip()) for label in labels]


def hypothesis_copy(tasks: Sequence[str], hypotheses: Sequence[str | None],
                    questions: Sequence[str | None]) -> list[str]:
    """Each row's hypothesis (NLI) or question (QA), stripped: a rationale that only repeats the input."""
    return [((h if t == "nli" else q) or "").strip() for t, h, q in zip(tasks, hypotheses, questions)]


def deranged(texts: Sequence[str], seed: int) -> list[str]:
    """`texts` dealt to other positions: a seeded permutation in which no position keeps its own text (one cycle
    through a shuffled order: position order[i] gets the text of order[i + 1]). At least two texts."""
    if len(texts) < 2:
        raise ConfigError(f"shuffled pairs need at least 2 rows to deal rationales among, got {len(texts)}")
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    out = list(texts)
    for i, position in enumerate(order):
        out[position] = texts[order[(i + 1) % len(order)]]
    return out
