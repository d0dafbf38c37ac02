"""LAREV's leakage spans on the baseline b: IG on phi_base, then the span rule of larev/leakage/spans.py.

The thesis (4.5.2) takes each b's single top-attributed word as its leakage term t_leak. When b carries its label
in a multi-word, redundant phrase ("... does not tell us whether ..."), IG's credit is split over the phrase, the
top word is nearly arbitrary and masking it leaves the rest of the phrase. The span rule instead ranks words over
the training split, grows them into phrases and stops when a fresh probe on the masked b is no better than the
same probe on the task input x alone (the residual-leakage check). Known phrases snap the spans: the relation
phrases of the offline NLI baselines (larev/methods/leakage_aware/antonyms/lexicon.py) and the answer text of a QA
baseline; they are also the ground truth of `span_recall` (measured on the spans before snapping).
"""

from __future__ import annotations

import re

import polars as pl

from larev.formats import baseline_input, task_input
from larev.leakage.attribution import AttributionConfig, attribute, baseline_span, baseline_words, leakage_term
from larev.leakage.probe import residual_leakage
from larev.leakage.spans import (SpanSelection, attribution_shares, binomial_margin, chance_level,
                                 global_attribution, probe_word_ranking, ranking_shares, select_leakage_spans,
                                 span_recall, spans_for)
from larev.leakage.text import Span, mask_text
from larev.methods.leakage_aware.antonyms.lexicon import RelationLexicon
from larev.models.evaluator import Evaluator, mask_token_of
from larev.schema import label_set

SPAN_SCHEMA = {"id": pl.String, "term": pl.String, "spans": pl.List(pl.List(pl.Int64)), "score": pl.Float64,
               "delta": pl.Float64}


