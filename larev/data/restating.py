"""Natural label leakage in QA rationales: explanations that restate their answer.

About half of CoS-E's human explanations contain the answer's text ('Old clocks have chimes.' for the answer
'old clock'): leakage nobody planted. A leakage-robust metric should score such a rationale no higher than the
same text with the answer masked; an accuracy-based one (RQ, LAS) is expected to reward the restatement.

A rationale *restates* its answer when the answer's words occur in it as whole words, case-insensitively,
whitespace-normalised, the last word optionally inflected (-s, -es, -ed, -ing: 'old clocks'). Masking replaces
every such occurrence with `ANSWER_MASK`, a blank, and leaves the rest of the text as written.
"""

from __future__ import annotations

import re

import polars as pl

from larev.schema import RATIONALE_SCHEMA

ANSWER_MASK = "___"
RESTATING_MASKED_SOURCE = "gold_answer_masked"  # the rationale source of the masked copies
_SUFFIXES = r"(?:s|es|ed|ing)?"


def answer_pattern(answer: str) -> re.Pattern | None:
    """The regex of the answer's occurrences in a text (None for an answer without a word character)."""
    words = re.findall(r"\w+(?:['-]\w+)*", answer or "")
    if not words:
        return None
    body = r"\W+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<!\w){body}{_SUFFIXES}(?!\w)", re.IGNORECASE)


def restates_answer(rationale: str | None, answer: str | None) -> bool:
    """Whether the rationale contains the answer's text (see the module docstring)."""
    pattern = answer_pattern(answer or "")
    return bool(rationale) and pattern is not None and pattern.search(rationale) is not None


def mask_answer(rationale: str, answer: str, mask: str = ANSWER_MASK) -> str:
    """The rationale with every occurrence of the answer replaced by `mask` (unchanged when it has none)."""
    pattern = answer_pattern(answer)
    return rationale if pattern is None else pattern.sub(mask, rationale)


def restating_split(examples: pl.DataFrame) -> pl.DataFrame:
    """Per example (id, label, rationale): `restating` (bool) and `masked`, the rationale with its answer masked
    (null where it does not restate). Rows without a gold rationale are not restating."""
    rows = examples.select("id", "label", "rationale").to_dicts()
    flags = [restates_answer(r["rationale"], r["label"]) for r in rows]
    masked = [mask_answer(r["rationale"], r["label"]) if f else None for r, f in zip(rows, flags, strict=True)]
    return pl.DataFrame({"id": [str(r["id"]) for r in rows], "restating": flags, "masked": masked},
                        schema={"id": pl.String, "restating": pl.Boolean, "masked": pl.String})


def masked_rationales(examples: pl.DataFrame) -> pl.DataFrame:
    """The restating gold rationales with their answer masked, as a rationale table (id, source, rationale,
    label) under the source `RESTATING_MASKED_SOURCE`: score it next to the gold rationales."""
    split = restating_split(examples).filter("restating")
    labels = examples.select(pl.col("id").cast(pl.String), "label")
    frame = split.join(labels, on="id", how="left").select(
        "id", pl.lit(RESTATING_MASKED_SOURCE).alias("source"), pl.col("masked").alias("rationale"), "label")
    return frame.select([pl.col(c).cast(t) for c, t in RATIONALE_SCHEMA.items()])
