"""LAREV's IRM environments, built from each baseline and its leakage term (thesis 4.5.2, 5.3.2), as data.

For a baseline b whose leakage spans (found by Integrated Gradients and the span rule, see
larev/methods/leakage_aware/leakage_spans.py; or the thesis's single term t_leak) sit at b[start:end], each entry
of `ENVIRONMENTS` is a name and a builder:

  E1  b itself                                        backend 'original'
  E2  b with every span replaced by the mask token    backend 'mask'
  E3  b with every span rewritten to another label    backend of the rewrites (see antonyms/), joined by '+':
      (another label's relation phrase, another        'lexicon', 'distractor', 'wordnet', 'llm:<model>';
      answer choice); spans without a rewrite keep     when no span had one the row has no E3 (text null,
      their text                                       backend 'absent'), never a copy of E2

A builder takes every row's requests (one per span; None for a row without a span) and baseline, and returns one
(text, backend) per row; a row without a span gets b with backend 'none' in every environment but the
original. A builder may return None as a row's text: the row then lacks that environment, and phi_LA's IRM runs
over the environments it has (`coverage` reports the share of rows with a leakage term that have each one). A new
environment is one more builder and one more entry: training, the probe and the report read the environment names
from the table this module writes. Output is deterministic and in input order; only the LLM
backend runs concurrently.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from larev.methods.leakage_aware.antonyms import (MASK_FALLBACK, AntonymConfig, AntonymRequest, build_chain,
                                                  masked_baseline)
from larev.errors import InputError
from larev.leakage.text import replace_spans
from larev.llm import TextGenerator

__all__ = ["ABSENT", "ANTONYM", "ENVIRONMENTS", "ENVIRONMENT_NAMES", "ENVIRONMENT_SCHEMA", "LABEL_EDIT_ENVIRONMENTS",
           "MASKED", "ORIGINAL", "SWAPPED_AGAIN", "build_environments", "check_environment_names", "coverage",
           "environment_names", "masked_baseline"]

log = logging.getLogger(__name__)

ORIGINAL, MASKED, ANTONYM = "E1", "E2", "E3"
ABSENT = "absent"  # the backend of a row that lacks an environment (its text is null)
MIN_COVERAGE = 0.9  # below this share of rows with a leakage term, the run warns that an environment is thin
ENVIRONMENT_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(), "env": pl.String(), "baseline": pl.String(), "term": pl.String(), "backend": pl.String()}
_REQUIRED = ("id", "baseline", "term", "start", "end")
_OPTIONAL = ("task", "question", "choices", "label")


def _row_spans(row: dict, i: int) -> list[tuple[int, int]] | None:
    """The row's leakage spans: the `spans` column when present, else the one span (start, end); None without."""
    if "spans" in row:
        spans = row["spans"]
        if not spans:
            return None
        try:
            out = sorted((int(s), int(e)) for s, e in spans)
        except (TypeError, ValueError) as exc:
            raise InputError(f"spans must be [start, end] pairs, got {spans!r}", row=i, column="spans") from exc
        if any(s2 < e1 for (_, e1), (s2, _) in zip(out, out[1:])):
            raise InputError(f"spans overlap: {out}", row=i, column="spans")
        return out
    span = (row["term"], row["start"], row["end"])
    if all(v is None for v in span):
        return None
    if any(v is None for v in span):
        raise InputError(f"term, start and end must be all null or all set, got {span}", row=i, column="term")
    return [(int(row["start"]), int(row["end"]))]