def known_phrases(task: str, baseline: str, label: str) -> list[Span]:
    """Where b states its label in a way the project knows: the relation phrases of an NLI baseline, every
    occurrence of the answer in a QA baseline."""
    if task == "nli":
        return [(m.start, m.end) for m in RelationLexicon().find(baseline)]
    answer = (label or "").strip()
    if not answer:
        return []
    return [m.span() for m in re.finditer(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", baseline, re.IGNORECASE)]


def find_baseline_spans(evaluator: Evaluator, frame: pl.DataFrame, n_train: int, config: AttributionConfig, *,
                        progress: bool = False) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Leakage spans of every baseline b of `frame` (training rows first, the first `n_train` of them; the rest are
    validation rows) under phi_base (`evaluator`).

    frame: id, task, premise, hypothesis, question, choices, label, baseline. Returns
    - rows: id, term (the spans' texts joined by ' | ', null without a span), spans ([start, end] char offsets into
      b), score (the top word's attribution), delta (IG's convergence delta);
    - table: the global word attribution over the training rows (word, attribution, count);
    - summary: ranking, chosen, residual accuracies before and after masking, reference (the probe on x),
      hypothesis_only (NLI: the probe on the hypothesis alone; None otherwise), chance, tolerance, converged,
      span_recall (None without known phrases), steps.
    """
    baselines, labels = frame["baseline"].to_list(), frame["label"].to_list()
    tasks = frame["task"].to_list()
    texts = [baseline_input(b) for b in baselines]
    attrs = attribute(evaluator, texts, labels, config, progress=progress)
    leads = [len(b) - len(b.lstrip()) for b in baselines]
    words, shares, tops = [], [], []
    for text, a, lead in zip(texts, attrs, leads):
        span = baseline_span(text)
        row_words, scores = baseline_words(a, span, lead)
        words.append(row_words)
        shares.append(attribution_shares(scores))
        tops.append(leakage_term(a, span, skip_stopwords=config.skip_stopwords, by_abs=config.by_abs))
    phrases = [known_phrases(t, b, y) for t, b, y in zip(tasks, baselines, labels)]
    cands = [label_set(t, c) for t, c in zip(tasks, frame["choices"].to_list())]
    mask = mask_token_of(evaluator.tokenizer)
    probe = config.spans.probe

    def probe_accuracy(inputs: list[str]) -> float:
        return residual_leakage(inputs[:n_train], labels[:n_train], cands[:n_train], inputs[n_train:],
                                labels[n_train:], cands[n_train:], probe)

    def residual(spans: list[list[Span]]) -> float:
        return probe_accuracy([mask_text(b, s, mask) for b, s in zip(baselines, spans)])

    def probe_ranking(spans: list[list[Span]]) -> list[str]:
        """The words a fresh probe on the masked training b reads the label from, best first."""
        masked = [mask_text(b, s, mask) for b, s in zip(baselines[:n_train], spans[:n_train])]
        return probe_word_ranking(masked, labels[:n_train], cands[:n_train], config.spans)

    x = [task_input(r["task"], r.get("premise"), r.get("hypothesis"), r.get("question"), r.get("choices"))
         for r in frame.iter_rows(named=True)]
    reference = probe_accuracy(x)
    # NLI: the hypothesis alone, the classic artifact view of x (reported beside the reference, which on e-SNLI
    # sits below it: validation rows share premises with training rows of the other labels)
    hypothesis_only = (probe_accuracy([h or "" for h in frame["hypothesis"].to_list()])
                       if "hypothesis" in frame.columns and set(tasks) == {"nli"} else None)
    n_val = len(baselines) - n_train
    chance = chance_level(cands[n_train:])
    ranking = config.spans.ranking
    if ranking == "auto":
        ranking = "per_row" if "qa" in tasks else "global"
    if config.rule == "top_word":  # the thesis: each b's top word, nothing grown, nothing checked
        found = [[] if t is None else [(t.start + lead, t.end + lead)] for t, lead in zip(tops, leads)]
        level = max(reference, chance)
        selection = SpanSelection(spans=found, ranking="top_word", chosen=1, reference=reference,
                                  tolerance=binomial_margin(level, n_val, config.spans.z))
        selection.residual_before = residual([[] for _ in baselines])
        selection.residual_after = residual(found)
        selection.converged = selection.residual_after <= level + selection.tolerance
        raw = found
    else:
        selection = select_leakage_spans(words, shares, n_train, config.spans, ranking=ranking, residual=residual,
                                         reference=reference, n_validation=n_val, chance=chance, phrases=phrases,
                                         labels=labels, probe_ranking=probe_ranking)
        # the same choice without snapping: what IG's ranking and the phrase rule found on their own
        chosen = selection.chosen if isinstance(selection.chosen, int) else set(selection.chosen)
        raw = spans_for(words, ranking_shares(shares, config.spans), chosen, config.spans.expand_threshold)
    n_phrases = sum(1 for p in phrases[:n_train] if p)
    summary = {
        "ranking": selection.ranking,
        "chosen": (", ".join(selection.chosen) if isinstance(selection.chosen, list)
                   else f"top {selection.chosen} per row"),
        "n_chosen": len(selection.chosen) if isinstance(selection.chosen, list) else selection.chosen,
        "residual_before": selection.residual_before, "residual_after": selection.residual_after,
        "reference": reference, "hypothesis_only": hypothesis_only, "chance": chance,
        "tolerance": selection.tolerance, "converged": selection.converged,
        "span_recall": span_recall(raw[:n_train], phrases[:n_train]) if n_phrases else None,
        "rows_with_spans": sum(1 for s in selection.spans if s) / max(1, len(baselines)),
        "steps": selection.steps,
    }
    records = []
    for row_id, b, spans, a, top in zip(frame["id"].to_list(), baselines, selection.spans, attrs, tops):
        records.append({"id": str(row_id), "term": " | ".join(b[s:e] for s, e in spans) if spans else None,
                        "spans": [[s, e] for s, e in spans], "score": top.score if top else None,
                        "delta": a.delta})
    table = global_attribution([[w for w, _, _ in row] for row in words[:n_train]], shares[:n_train])
    return pl.DataFrame(records, schema=SPAN_SCHEMA), table, summary
