"""RORA section 3.2: label-conditioned counterfactual infilling of the leaky spans (MICE style).

Training pairs (T5's span-corruption format): input  "label: y  input: x  rationale: r with each leaky span
replaced by one sentinel <extra_id_i>", target "<extra_id_0> span_0 <extra_id_1> span_1 ...". Only the rationale
is masked (RORA appendix A). For every label e of the label set, decoding with "label: e" gives the rationale of
the counterfactual dataset D^e.

Rebuilding a rationale from the decoded fills keeps every character outside the sentinels. A sentinel that the
model did not emit is filled with nothing, and the rest of the rationale is kept (the reference code dropped the
rationale's tail from the first missing sentinel on); the number of missing fills is recorded per row.
"""

from __future__ import annotations

import re

import torch
from pydantic import Field

from larev.config import TrainConfig, _Config
from larev.models.evaluator import Evaluator, pad_batch, tokenize
from larev.progress import progress_bar

SENTINEL = "<extra_id_{}>"
SENTINEL_RE = re.compile(r"<extra_id_(\d+)>")


def sentinel(i: int) -> str:
    return SENTINEL.format(i)


class InfillerConfig(_Config):
    """The counterfactual infiller (a seq2seq model of the evaluator backbone, trained on the training split)."""

    train: TrainConfig = Field(default_factory=lambda: TrainConfig(epochs=2, select_by="sum"),
                               description="training loop; checkpoint selection by the fills' log-likelihood")
    max_spans: int = Field(8, ge=1, le=99, description="at most this many sentinels per rationale; further leaky "
                                                       "spans are left in place (counted)")
    max_new_tokens: int = Field(24, ge=2, description="decoding budget for all fills of one rationale")
    batch_size: int = Field(128, ge=1, description="rows per generate call")


def mask_spans(text: str, spans: list[tuple[int, int]] | list[list[int]],
               max_spans: int = 99) -> tuple[str, list[str]]:
    """Replace each span (sorted, non-overlapping, character offsets) with a numbered sentinel.

    Returns the masked text and the original span texts (the infiller's targets). Spans past `max_spans` stay.
    """
    ordered = sorted((int(s), int(e)) for s, e in spans)[:max_spans]
    pieces, originals, last = [], [], 0
    for i, (s, e) in enumerate(ordered):
        if s < last or e < s or e > len(text):
            raise ValueError(f"span {(s, e)} overlaps the previous one or lies outside the text (length {len(text)})")
        pieces += [text[last:s], sentinel(i)]
        originals.append(text[s:e])
        last = e
    pieces.append(text[last:])
    return "".join(pieces), originals


def rebuild(masked: str, fills: list[str | None]) -> tuple[str, int]:
    """Put fills[i] in place of sentinel i; a missing fill (None or past the list) becomes empty text.

    Everything outside the sentinels is kept as it is. Returns the text and the number of missing fills.
    """
    missing = 0

    def fill(match: re.Match) -> str:
        nonlocal missing
        i = int(match.group(1))
        if i < len(fills) and fills[i] is not None:
            return fills[i]
        missing += 1
        return ""

    text = SENTINEL_RE.sub(fill, masked)
    if missing:
        text = re.sub(r" {2,}", " ", text).strip()
    return text, missing


def sentinel_target(originals: list[str]) -> str:
    """The infiller's training target: '<extra_id_0> span_0 <extra_id_1> span_1 ...'."""
    return " ".join(f"{sentinel(i)} {span.strip()}" for i, span in enumerate(originals))


def with_sentinels(tokenizer, n: int) -> int:
    """Make sure the tokenizer has sentinels 0..n-1 as special tokens (T5 checkpoints do); returns how many were
    added (the embedded tokenizer gets them here, and the model is then built over the larger vocabulary)."""
    vocab = tokenizer.get_vocab()
    wanted = [sentinel(i) for i in range(n) if sentinel(i) not in vocab]
    if not wanted:
        return 0
    return tokenizer.add_tokens(wanted, special_tokens=True)


def sentinel_ids(tokenizer, n: int) -> list[int]:
    ids = [tokenizer.convert_tokens_to_ids(sentinel(i)) for i in range(n)]
    if any(i is None or i == tokenizer.unk_token_id for i in ids):
        raise ValueError("the infiller's tokenizer lacks sentinel tokens; call with_sentinels first")
    return ids


def parse_fills(generated: list[int], sentinels: list[int], tokenizer, n_spans: int) -> list[str | None]:
    """Split one decoded id sequence at the sentinels: fills[i] is the text after sentinel i (None if absent)."""
    where = {tok: i for i, tok in enumerate(sentinels)}
    special = set(tokenizer.all_special_ids) - set(sentinels)
    fills: list[list[int] | None] = [None] * n_spans
    current = None
    for tok in generated:
        if tok in where:
            current = where[tok]
            if current < n_spans and fills[current] is None:
                fills[current] = []
            else:
                current = None  # a repeated or out-of-range sentinel: ignore what follows it
            continue
        if tok == tokenizer.eos_token_id:
            break
        if current is not None and tok not in special:
            fills[current].append(tok)
    return [None if f is None else tokenizer.decode(f, skip_special_tokens=True).strip() for f in fills]


@torch.no_grad()
def generate_fills(infiller: Evaluator, inputs: list[str], n_spans: list[int], config: InfillerConfig, *,
                   progress: bool = False, desc: str = "infilling") -> list[list[str | None]]:
    """Greedy-decode the fills of every input (rows with no span are not decoded and get [])."""
    model, tok = infiller.model, infiller.tokenizer
    model.eval()
    out: list[list[str | None]] = [[] for _ in inputs]
    if not any(n_spans):
        return out
    sent = sentinel_ids(tok, max(n_spans))
    todo = [i for i, n in enumerate(n_spans) if n > 0]
    enc, _ = tokenize(tok, [inputs[i] for i in todo], infiller.config.max_input_tokens, infiller.eos_id)
    order = sorted(range(len(todo)), key=lambda j: len(enc[j]))
    starts = range(0, len(order), config.batch_size)
    for start in progress_bar(starts, desc=desc, enabled=progress, unit="batch"):
        chunk = order[start:start + config.batch_size]
        ids, mask = pad_batch([enc[j] for j in chunk], infiller.pad_id)
        generated = model.generate(input_ids=ids.to(infiller.device), attention_mask=mask.to(infiller.device),
                                   max_new_tokens=config.max_new_tokens, do_sample=False, num_beams=1)
        for j, row in zip(chunk, generated.tolist()):
            i = todo[j]
            out[i] = parse_fills(row, sent, tok, n_spans[i])
    return out
