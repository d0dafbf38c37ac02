"""Leaky spans of texts from word attributions (RORA 3.1).

Each text's word attributions are divided by the sum of their magnitudes (the share of that text's attribution each
word carries, signed: positive = evidence for the gold label), and averaged per vocabulary word over the training
split: the global attribution. Words whose global attribution is at least `threshold` (and seen at least
`min_occurrences` times) are leaky; each run of consecutive leaky words in a text is one leaky span.
The reference code also removed the top-2 words of a rationale with no leaky word even when they were below the
threshold. Here that is an explicit option (`fallback_top_k`, default 0 = off), and every row records whether its
spans came from the threshold or the fallback.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from larev.config import _Config
from larev.leakage.rationale_model import (RationaleModel, RationaleModelConfig, word_attributions,
                                           words_with_offsets)


class LeakageDetectionConfig(_Config):
    """Which words count as leaky (RORA 3.1)."""

    model: RationaleModelConfig = Field(default_factory=RationaleModelConfig)
    n_steps: int = Field(32, ge=1, description="IG integration steps")
    batch_size: int = Field(128, ge=1, description="rationales per captum call")
    threshold: float = Field(0.05, gt=0, le=1, description="a word is leaky when its mean signed attribution "
                                                           "share over the training rationales is at least this "
                                                           "(RORA applies 'a very aggressive removal threshold')")
    min_occurrences: int = Field(3, ge=1, description="words seen fewer times are never leaky")
    fallback_top_k: int = Field(0, ge=0, description="rationales with no leaky word: mask this many top-attributed "
                                                     "words anyway (the reference code's hidden top-2); 0 = off")


def attribution_shares(scores: list[float]) -> list[float]:
    """Each word's signed share of the rationale's total attribution magnitude (all 0 when it is 0)."""
    total = sum(abs(s) for s in scores)
    return [s / total for s in scores] if total > 0 else [0.0 for _ in scores]


def global_attribution(words: list[list[str]], shares: list[list[float]]) -> pl.DataFrame:
    """Per vocabulary word: mean signed share over its occurrences, and the number of occurrences."""
    flat_w = [w for row in words for w in row]
    flat_s = [s for row in shares for s in row]
    if not flat_w:
        return pl.DataFrame(schema={"word": pl.String, "attribution": pl.Float64, "count": pl.UInt32})
    return (pl.DataFrame({"word": flat_w, "share": flat_s})
            .group_by("word").agg(attribution=pl.col("share").mean(), count=pl.len())
            .sort(["attribution", "word"], descending=[True, False]))


def leaky_words(table: pl.DataFrame, config: LeakageDetectionConfig) -> set[str]:
    """Words at or above the threshold, seen often enough."""
    hit = table.filter((pl.col("attribution") >= config.threshold) & (pl.col("count") >= config.min_occurrences))
    return set(hit["word"].to_list())


def leaky_spans(words: list[tuple[str, int, int]], leaky: set[str], shares: list[float] | None = None,
                fallback_top_k: int = 0) -> tuple[list[tuple[int, int]], str]:
    """Character spans of the runs of consecutive leaky words, and where they came from: 'threshold',
    'fallback' (the top-k positively attributed words of a rationale with no leaky word) or 'none'."""
    flags = [w in leaky for w, _, _ in words]
    source = "threshold"
    if not any(flags):
        if fallback_top_k > 0 and shares:
            top = sorted((i for i, s in enumerate(shares[: len(words)]) if s > 0), key=lambda i: -shares[i])
            chosen = set(top[:fallback_top_k])
            flags = [i in chosen for i in range(len(words))]
        source = "fallback" if any(flags) else "none"
    spans: list[tuple[int, int]] = []
    for i, flag in enumerate(flags):
        if not flag:
            continue
        if spans and i > 0 and flags[i - 1]:
            spans[-1] = (spans[-1][0], words[i][2])
        else:
            spans.append((words[i][1], words[i][2]))
    return spans, source


def detect_leakage(model: RationaleModel, texts: list[str], labels: list[str], candidates: list[list[str]],
                   config: LeakageDetectionConfig, *, progress: bool = False,
                   n_global: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Global attribution table (word, attribution, count, leaky) and, per rationale, its leaky spans.

    The global table averages over the first `n_global` rationales (all by default: pass the training split's
    size when validation rows follow). Per-rationale frame: row, n_words, spans (list of [start, end]),
    span_source, leaky_text (the spans' texts).
    """
    scores = word_attributions(model, texts, labels, candidates, config, progress=progress)
    words = [words_with_offsets(t)[: model.config.max_words] for t in texts]
    shares = [attribution_shares(s) for s in scores]
    n_global = len(texts) if n_global is None else n_global
    table = global_attribution([[w for w, _, _ in row] for row in words[:n_global]], shares[:n_global])
    leaky = leaky_words(table, config)
    table = table.with_columns(leaky=pl.col("word").is_in(sorted(leaky)))
    rows = []
    for i, (text, row_words, row_shares) in enumerate(zip(texts, words, shares)):
        spans, source = leaky_spans(row_words, leaky, row_shares, config.fallback_top_k)
        rows.append({"row": i, "n_words": len(row_words), "spans": [list(s) for s in spans], "span_source": source,
                     "leaky_text": " | ".join(text[s:e] for s, e in spans)})
    per_row = pl.DataFrame(rows, schema={"row": pl.Int64, "n_words": pl.Int64, "spans": pl.List(pl.List(pl.Int64)),
                                         "span_source": pl.String, "leaky_text": pl.String})
    return table, per_row
