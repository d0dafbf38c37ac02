"""Integrated Gradients over an evaluator's encoder input: which token of b does phi_base read the label from?

LAREV (thesis 4.5.2) runs IG on phi_base with the baseline input b and designates the most attributed token of b
as the leakage term t_leak. Attributed: f(x) = log p(y | x), the teacher-forced sum of the label tokens'
log-probabilities, as a function of the encoder input embeddings x (a positive score is evidence *for* the
label). The reference keeps special tokens and padding, so they get zero attribution. Why embeddings rather
than the embedding layer, the embedding scale, the reference and eval mode:
docs/methods.md#integrated-gradients-on-the-evaluator. On minilm-frozen x is the frozen encoder's output instead
(`integrates_at_frozen_output`): the same path integral, at the layer where the model starts to train.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

import polars as pl
import torch
from pydantic import Field
from larev.progress import progress_bar

from larev.config import _Config
from larev.formats import baseline_input
from larev.leakage.rationale_model import RationaleModelConfig
from larev.leakage.spans import SpanRuleConfig
from larev.models.evaluator import Evaluator, labels_for_loss, pad_batch

__all__ = [
    "AttributionConfig", "TokenAttribution", "LeakageTerm", "STOPWORDS", "label_logprob_forward",
    "encoder_input_embeddings", "tokenize_with_offsets", "attribute", "baseline_span", "leakage_term",
    "leakage_terms", "baseline_words",
]


class AttributionConfig(_Config):
    """Integrated Gradients for leakage-term detection (thesis section 4.5.2)."""

    # 16, not 32: the span rule's diagnostics (the residual probe on the masked baselines, span recall) do not
    # change with more steps, and 16 take less time, though IG's own convergence delta is larger
    # (docs/defaults.md#larev, `attribution.n_steps`).
    n_steps: int = Field(16, ge=1, description="IG integration steps (points on the path from reference to input)")
    reference: Literal["pad", "mask", "zero"] = Field(
        "pad", description="IG reference at every content position: the pad token's embedding, the mask token's, "
                           "or zeros; special tokens (the end token ...) and padding keep their own embedding")
    batch_size: int = Field(16, ge=1, description="examples per captum call (each expands to n_steps rows)")
    internal_batch_size: int | None = Field(
        None, ge=1, description="captum's internal_batch_size: rows per forward/backward pass of the expanded "
                                "batch (None: all batch_size * n_steps rows at once)")
    method: Literal["riemann_trapezoid", "gausslegendre"] = Field(
        "gausslegendre", description="IG quadrature (captum's default is gausslegendre)")
    skip_stopwords: bool = Field(
        True, description="never choose a stop word or pronoun as the leakage term (the thesis's noted "
                          "limitation: IG sometimes highlights 'the' or 'he', and no antonym of those changes "
                          "the label); False reproduces the thesis's behaviour; see STOPWORDS")
    by_abs: bool = Field(
        False, description="choose the leakage term by largest |attribution| instead of the largest signed "
                           "attribution toward log p(label)")
    rule: Literal["spans", "top_word"] = Field(
        "spans", description="spans: the span rule of larev/leakage/spans.py (global ranking, phrases, residual "
                             "stopping rule); top_word: the thesis's single top-attributed word of each b")
    spans: SpanRuleConfig = Field(
        # the probe on b reads without the copy term: LAREV's QA figures were measured so, and a QA baseline's answer
        # is already a known phrase the spans snap to (`--set larev.attribution.spans.probe.copy_term=auto` turns it on)
        default_factory=lambda: SpanRuleConfig(probe=RationaleModelConfig(copy_term="off")),
        description="the span rule (rule='spans'); its probe without the copy term")


@dataclass
class TokenAttribution:
    """IG attribution of one row: one entry per non-padding token of the (truncated) input."""

    tokens: list[str]  # tokenizer tokens (convert_ids_to_tokens)
    offsets: list[tuple[int, int]]  # char span of each token in `text`; (0, 0) for tokens the tokenizer added
    scores: list[float]  # attribution to log p(label | text), summed over the embedding dimension
    delta: float  # captum's convergence delta: sum(scores) - (f(x) - f(x')), f(x') the reference's log p
    label: str
    text: str  # the evaluator input the offsets refer to
    special: list[bool] | None = None  # id in tokenizer.all_special_ids (<unk> too); None: offsets == (0, 0)

    def is_special(self, i: int) -> bool:
        if self.special is not None:
            return self.special[i]
        return tuple(self.offsets[i]) == (0, 0)


@dataclass(frozen=True)
class LeakageTerm:
    """The leakage term t_leak: a whole word of b with char offsets into b and its token's attribution."""

    text: str
    start: int
    end: int
    score: float


