"""Character spans of a text, and the text with its spans replaced: pure string helpers (no torch), shared by the
span rule (larev/leakage/spans.py) and LAREV's environment builders."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Span", "mask_text", "merge_spans", "replace_spans", "subtract_spans"]

Span = tuple[int, int]  # [start, end) character offsets


def merge_spans(spans: Sequence[Span]) -> list[Span]:
    """Sorted spans with overlapping or touching ones merged."""
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def replace_spans(text: str, pieces: Sequence[tuple[int, int, str]]) -> str:
    """`text` with each (start, end) replaced by its new text; pieces sorted and disjoint."""
    out, last = [], 0
    for s, e, new in pieces:
        out += [text[last:s], new]
        last = e
    return "".join(out + [text[last:]])


def mask_text(text: str, spans: Sequence[Span], mask: str) -> str:
    """`text` with each (merged) span replaced by `mask`."""
    return replace_spans(text, [(s, e, mask) for s, e in merge_spans(spans)])


def subtract_spans(spans: Sequence[Span], protected: Sequence[Span]) -> list[Span]:
    """The parts of `spans` outside every `protected` span, merged and in order."""
    out: list[Span] = []
    cuts = merge_spans(protected)
    for s, e in merge_spans(spans):
        for ps, pe in cuts:
            if pe <= s or ps >= e:
                continue
            if ps > s:
                out.append((s, ps))
            s = max(s, pe)
            if s >= e:
                break
        if s < e:
            out.append((s, e))
    return out
