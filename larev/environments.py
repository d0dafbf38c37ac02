"""The three IRM environments of LAREV built from each baseline and its leakage term (thesis 4.5.2, 5.3.2).

For a baseline b whose leakage term t_leak sits at b[start:end] (found by Integrated Gradients, see
larev/attribution.py):

  E1  b itself                                        backend 'original'
  E2  b with t_leak replaced by the mask token        backend 'mask'
  E3  b with t_leak replaced by an antonym            backend of the antonym (see larev/antonyms.py):
                                                      'lexicon', 'distractor', 'wordnet', 'llm:<model>',
                                                      or 'fallback:mask' when no backend had one

A row without a leakage term (null term/start/end) gets E2 = E3 = b, with backend 'none' on both.
Output is deterministic and in input order; only the LLM backend runs concurrently.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import polars as pl

from larev.antonyms import AntonymConfig, AntonymRequest, build_chain, masked_baseline
from larev.errors import InputError
from larev.llm import TextGenerator

__all__ = ["ENVIRONMENTS", "ENVIRONMENT_SCHEMA", "build_environments", "masked_baseline"]

log = logging.getLogger(__name__)

ENVIRONMENTS = ("E1", "E2", "E3")
ENVIRONMENT_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(), "env": pl.String(), "baseline": pl.String(), "term": pl.String(), "backend": pl.String()}
_REQUIRED = ("id", "baseline", "term", "start", "end")
_OPTIONAL = ("task", "question", "choices", "label")


def _requests(rows: pl.DataFrame) -> list[AntonymRequest | None]:
    """One checked request per row, None for rows without a leakage term."""
    missing = [c for c in _REQUIRED if c not in rows.columns]
    if missing:
        raise InputError(f"missing column(s) {missing}; the leakage-term rows have columns {rows.columns}",
                         column=missing[0])
    dup = rows.filter(pl.col("id").is_duplicated())
    if not dup.is_empty():
        raise InputError(f"duplicate id {dup['id'][0]!r}: environments need one row per example", column="id")
    out: list[AntonymRequest | None] = []
    for i, row in enumerate(rows.iter_rows(named=True)):
        row = {**{c: None for c in _OPTIONAL}, **row}
        if row["baseline"] is None:
            raise InputError("null baseline", row=i, column="baseline")
        span = (row["term"], row["start"], row["end"])
        if all(v is None for v in span):
            out.append(None)
            continue
        if any(v is None for v in span):
            raise InputError(f"term, start and end must be all null or all set, got {span}", row=i, column="term")
        try:
            out.append(AntonymRequest.of(
                str(row["id"]), row["baseline"], int(row["start"]), int(row["end"]), term=row["term"],
                task=row["task"], label=row["label"], question=row["question"], choices=row["choices"]))
        except InputError as exc:
            raise InputError(exc.problem, row=i, column=exc.column) from exc
    return out


def build_environments(rows: pl.DataFrame, mask_token: str, config: AntonymConfig, *,
                       generator: TextGenerator | None = None, progress: bool = False) -> pl.DataFrame:
    """E1, E2 and E3 of every row: columns id, env, baseline (the environment's text), term, backend.

    rows: `id, baseline, term, start, end` (term/start/end null when b has no leakage term; start/end are char
    offsets into b) and optionally `task, question, choices, label` (the QA context the distractor and LLM
    backends use; label is the answer b states). Three rows per id, in input order, E1/E2/E3 each.
    `term` is the leakage term on all three rows. generator: the LLM for `config.backend == 'llm'` (give it
    a prompt cache); when None, Gemini `config.llm_model` with the key from the environment.
    """
    if not mask_token:
        raise InputError("mask_token is empty")
    requests = _requests(rows)
    todo = [r for r in requests if r is not None]
    e3 = []
    if todo:
        chain = build_chain(config, mask_token, generator=generator)
        workers = config.max_concurrency if config.backend == "llm" else 1
        e3 = chain.rewrite_all(todo, max_concurrency=workers, progress=progress)
    records: list[dict[str, Any]] = []
    done = iter(e3)
    for req, row in zip(requests, rows.iter_rows(named=True), strict=True):
        b, rid = row["baseline"], str(row["id"])
        if req is None:
            records += [{"id": rid, "env": "E1", "baseline": b, "term": None, "backend": "original"},
                        {"id": rid, "env": "E2", "baseline": b, "term": None, "backend": "none"},
                        {"id": rid, "env": "E3", "baseline": b, "term": None, "backend": "none"}]
            continue
        antonym = next(done)
        records += [
            {"id": rid, "env": "E1", "baseline": b, "term": req.term, "backend": "original"},
            {"id": rid, "env": "E2", "baseline": masked_baseline(b, req.start, req.end, mask_token), "term": req.term,
             "backend": "mask"},
            {"id": rid, "env": "E3", "baseline": antonym.text, "term": req.term, "backend": antonym.backend}]
    counts = Counter(r.backend for r in e3)
    counts["none"] = len(requests) - len(todo)
    log.info("antonym environment E3 of %d rows by backend: %s", len(requests),
             ", ".join(f"{k}={v}" for k, v in counts.most_common() if v))
    return pl.DataFrame(records, schema=ENVIRONMENT_SCHEMA) if records else \
        pl.DataFrame(schema=ENVIRONMENT_SCHEMA)
