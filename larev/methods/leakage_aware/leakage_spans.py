"""LAREV's leakage spans on the baseline b: IG on phi_base, then the span rule of larev/leakage/spans.py.

The thesis (4.5.2) takes each b's single top-attributed word as its leakage term t_leak. When b carries its label
in a multi-word, redundant phrase ("... does not tell us whether ..."), IG's credit is split over the phrase, the
top word is nearly arbitrary and masking it leaves the rest of the phrase. The span rule instead ranks words over
the training split, grows them into phrases and stops when a fresh probe on the masked b no longer reads the label
(the residual-leakage check).

What the probe reads. Leakage is what b says about the label beyond x. When b holds x word for word (NLI premise
and hypothesis, as the template and offline baselines do), the spans never cover x and the probe reads b's form:
b with its spans masked and x's clauses replaced by the placeholders PREMISE / HYPOTHESIS; it should then be no
better than chance. Reading x as well would measure x's own label artifacts (on e-SNLI a probe on the hypothesis
alone reads the label well above chance), which the rule could only remove by masking x's content words (it did:
'a', 'the', 'eating', 'tennis'), taking the input away from every environment. Otherwise (QA, where b rewrites the
question; model paraphrases that change x) the probe reads the masked b and stops at the same probe on x alone.

Known phrases snap the spans: the relation phrases of the offline NLI baselines
(larev/methods/leakage_aware/antonyms/lexicon.py) and the answer text of a QA baseline; they are also the ground
truth of `span_recall` (measured on the spans before snapping).
"""

from __future__ import annotations

import re

import polars as pl

from larev.baselines.nli import as_clause
from larev.formats import baseline_input, task_input
from larev.leakage.attribution import AttributionConfig, attribute, baseline_span, baseline_words, leakage_term
from larev.leakage.probe import residual_leakage
from larev.leakage.spans import (SpanSelection, attribution_shares, global_attribution, probe_word_ranking,
                                 ranking_shares, select_leakage_spans, span_recall, spans_for)
from larev.leakage.text import Span, mask_text, replace_spans, subtract_spans
from larev.methods.leakage_aware.antonyms.lexicon import RelationLexicon
from larev.models.evaluator import Evaluator, mask_token_of
from larev.schema import label_set
from larev.stats import binomial_margin, chance_level

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


INPUT_MARKS = ("PREMISE", "HYPOTHESIS")  # what stands for x's clauses in the form of b the residual probe reads
FORM_MIN_SHARE = 0.9  # the probe reads b's form when x's clauses are found word for word in this share of rows


def input_clauses(baseline: str, premise: str | None, hypothesis: str | None) -> list[tuple[int, int, str]]:
    """Where NLI's premise and hypothesis sit in b word for word (case aside, final punctuation dropped, as
    the baselines place them): [(start, end, placeholder)] in text order, or [] unless both are found apart."""
    found = []
    for clause, mark in zip((as_clause(premise or ""), as_clause(hypothesis or "")), INPUT_MARKS):
        at = re.search(re.escape(clause), baseline, re.IGNORECASE) if clause else None
        if at is None:
            return []
        found.append((at.start(), at.end(), mark))
    found.sort()
    return found if found[0][1] <= found[1][0] else []


def baseline_form(baseline: str, spans: list[Span], clauses: list[tuple[int, int, str]], mask: str) -> str:
    """b with its spans masked and x's clauses replaced by their placeholders (spans inside a clause ignored)."""
    kept = subtract_spans(spans, [(s, e) for s, e, _ in clauses])
    return replace_spans(baseline, sorted([(s, e, mask) for s, e in kept] + clauses))