def _requests(rows: pl.DataFrame) -> list[list[AntonymRequest] | None]:
    """Per row, one checked request per leakage span (in text order), None for rows without a span."""
    required = ("id", "baseline", "term", "spans") if "spans" in rows.columns else _REQUIRED
    missing = [c for c in required if c not in rows.columns]
    if missing:
        raise InputError(f"missing column(s) {missing}; the leakage-term rows have columns {rows.columns}",
                         column=missing[0])
    dup = rows.filter(pl.col("id").is_duplicated())
    if not dup.is_empty():
        raise InputError(f"duplicate id {dup['id'][0]!r}: environments need one row per example", column="id")
    out: list[list[AntonymRequest] | None] = []
    for i, row in enumerate(rows.iter_rows(named=True)):
        row = {**{c: None for c in _OPTIONAL}, **row}
        if row["baseline"] is None:
            raise InputError("null baseline", row=i, column="baseline")
        spans = _row_spans(row, i)
        if spans is None:
            out.append(None)
            continue
        one = len(spans) == 1 and "spans" not in row
        try:
            out.append([AntonymRequest.of(
                str(row["id"]), row["baseline"], s, e, term=row["term"] if one else None, task=row["task"],
                label=row["label"], question=row["question"], choices=row["choices"]) for s, e in spans])
        except InputError as exc:
            raise InputError(exc.problem, row=i, column=exc.column) from exc
    return out


@dataclass(frozen=True)
class BuildContext:
    """What the builders share: the mask token, the antonym chain's config and its LLM."""

    mask_token: str
    config: AntonymConfig
    generator: TextGenerator | None = None
    progress: bool = False


Built = list[tuple[str | None, str]]  # one (text, backend) per row; text None: the row lacks this environment
Requests = list[list[AntonymRequest] | None]  # per row, one request per leakage span; None: no span


def _original(requests: Requests, baselines: list[str], ctx: BuildContext) -> Built:
    return [(b, "original") for b in baselines]


def _masked(requests: Requests, baselines: list[str], ctx: BuildContext) -> Built:
    return [(b, "none") if r is None else (replace_spans(b, [(q.start, q.end, ctx.mask_token) for q in r]), "mask")
            for r, b in zip(requests, baselines)]


def _antonym(requests: Requests, baselines: list[str], ctx: BuildContext) -> Built:
    """Each span rewritten on its own (a phrase of another label, another answer choice ...), the rewrites then
    put together; a span without a rewrite keeps its text, so E3 differs from E1 in the label phrases only (masks
    there would tell a model which environment it reads, and it could learn to flip its reading of the phrase
    there instead of ignoring it). A row none of whose spans has a rewrite has no E3."""
    todo = [q for r in requests if r is not None for q in r]
    rewritten = iter([])
    if todo:
        chain = build_chain(ctx.config, ctx.mask_token, generator=ctx.generator)
        workers = ctx.config.max_concurrency if ctx.config.backend == "llm" else 1
        rewritten = iter(chain.rewrite_all(todo, max_concurrency=workers, progress=ctx.progress))
    out = []
    for r, b in zip(requests, baselines):
        if r is None:
            out.append((b, "none"))
            continue
        pieces, backends = [], []
        for q in r:
            done = next(rewritten)
            if done.backend == MASK_FALLBACK:
                pieces.append((q.start, q.end, b[q.start:q.end]))
            else:  # the chain checked that the rewrite differs from b only inside the span
                pieces.append((q.start, q.end, done.text[q.start:len(done.text) - (len(b) - q.end)]))
                backends.append(done.backend)
        # no rewrite of any span: the row has no E3 (a copy of E2 would give IRM two identical environments)
        out.append((replace_spans(b, pieces), "+".join(sorted(set(backends)))) if backends else (None, ABSENT))
    return out


#: The environments in order: a name and the builder of its texts (the first is the original baseline). Code finds
#: an environment by its name (ORIGINAL, MASKED, ANTONYM), never by its position, so a new entry may go anywhere
#: after the first.
ENVIRONMENTS: tuple[tuple[str, Callable[[Requests, list[str], BuildContext], Built]], ...] = (
    (ORIGINAL, _original), (MASKED, _masked), (ANTONYM, _antonym))
ENVIRONMENT_NAMES = tuple(name for name, _ in ENVIRONMENTS)
#: The environments phi_LA adds when it edits the label's own text (label_edits.py builds them from r and b, not
#: from b's spans): the label swapped for the other label neither E1 nor E3 names. They share the table's names.
SWAPPED_AGAIN = "E4"
LABEL_EDIT_ENVIRONMENTS = (SWAPPED_AGAIN,)


