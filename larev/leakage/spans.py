"""Leaky spans of texts from word attributions: one module for both sides (LAREV on the baseline b, RORA on the
rationale r).

Two rules live here.

The threshold rule (RORA 3.1, `detect_leakage`):

Each text's word attributions are divided by the sum of their magnitudes (the share of that text's attribution each
word carries, signed: positive = evidence for the gold label), and averaged per vocabulary word over the training
split: the global attribution. Words whose global attribution is at least `threshold` (and seen at least
`min_occurrences` times) are leaky; each run of consecutive leaky words in a text is one leaky span.
The reference code also removed the top-2 words of a rationale with no leaky word even when they were below the
threshold. Here that is an explicit option (`fallback_top_k`, default 0 = off), and every row records whether its
spans came from the threshold or the fallback.

The span rule (`select_leakage_spans`), for label cues spread over redundant multi-word phrases, where one word's
removal leaves the rest of the phrase carrying the label:
1. rank words by the global attribution table over the training split (not each row's top word);
2. a row's spans: every occurrence of a chosen word, expanded to its phrase (neighbouring words whose attribution
   share in that row is at least `expand_threshold`), optionally snapped to known phrases that overlap it (the
   relation phrases of the offline NLI baselines, the answer text of a QA baseline);
3. grow the chosen words (1, 2, 4, ... of the ranking, or 1, 2, ... per row) until a fresh probe trained on the
   masked training texts is no better on the masked validation texts than the larger of chance and a reference
   (the same probe on the task input x alone) plus a binomial margin: the residual-leakage stopping rule;
4. when the ranking is used up first, add the words that probe itself reads the label from (its own IG on the
   masked training texts), a few per round: cues the evaluator's IG misses (with a pad reference, the cues of
   the label a model predicts when no cue is present get little or negative attribution).
Every step's residual accuracy is recorded, so a report can show what masking removed and what it left.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import polars as pl
from pydantic import Field

from larev.config import _Config
from larev.leakage.text import Span, merge_spans, subtract_spans
from larev.stats import binomial_margin, chance_level
from larev.leakage.rationale_model import (RationaleModel, RationaleModelConfig, per_row_label_sets,
                                           word_attributions, words_with_offsets)


class SpanRuleConfig(_Config):
    """The span rule: global ranking, phrase expansion and the residual-leakage stopping rule."""

    ranking: Literal["auto", "global", "per_row"] = Field(
        "auto", description="global: words ranked by the training split's mean attribution share (label cues "
                            "shared across rows, NLI relation phrases); per_row: each row's own top words (cues "
                            "that differ per row, a QA answer); auto: per_row for QA, global otherwise")
    expand_threshold: float = Field(0.02, ge=0, le=1, description="a neighbour of a chosen word joins its span "
                                                                  "when its attribution share in that row is at "
                                                                  "least this")
    by: Literal["attribution", "magnitude"] = Field(
        "attribution", description="global ranking and phrase growth by the mean signed share (evidence for the "
                                   "gold label) or by the mean absolute share (a word whose removal moves "
                                   "log p(label) either way)")
    min_occurrences: int = Field(3, ge=1, description="global ranking: words seen fewer times are never chosen")
    per_label: bool = Field(True, description="global ranking: rank words within each gold label's training rows "
                                               "and take them in turn (one label's strong cues cannot push another "
                                               "label's weaker cues down the list)")
    min_row_share: float = Field(0.01, ge=0, le=1, description="global ranking: words in fewer than this share of "
                                                                "the training rows are never chosen (rare words "
                                                                "have noisy means)")
    max_words: int = Field(64, ge=1, description="global ranking: the most words the rule may choose (it tries "
                                                 "1, 2, 4, ... up to this)")
    max_per_row: int = Field(3, ge=1, description="per-row ranking: the most top words per row (it tries 1, 2, ...)")
    probe_rounds: int = Field(4, ge=0, description="after the attribution ranking, rounds that add the words the "
                                                   "residual probe itself reads the label from (its own IG on the "
                                                   "masked training texts), for cues the evaluator's IG misses")
    probe_words: int = Field(8, ge=1, description="words added per probe round")
    z: float = Field(1.96, gt=0, description="binomial margin of the stopping rule: residual <= max(reference, "
                                             "chance) + z * sqrt(p (1 - p) / n_validation)")
    probe: RationaleModelConfig = Field(default_factory=RationaleModelConfig,
                                        description="the fresh probe that measures residual leakage (bag of n-grams)")


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
    rule: Literal["spans", "threshold"] = Field(
        "spans", description="spans: the span rule (`select_leakage_spans`), its probe reading (x, masked r) "
                             "against x; threshold: RORA 3.1's fixed threshold on the global table")
    spans: SpanRuleConfig = Field(default_factory=SpanRuleConfig, description="the span rule (rule='spans')")


def attribution_shares(scores: list[float]) -> list[float]:
    """Each word's signed share of the rationale's total attribution magnitude (all 0 when it is 0)."""
    total = sum(abs(s) for s in scores)
    return [s / total for s in scores] if total > 0 else [0.0 for _ in scores]


def global_attribution(words: list[list[str]], shares: list[list[float]]) -> pl.DataFrame:
    """Per vocabulary word: mean signed share over its occurrences (attribution), mean absolute share
    (magnitude), and the number of occurrences."""
    flat_w = [w for row in words for w in row]
    flat_s = [s for row in shares for s in row]
    if not flat_w:
        return pl.DataFrame(schema={"word": pl.String, "attribution": pl.Float64, "magnitude": pl.Float64,
                                    "count": pl.UInt32})
    return (pl.DataFrame({"word": flat_w, "share": flat_s})
            .group_by("word").agg(attribution=pl.col("share").mean(), magnitude=pl.col("share").abs().mean(),
                                  count=pl.len())
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


# ----------------------------------------------------------------------------------------------- the span rule

Word = tuple[str, int, int]  # lower-cased word and its character span


def ranked_words(table: pl.DataFrame, min_occurrences: int, by: str = "attribution") -> list[str]:
    """Words of a global attribution table (`global_attribution`) with a positive `by` column (attribution or
    magnitude), seen at least `min_occurrences` times, best first."""
    hit = table.filter((pl.col(by) > 0) & (pl.col("count") >= min_occurrences))
    return hit.sort([by, "word"], descending=[True, False])["word"].to_list()


def phrase_spans(words: Sequence[Word], shares: Sequence[float], chosen: Sequence[bool],
                 expand_threshold: float) -> list[Span]:
    """Character spans of a text's chosen words grown into phrases.

    words: the text's words with their spans, in order; shares: each word's attribution share in this text;
    chosen: which words the rule picked. A chosen word's run grows left and right over neighbours whose share is
    at least `expand_threshold`; consecutive flagged words form one span (from the first's start to the last's end).
    """
    flags = list(chosen)
    for i in [i for i, f in enumerate(chosen) if f]:
        j = i - 1
        while j >= 0 and not flags[j] and shares[j] >= expand_threshold:
            flags[j] = True
            j -= 1
        j = i + 1
        while j < len(words) and not flags[j] and shares[j] >= expand_threshold:
            flags[j] = True
            j += 1
    spans: list[Span] = []
    for i, flag in enumerate(flags):
        if flag and spans and i > 0 and flags[i - 1]:
            spans[-1] = (spans[-1][0], words[i][2])
        elif flag:
            spans.append((words[i][1], words[i][2]))
    return spans


def snap_spans(spans: Sequence[Span], phrases: Sequence[Span]) -> list[Span]:
    """Each span grown to cover every known phrase it overlaps (a relation phrase, an answer), merged."""
    out = []
    for s, e in spans:
        for ps, pe in phrases:
            if ps < e and s < pe:
                s, e = min(s, ps), max(e, pe)
        out.append((s, e))
    return merge_spans(out)


def span_recall(spans: Sequence[Sequence[Span]], phrases: Sequence[Sequence[Span]]) -> float | None:
    """Share of the known phrases' characters that the spans cover, over all rows (None when no row has a
    known phrase): how much of the ground-truth cue the rule found."""
    covered = total = 0
    for row_spans, row_phrases in zip(spans, phrases):
        for ps, pe in row_phrases:
            total += pe - ps
            covered += sum(max(0, min(pe, e) - max(ps, s)) for s, e in merge_spans(row_spans))
    return covered / total if total else None


def probe_word_ranking(masked: list[str], labels: list[str], candidates: list[list[str]],
                       config: SpanRuleConfig) -> list[str]:
    """The words a fresh probe (config.probe) trained on the masked training texts reads the label from, best
    first: its own IG shares ranked by `global_ranking` (signed, per label when config.per_label)."""
    from larev.leakage.probe import probe_attributions

    probe_words, probe_scores = probe_attributions(masked, labels, candidates, config.probe)
    return global_ranking(probe_words, [attribution_shares(s) for s in probe_scores],
                          config.model_copy(update={"by": "attribution"}), labels if config.per_label else None)


@dataclass
class SpanSelection:
    """What the span rule chose and what it measured.

    spans: per row, the character spans to mask; chosen: the global words chosen (ranking 'global') or the
    number of top words per row ('per_row'); steps: one record per size tried (size, residual accuracy);
    residual_before / residual_after: the probe's validation accuracy on the unmasked / finally masked texts;
    reference: the same probe on the reference texts (x); tolerance: the binomial margin; converged: the rule
    stopped because the residual fell within reference + tolerance (False: it reached its size cap).
    """

    spans: list[list[Span]]
    ranking: str
    chosen: list[str] | int
    steps: list[dict] = field(default_factory=list)
    residual_before: float = float("nan")
    residual_after: float = float("nan")
    reference: float = float("nan")
    tolerance: float = float("nan")
    converged: bool = False


def _sizes(cap: int, doubling: bool) -> list[int]:
    if not doubling:
        return list(range(1, cap + 1))
    sizes, k = [], 1
    while k < cap:
        sizes.append(k)
        k *= 2
    return sizes + [cap]


def spans_for(words: Sequence[Sequence[Word]], shares: Sequence[Sequence[float]], chosen: set[str] | int,
              expand_threshold: float, phrases: Sequence[Sequence[Span]] | None = None,
              protected: Sequence[Sequence[Span]] | None = None) -> list[list[Span]]:
    """Every row's spans for a choice: a set of global words, or the number k of each row's top words (by
    positive share). Snapped to `phrases` (one list per row) when given; cut around `protected` (one list per row:
    text no span may cover, e.g. the task input inside a baseline) when given."""
    out = []
    for i, (row_words, row_shares) in enumerate(zip(words, shares)):
        if isinstance(chosen, int):
            top = sorted((j for j, s in enumerate(row_shares) if s > 0), key=lambda j: -row_shares[j])[:chosen]
            flags = [j in top for j in range(len(row_words))]
        else:
            flags = [w in chosen for w, _, _ in row_words]
        spans = phrase_spans(row_words, row_shares, flags, expand_threshold)
        spans = snap_spans(spans, phrases[i]) if phrases is not None and spans else spans
        out.append(subtract_spans(spans, protected[i]) if protected is not None and spans else spans)
    return out


MAX_LABEL_TABLES = 20  # more distinct labels than this: one pooled table (a per-answer table would be a few rows)


def global_ranking(words: Sequence[Sequence[Word]], shares: Sequence[Sequence[float]], config: SpanRuleConfig,
                   labels: Sequence[str] | None = None) -> list[str]:
    """The training rows' words, best first: by the global table (`ranked_words`), or, with labels, by one table
    per label taken in turn (first of each label, then second of each ...), duplicates dropped; labels are ignored
    when there are more than `MAX_LABEL_TABLES` distinct ones (QA answers differ per row). A word must occur in at
    least max(min_occurrences, min_row_share of the rows) rows of the table it is ranked in."""
    by = "magnitude" if config.by == "magnitude" else "attribution"

    def ranked(rows: list[int]) -> list[str]:
        table = global_attribution([[w for w, _, _ in words[i]] for i in rows], [list(shares[i]) for i in rows])
        return ranked_words(table, max(config.min_occurrences, math.ceil(config.min_row_share * len(rows))), by)

    if labels is None or len(set(labels)) > MAX_LABEL_TABLES:
        return ranked(list(range(len(words))))
    lists = [ranked([i for i, y in enumerate(labels) if y == label]) for label in sorted(set(labels))]
    out, seen = [], set()
    for depth in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if depth < len(x) and x[depth] not in seen:
                seen.add(x[depth])
                out.append(x[depth])
    return out


def ranking_shares(shares: Sequence[Sequence[float]], config: SpanRuleConfig) -> list[list[float]]:
    """The shares the rule ranks and grows phrases by: absolute (config.by == 'magnitude') or signed."""
    return [[abs(x) for x in row] if config.by == "magnitude" else list(row) for row in shares]


def _step(selection: SpanSelection, words, shares, chosen: set[str] | int, config: SpanRuleConfig, residual,
          phrases, protected, stop_at: float, size: int, source: str) -> bool:
    """Mask the spans of one choice, measure the residual, record the step; True when it is low enough."""
    spans = spans_for(words, shares, chosen, config.expand_threshold, phrases, protected)
    accuracy = residual(spans)
    selection.steps.append({"size": size, "ranked_by": source, "residual_accuracy": accuracy,
                            "masked_rows": sum(1 for s in spans if s) / max(1, len(spans))})
    selection.spans, selection.residual_after = spans, accuracy
    if isinstance(chosen, int):
        selection.chosen = chosen
    selection.converged = accuracy <= stop_at
    return selection.converged


def select_leakage_spans(words: Sequence[Sequence[Word]], shares: Sequence[Sequence[float]], n_train: int,
                         config: SpanRuleConfig, *, ranking: Literal["global", "per_row"],
                         residual: Callable[[list[list[Span]]], float], reference: float, n_validation: int,
                         chance: float = 0.0, phrases: Sequence[Sequence[Span]] | None = None,
                         labels: Sequence[str] | None = None,
                         probe_ranking: Callable[[list[list[Span]]], list[str]] | None = None,
                         protected: Sequence[Sequence[Span]] | None = None) -> SpanSelection:
    """The span rule (module docstring): grow the choice until `residual(spans)` <= level + margin, where level
    is the larger of the reference and chance.

    words/shares: every row's words and attribution shares, training rows first (the first `n_train` build the
    global ranking); residual: the probe's validation accuracy once every row's spans are masked (the caller
    trains it on the masked training rows); reference: the probe's accuracy on the reference texts (x; it can
    fall below chance when validation rows share premises with training rows of other labels); labels: the rows'
    gold labels, for the per-label ranking; probe_ranking: given the current spans, the words a probe trained on
    the masked training texts reads the label from, best first (global ranking only: `probe_rounds` rounds of
    `probe_words` words each after the attribution ranking is used up without converging); protected: per row,
    text no span may cover (its words should not be in `words` either, so they are never ranked; a span grown
    across it is cut around it).
    """
    level = max(reference, chance)
    tolerance = binomial_margin(level, n_validation, config.z)
    selection = SpanSelection(spans=[[] for _ in words], ranking=ranking, chosen=[] if ranking == "global" else 0,
                              reference=reference, tolerance=tolerance)
    selection.residual_before = residual(selection.spans)
    if selection.residual_before <= level + tolerance:
        selection.residual_after, selection.converged = selection.residual_before, True
        return selection
    shares = ranking_shares(shares, config)
    if ranking == "global":
        ranked = global_ranking(words[:n_train], shares[:n_train], config,
                                labels[:n_train] if labels is not None and config.per_label else None)
        sizes = _sizes(min(config.max_words, len(ranked)), doubling=True) if ranked else []
    else:
        ranked, sizes = [], _sizes(config.max_per_row, doubling=False)
    if not sizes:
        selection.residual_after = selection.residual_before
    for size in sizes:
        chosen: set[str] | int = set(ranked[:size]) if ranking == "global" else size
        done = _step(selection, words, shares, chosen, config, residual, phrases, protected, level + tolerance,
                     size, "attribution")
        if ranking == "per_row":
            if done:
                break
            continue
        selection.chosen = ranked[:size]
        if done:
            break
    if ranking == "global" and not selection.converged and probe_ranking is not None:
        chosen_words = list(selection.chosen)
        vocabulary = {w for row in words for w, _, _ in row}
        for _ in range(config.probe_rounds):
            extra = [w for w in probe_ranking(selection.spans) if w in vocabulary and w not in chosen_words]
            if not extra:
                break
            chosen_words += extra[:config.probe_words]
            selection.chosen = list(chosen_words)
            if _step(selection, words, shares, set(chosen_words), config, residual, phrases, protected,
                     level + tolerance, len(chosen_words), "probe"):
                break
    return selection


def detect_leakage_spans(model: RationaleModel, texts: list[str], labels: list[str], candidates: list[list[str]],
                         x_texts: list[str], n_train: int, config: LeakageDetectionConfig,
                         mask: Callable[[str, list[Span]], str], *,
                         progress: bool = False) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """The span rule on rationales (RORA's side): IG of the rationale-only model `model` ranks the words, and the
    residual probe reads (x, masked r), stopping when it is no better than the same probe on x alone.

    texts/labels/candidates/x_texts: training rows first (`n_train`), then validation rows; mask: a rationale with
    its spans masked (RORA's numbered sentinels, so where and how many spans were masked stays visible). Returns the
    global table and the per-rationale frame of `detect_leakage`, and a summary (accuracy_x, accuracy_x_masked,
    residual_gain = accuracy_x_masked - accuracy_x, accuracy_masked (the probe on the masked r alone), converged,
    chosen, steps).
    """
    from larev.leakage.probe import residual_leakage

    scores = word_attributions(model, texts, labels, candidates, config, progress=progress)
    words = [words_with_offsets(t)[: model.config.max_words] for t in texts]
    shares = [attribution_shares(s) for s in scores]
    probe = config.spans.probe

    def accuracy(inputs: list[str]) -> float:
        return residual_leakage(inputs[:n_train], labels[:n_train], candidates[:n_train], inputs[n_train:],
                                labels[n_train:], candidates[n_train:], probe)

    def with_x(spans: list[list[Span]]) -> list[str]:
        return [f"{x} rationale: {mask(t, s)}" for x, t, s in zip(x_texts, texts, spans)]

    def probe_ranking(spans: list[list[Span]]) -> list[str]:
        masked = [mask(t, s) for t, s in zip(texts[:n_train], spans[:n_train])]
        return probe_word_ranking(masked, labels[:n_train], candidates[:n_train], config.spans)

    reference = accuracy(list(x_texts))
    n_val = len(texts) - n_train
    chance = chance_level(candidates[n_train:])
    ranking = config.spans.ranking
    if ranking == "auto":  # per row where the rows have their own candidate sets (a QA answer), as on LAREV's b
        ranking = "per_row" if per_row_label_sets(candidates) else "global"
    selection = select_leakage_spans(words, shares, n_train, config.spans, ranking=ranking,
                                     residual=lambda spans: accuracy(with_x(spans)), reference=reference,
                                     n_validation=n_val, chance=chance, labels=labels, probe_ranking=probe_ranking)
    table = global_attribution([[w for w, _, _ in row] for row in words[:n_train]], shares[:n_train])
    chosen = set(selection.chosen) if isinstance(selection.chosen, list) else set()
    table = table.with_columns(leaky=pl.col("word").is_in(sorted(chosen)))
    rows = [{"row": i, "n_words": len(w), "spans": [list(s) for s in spans],
             "span_source": "spans" if spans else "none", "leaky_text": " | ".join(t[s:e] for s, e in spans)}
            for i, (t, w, spans) in enumerate(zip(texts, words, selection.spans))]
    per_row = pl.DataFrame(rows, schema={"row": pl.Int64, "n_words": pl.Int64, "spans": pl.List(pl.List(pl.Int64)),
                                         "span_source": pl.String, "leaky_text": pl.String})
    summary = {"rule": "spans", "accuracy_x": reference, "accuracy_x_masked": selection.residual_after,
               "residual_gain": selection.residual_after - reference, "converged": selection.converged,
               "chosen": ", ".join(sorted(chosen)), "steps": selection.steps,
               "accuracy_masked": accuracy([mask(t, s) for t, s in zip(texts, selection.spans)])}
    return table, per_row, summary