def find_baseline_spans(evaluator: Evaluator, frame: pl.DataFrame, n_train: int, config: AttributionConfig, *,
                        progress: bool = False) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Leakage spans of every baseline b of `frame` (training rows first, the first `n_train` of them; the rest are
    validation rows) under phi_base (`evaluator`).

    frame: id, task, premise, hypothesis, question, choices, label, baseline. Returns
    - rows: id, term (the spans' texts joined by ' | ', null without a span), spans ([start, end] char offsets into
      b), score (the top word's attribution), delta (IG's convergence delta);
    - table: the global word attribution over the training rows (word, attribution, count);
    - summary: ranking, chosen, residual_reads ('form': b's form without x, 'baseline': the whole b), residual
      accuracies before and after masking, reference (the level the rule stops at: chance for 'form', the probe on
      x for 'baseline'), accuracy_x (the probe on x), hypothesis_only (NLI: the probe on the hypothesis alone;
      None otherwise), residual_with_input (the probe on the whole masked b, x in place), chance, tolerance,
      converged, span_recall (None without known phrases), steps.
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
    clauses = [input_clauses(b, p, h) if t == "nli" else []
               for t, b, p, h in zip(tasks, baselines, frame["premise"].to_list(), frame["hypothesis"].to_list())]
    reads_form = sum(1 for c in clauses if c) >= FORM_MIN_SHARE * max(1, len(clauses))
    protected = [[(s, e) for s, e, _ in c] for c in clauses] if reads_form else None
    if protected is not None:  # x's words are never ranked, grown into or snapped to
        for i, cut in enumerate(protected):
            outside = [j for j, (_, s, e) in enumerate(words[i]) if all(e <= cs or s >= ce for cs, ce in cut)]
            words[i], shares[i] = [words[i][j] for j in outside], [shares[i][j] for j in outside]
            phrases[i] = subtract_spans(phrases[i], cut) if cut else phrases[i]
    cands = [label_set(t, c) for t, c in zip(tasks, frame["choices"].to_list())]
    mask = mask_token_of(evaluator.tokenizer)
    probe = config.spans.probe

    def probe_accuracy(inputs: list[str]) -> float:
        return residual_leakage(inputs[:n_train], labels[:n_train], cands[:n_train], inputs[n_train:],
                                labels[n_train:], cands[n_train:], probe)

    def masked_with_input(spans: list[list[Span]]) -> list[str]:
        return [mask_text(b, s, mask) for b, s in zip(baselines, spans)]

    def probe_texts(spans: list[list[Span]]) -> list[str]:
        """What the residual probe reads: b's form (x's clauses as placeholders) or the whole masked b."""
        if not reads_form:
            return masked_with_input(spans)
        return [baseline_form(b, s, c, mask) if c else mask_text(b, s, mask)
                for b, s, c in zip(baselines, spans, clauses)]

    def residual(spans: list[list[Span]]) -> float:
        return probe_accuracy(probe_texts(spans))

    def probe_ranking(spans: list[list[Span]]) -> list[str]:
        """The words a fresh probe on the masked training b reads the label from, best first."""
        masked = probe_texts(spans[:n_train])  # zip stops at the training rows
        return probe_word_ranking(masked, labels[:n_train], cands[:n_train], config.spans)

    x = [task_input(r["task"], r.get("premise"), r.get("hypothesis"), r.get("question"), r.get("choices"))
         for r in frame.iter_rows(named=True)]
    accuracy_x = probe_accuracy(x)
    # NLI: the hypothesis alone, the classic artifact view of x (reported beside the reference, which on e-SNLI
    # sits below it: validation rows share premises with training rows of the other labels)
    hypothesis_only = (probe_accuracy([h or "" for h in frame["hypothesis"].to_list()])
                       if "hypothesis" in frame.columns and set(tasks) == {"nli"} else None)
    n_val = len(baselines) - n_train
    chance = chance_level(cands[n_train:])
    reference = chance if reads_form else accuracy_x
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
                                         labels=labels, probe_ranking=probe_ranking, protected=protected)
        # the same choice without snapping: what IG's ranking and the phrase rule found on their own
        chosen = selection.chosen if isinstance(selection.chosen, int) else set(selection.chosen)
        raw = spans_for(words, ranking_shares(shares, config.spans), chosen, config.spans.expand_threshold,
                        protected=protected)
    n_phrases = sum(1 for p in phrases[:n_train] if p)
    summary = {
        "ranking": selection.ranking,
        "chosen": (", ".join(selection.chosen) if isinstance(selection.chosen, list)
                   else f"top {selection.chosen} per row"),
        "n_chosen": len(selection.chosen) if isinstance(selection.chosen, list) else selection.chosen,
        "residual_before": selection.residual_before, "residual_after": selection.residual_after,
        "residual_reads": "form" if reads_form else "baseline", "reference": reference, "accuracy_x": accuracy_x,
        "hypothesis_only": hypothesis_only,
        "residual_with_input": (probe_accuracy(masked_with_input(selection.spans)) if reads_form
                                else selection.residual_after),
        "chance": chance,
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