def check_environment_names(table: tuple[str, ...] = ENVIRONMENT_NAMES,
                            added: tuple[str, ...] = LABEL_EDIT_ENVIRONMENTS) -> None:
    """Every environment name is taken once, by the table or by the label edits (a new entry named like an added
    environment would silently merge with it in phi_LA's instances)."""
    names = [*table, *added]
    taken = sorted({n for n in names if names.count(n) > 1})
    if taken:
        raise ValueError(f"environment name(s) {taken} taken twice (ENVIRONMENTS {list(table)}, the label edits' "
                         f"{list(added)}): give the new environment another name")
    if not table or table[0] != ORIGINAL:
        raise ValueError(f"the first environment must be the original baseline {ORIGINAL!r}, got {list(table)}")


check_environment_names()


def environment_names(environments: pl.DataFrame) -> list[str]:
    """The environment names of an environments table, in `ENVIRONMENTS` order (others after, by name)."""
    present = set(environments["env"].unique().to_list())
    known = [name for name, _ in ENVIRONMENTS if name in present]
    return known + sorted(present - set(known))


def build_environments(rows: pl.DataFrame, mask_token: str, config: AntonymConfig, *,
                       generator: TextGenerator | None = None, progress: bool = False) -> pl.DataFrame:
    """Every environment of `ENVIRONMENTS` for every row: columns id, env, baseline (the environment's text),
    term, backend; one row per (id, environment), in input order.

    rows: `id, baseline, term, spans` (spans: [start, end] char offsets into b, empty when b has none), or
    `id, baseline, term, start, end` for one span per row (all three null when b has no leakage term); optionally
    `task, question, choices, label` (the QA context the distractor and LLM backends use; label is the answer b
    states). `term` (the span texts joined by ' | ') is on every environment's row.
    generator: the LLM for `config.backend == 'llm'` (give it a prompt cache); when None, Gemini
    `config.llm_model` with the key from the environment.
    """
    if not mask_token:
        raise InputError("mask_token is empty")
    requests = _requests(rows)
    baselines = rows["baseline"].to_list()
    ctx = BuildContext(mask_token, config, generator, progress)
    built = {name: builder(requests, baselines, ctx) for name, builder in ENVIRONMENTS}
    records: list[dict[str, Any]] = []
    for i, (req, row_id) in enumerate(zip(requests, rows["id"].to_list())):
        term = None if req is None else " | ".join(q.term for q in req)
        records += [{"id": str(row_id), "env": name, "baseline": built[name][i][0], "term": term,
                     "backend": built[name][i][1]} for name, _ in ENVIRONMENTS]
    for name, _ in ENVIRONMENTS[1:]:
        counts = Counter(backend for _, backend in built[name])
        log.info("environment %s of %d rows by backend: %s", name, len(requests),
                 ", ".join(f"{k}={v}" for k, v in counts.most_common() if v))
    table = pl.DataFrame(records, schema=ENVIRONMENT_SCHEMA) if records else pl.DataFrame(schema=ENVIRONMENT_SCHEMA)
    for name, share in coverage(table).items():
        if share < MIN_COVERAGE:
            log.warning("environment %s exists for only %.0f%% of the rows with a leakage term (under %.0f%%): "
                        "phi_LA's IRM sees it on those rows only", name, 100 * share, 100 * MIN_COVERAGE)
    return table


def coverage(environments: pl.DataFrame) -> dict[str, float]:
    """Per environment other than the original: the share of rows with a leakage term that have it (non-null
    text); 1.0 when no row has a term."""
    with_term = environments.filter(pl.col("term").is_not_null() & (pl.col("env") != ORIGINAL))
    out = {}
    for name in environment_names(environments)[1:]:
        rows = with_term.filter(pl.col("env") == name)
        out[name] = 1.0 if rows.is_empty() else float(rows["baseline"].is_not_null().mean())
    return out