# Articles, determiners, pronouns, prepositions, conjunctions and forms of be/have/do, skipped as leakage terms when
# `skip_stopwords` is set. Negations (not, no, never, nothing ...) and modals (might, may, could ...) are deliberately
# absent: they are well-known NLI label cues (contradiction / neutral), i.e. genuine leakage terms.
STOPWORDS: frozenset[str] = frozenset("""
a an the this that these those some any each every either neither both all such
i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself she her hers
herself it its itself they them their theirs themselves one someone somebody something anyone anybody anything
everyone everybody everything who whom whose which what whoever whatever
i'm i've i'd i'll we're we've we'd we'll you're you've you'd you'll he's he'd he'll she's she'd she'll it's it'd
it'll they're they've they'd they'll that's there's here's who's what's let's
and or but nor so yet if then than because as while although though whether
of in on at to for from by with about into onto over under above below between among through during before after
up down out off upon within without along across around against toward towards near beside besides via per
be am is are was were been being have has had having do does did doing
there here also too very just only again once
""".split())

_WORD_CHAR = re.compile(r"[\w'-]")
_ALNUM = re.compile(r"[^\W_]")


# ----------------------------------------------------------------------------------------------- forward function


def integrates_at_frozen_output(model: torch.nn.Module) -> bool:
    """minilm-frozen (larev/models/frozen.py): IG integrates over the frozen encoder's output, read from its cache,
    instead of the input embeddings (layer IG at the last frozen layer, as captum's LayerIntegratedGradients at a
    layer): no gradient has to cross the frozen layers, so a step costs the trainable part only."""
    return hasattr(model.get_encoder(), "cached_frozen")


def encoder_input_embeddings(model: torch.nn.Module, input_ids: torch.Tensor,
                             attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """What IG integrates over for `input_ids`: the embeddings the encoder computes before its first layer (scale
    included; see module doc), or minilm-frozen's frozen output, through its cache (`integrates_at_frozen_output`;
    the reference inputs are cached too, so a second run computes nothing frozen)."""
    encoder = model.get_encoder()
    if integrates_at_frozen_output(model):
        return encoder.cached_frozen(input_ids, torch.ones_like(input_ids) if attention_mask is None
                                     else attention_mask)
    layer = encoder.get_input_embeddings()
    embeds = layer(input_ids)
    scale = getattr(encoder, "embed_scale", None)
    if scale is not None and getattr(layer, "embed_scale", None) is None:
        embeds = embeds * scale  # older BART-style layout: the encoder scales ids' embeddings, never inputs_embeds
    return embeds


def label_logprob_forward(model: torch.nn.Module, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor,
                          label_ids: torch.Tensor, label_mask: torch.Tensor) -> torch.Tensor:
    """log p(label | input) per row: encoder run from `inputs_embeds`, decoder teacher-forced on the label.

    inputs_embeds: [n, L, d]; attention_mask: [n, L]; label_ids/label_mask: [n, T] (label tokens and </s>).
    Returns [n], the summed label-token log-probabilities (`candidate_logprobs` for one candidate per row).
    Pure: no state, no grad mode changes; the caller puts the model in eval mode.
    """
    encoder = model.get_encoder()
    given = {"frozen_states" if integrates_at_frozen_output(model) else "inputs_embeds": inputs_embeds}
    hidden = encoder(**given, attention_mask=attention_mask).last_hidden_state
    labels = labels_for_loss(label_ids, label_mask)
    if hasattr(model, "prepare_decoder_input_ids_from_labels"):
        # The decoder inputs `labels=` would build, without HF's unused loss over the whole vocabulary.
        out = model(encoder_outputs=(hidden,), attention_mask=attention_mask, use_cache=False,
                    decoder_input_ids=model.prepare_decoder_input_ids_from_labels(labels=labels))
    else:
        out = model(encoder_outputs=(hidden,), attention_mask=attention_mask, labels=labels, use_cache=False)
    logp = torch.log_softmax(out.logits.float(), dim=-1)
    token_logp = logp.gather(2, label_ids[:, :, None]).squeeze(2)
    return (token_logp * label_mask).sum(dim=1)


# ----------------------------------------------------------------------------------------------- attribution


def tokenize_with_offsets(tokenizer, texts: list[str], max_len: int,
                          eos_id: int) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """`larev.models.evaluator.tokenize` with char offsets: the same call, the same cut keeping the final </s>."""
    enc = tokenizer(list(texts), add_special_tokens=True, return_offsets_mapping=True)
    ids_out, offsets_out = [], []
    for ids, offsets in zip(enc["input_ids"], enc["offset_mapping"]):
        offsets = [(int(s), int(e)) for s, e in offsets]
        if len(ids) > max_len:
            ids, offsets = ids[: max_len - 1] + [eos_id], offsets[: max_len - 1] + [(0, 0)]
        ids_out.append(list(ids))
        offsets_out.append(offsets)
    return ids_out, offsets_out


def _reference_ids(ids: torch.Tensor, mask: torch.Tensor, keep_ids: torch.Tensor, ref_id: int) -> torch.Tensor:
    """Token ids of the IG reference: `ref_id` at content positions, specials and padding unchanged."""
    keep = torch.isin(ids, keep_ids) | (mask == 0)
    return torch.where(keep, ids, torch.full_like(ids, ref_id))


def attribute(evaluator: Evaluator, texts: list[str], labels: list[str], config: AttributionConfig | None = None,
              *, progress: bool = False) -> list[TokenAttribution]:
    """IG attribution of log p(labels[i] | texts[i]) to each input token, `config.batch_size` rows per captum call.

    Texts are tokenised exactly as for training and scoring (same call, same truncation to max_input_tokens
    keeping </s>); rows are grouped by length to limit padding; results come back in input order, padding
    positions excluded.
    """
    from captum.attr import IntegratedGradients

    config = config or AttributionConfig()
    if len(texts) != len(labels):
        raise ValueError("texts and labels must have the same length")
    if not texts:
        return []
    model, tok, dev = evaluator.model, evaluator.tokenizer, evaluator.device
    ids_all, offsets_all = tokenize_with_offsets(tok, texts, evaluator.config.max_input_tokens, evaluator.eos_id)
    label_all = evaluator.target_ids(list(labels))
    special_ids = set(int(i) for i in tok.all_special_ids)
    unk_id = tok.unk_token_id
    # The reference keeps special tokens except <unk>, which stands for a real (out-of-vocabulary) word of the text.
    keep_ids = torch.tensor(sorted(special_ids - {unk_id}), dtype=torch.long, device=dev)
    if config.reference == "mask":
        if tok.mask_token_id is None:
            raise ValueError("reference='mask' needs a tokenizer with a mask token")
        ref_id: int | None = int(tok.mask_token_id)
    elif config.reference == "pad":
        ref_id = evaluator.pad_id
    else:
        ref_id = None

    order = sorted(range(len(texts)), key=lambda i: len(ids_all[i]))
    results: list[TokenAttribution | None] = [None] * len(texts)
    forward = functools.partial(label_logprob_forward, model)
    ig = IntegratedGradients(forward)
    was_training = model.training
    model.eval()
    # Only input gradients are needed: switching off parameter gradients skips the weight-gradient half of
    # every backward pass.
    grad_flags = [p.requires_grad for p in model.parameters()]
    model.requires_grad_(False)
    try:
        batches = range(0, len(order), config.batch_size)
        for start in progress_bar(batches, desc="integrated gradients", enabled=progress, unit="batch"):
            rows = order[start: start + config.batch_size]
            ids, mask = pad_batch([ids_all[i] for i in rows], evaluator.pad_id)
            lab, lab_mask = pad_batch([label_all[i] for i in rows], evaluator.pad_id)
            ids, mask, lab, lab_mask = ids.to(dev), mask.to(dev), lab.to(dev), lab_mask.to(dev)
            with torch.no_grad():
                embeds = encoder_input_embeddings(model, ids, mask)
                if ref_id is None:
                    keep = (torch.isin(ids, keep_ids) | (mask == 0))[:, :, None]
                    reference = torch.where(keep, embeds, torch.zeros_like(embeds))
                else:
                    reference = encoder_input_embeddings(model, _reference_ids(ids, mask, keep_ids, ref_id), mask)
            with torch.enable_grad():
                attr = ig.attribute(embeds, baselines=reference, additional_forward_args=(mask, lab, lab_mask),
                                    n_steps=config.n_steps, method=config.method,
                                    internal_batch_size=config.internal_batch_size)
            token_scores = attr.detach().sum(dim=-1)
            # captum's convergence delta, sum of attributions - (f(x) - f(x')), with f(x) and f(x') from one forward
            # pass over [x; x'] (return_convergence_delta=True would run them as two separate passes).
            with torch.no_grad():
                ends = forward(torch.cat([embeds, reference]), mask.repeat(2, 1), lab.repeat(2, 1),
                               lab_mask.repeat(2, 1))
            delta = (token_scores.sum(dim=1) - (ends[: len(rows)] - ends[len(rows):])).cpu()
            token_scores = token_scores.cpu()
            for b, i in enumerate(rows):
                n = len(ids_all[i])
                row_ids = ids_all[i]
                results[i] = TokenAttribution(
                    tokens=tok.convert_ids_to_tokens(row_ids), offsets=offsets_all[i],
                    scores=[float(s) for s in token_scores[b, :n]], delta=float(delta[b]), label=labels[i],
                    text=texts[i], special=[t in special_ids for t in row_ids])
    finally:
        model.train(was_training)
        for p, flag in zip(model.parameters(), grad_flags):
            p.requires_grad_(flag)
    return [r for r in results if r is not None]


# ----------------------------------------------------------------------------------------------- leakage term


def baseline_span(text: str) -> tuple[int, int]:
    """Char span of b inside `baseline_input(b)` (everything after the format's prefix)."""
    prefix = baseline_input("")
    if not text.startswith(prefix):
        raise ValueError(f"not a baseline input (expected the prefix {prefix!r}): {text[:40]!r}")
    return len(prefix), len(text)


def _content_pos(attr: TokenAttribution, i: int, span: tuple[int, int]) -> int | None:
    """Position of token i's first letter or digit when it lies in `span`; None for specials, punctuation, outside."""
    s, e = attr.offsets[i]
    if attr.is_special(i) or e <= s:
        return None
    m = _ALNUM.search(attr.text, s, e)
    if m is None or not span[0] <= m.start() < span[1]:
        return None  # punctuation-only (or whitespace) token, or a token of the prefix
    return m.start()


def _word_around(text: str, pos: int, lo: int, hi: int) -> tuple[int, int]:
    """The maximal run of word characters [\\w'-] containing `pos`, within [lo, hi), without edge quotes/hyphens."""
    start, end = pos, pos + 1
    while start > lo and _WORD_CHAR.match(text[start - 1]):
        start -= 1
    while end < hi and _WORD_CHAR.match(text[end]):
        end += 1
    while start < pos and text[start] in "'-":
        start += 1
    while end > pos + 1 and text[end - 1] in "'-":
        end -= 1
    return start, end


def leakage_term(attr: TokenAttribution, span: tuple[int, int], *, skip_stopwords: bool = False,
                 by_abs: bool = False) -> LeakageTerm | None:
    """The leakage term t_leak of one row (thesis section 4.5.2): the best-attributed token of b, as a whole word.

    Candidates are the tokens whose first alphanumeric character lies inside `span` (the part of `attr.text`
    that is b, see `baseline_span`); special tokens, punctuation-only tokens and, with `skip_stopwords`, tokens of
    stop words / pronouns (STOPWORDS) are skipped. The winner (highest signed score, or |score| with `by_abs`;
    ties go to the first) is expanded to the whole word around it, so subword tokenizers give whole words too.
    start/end are char offsets into b itself (`span[0]` subtracted). None when b has no candidate token.
    """
    text = attr.text
    lo, hi = span
    best: tuple[float, int, int, float] | None = None  # (key, word start, word end, score)
    for i in range(len(attr.offsets)):
        pos = _content_pos(attr, i, span)
        if pos is None:
            continue
        w0, w1 = _word_around(text, pos, lo, hi)
        if skip_stopwords and text[w0:w1].lower() in STOPWORDS:
            continue
        score = attr.scores[i]
        key = abs(score) if by_abs else score
        if best is None or key > best[0]:
            best = (key, w0, w1, score)
    if best is None:
        return None
    _, w0, w1, score = best
    return LeakageTerm(text=text[w0:w1], start=w0 - lo, end=w1 - lo, score=float(score))


def leakage_terms(evaluator: Evaluator, baselines: list[str], labels: list[str],
                  config: AttributionConfig | None = None, *,
                  progress: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Leakage term of every baseline b under phi_base (`evaluator`), reading `baseline_input(b)`.

    Returns (rows, table):
    - rows: `row, term, start, end, score, delta, tokens, attributions`, one per baseline; start/end are char
      offsets into b as given (leading whitespace, which `baseline_input` strips, is accounted for); term, start,
      end and score are null when b has no candidate token; tokens/attributions cover the whole input;
    - table: the global per-token mean attribution over the tokens of b (lower-cased surface text, specials and
      punctuation excluded): `token, mean_attribution, count`, highest mean first.
    """
    config = config or AttributionConfig()
    texts = [baseline_input(b) for b in baselines]
    attrs = attribute(evaluator, texts, labels, config, progress=progress)
    records = []
    per_token: dict[str, list[float]] = {}
    for row, (b, text, a) in enumerate(zip(baselines, texts, attrs)):
        span = baseline_span(text)
        lead = len(b) - len(b.lstrip())
        term = leakage_term(a, span, skip_stopwords=config.skip_stopwords, by_abs=config.by_abs)
        records.append({
            "row": row, "term": term.text if term else None, "start": term.start + lead if term else None,
            "end": term.end + lead if term else None, "score": term.score if term else None, "delta": a.delta,
            "tokens": a.tokens, "attributions": a.scores})
        for i, (s, e) in enumerate(a.offsets):
            pos = _content_pos(a, i, span)
            if pos is not None:
                per_token.setdefault(text[s:e].strip().lower(), []).append(a.scores[i])
    schema = {"row": pl.Int64, "term": pl.Utf8, "start": pl.Int64, "end": pl.Int64, "score": pl.Float64,
              "delta": pl.Float64, "tokens": pl.List(pl.Utf8), "attributions": pl.List(pl.Float64)}
    rows_df = pl.DataFrame(records, schema=schema)
    table = pl.DataFrame(
        {"token": list(per_token), "mean_attribution": [sum(v) / len(v) for v in per_token.values()],
         "count": [len(v) for v in per_token.values()]},
        schema={"token": pl.Utf8, "mean_attribution": pl.Float64, "count": pl.Int64},
    ).sort(["mean_attribution", "token"], descending=[True, False])
    return rows_df, table


def baseline_words(attr: TokenAttribution, span: tuple[int, int],
                   lead: int = 0) -> tuple[list[tuple[str, int, int]], list[float]]:
    """The words of b in one row's attribution and each word's score (the sum of its tokens' scores).

    Words are the whole words around content tokens (`_word_around`), lower-cased, with character offsets into b
    as given (`span[0]` subtracted, `lead` whitespace added back); specials and punctuation are left out.
    """
    words: dict[tuple[int, int], float] = {}
    for i in range(len(attr.offsets)):
        pos = _content_pos(attr, i, span)
        if pos is None:
            continue
        w = _word_around(attr.text, pos, span[0], span[1])
        words[w] = words.get(w, 0.0) + attr.scores[i]
    ordered = sorted(words)
    return ([(attr.text[s:e].lower(), s - span[0] + lead, e - span[0] + lead) for s, e in ordered],
            [words[w] for w in ordered])
