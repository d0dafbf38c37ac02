"""Built-in rationale variants to score next to user rationales: they pin down what a metric rewards.

  gold        the gold (human) rationale
  leaky       "The answer is {label}." - states the label and nothing else
  gold_leaky  the gold rationale followed by the leaky sentence
  vacuous     the vacuous baseline b itself (REV should score it about 0)

Test-only variants (evaluator probes: no metric trains on them; RORA, RQ and LAS score them with the gold
rationales' models). Each holds a rationale that says nothing about its own instance:

  borrowed        the gold rationale of another test instance with the same gold label (a seeded derangement within
                  each label: no instance keeps its own). It carries the label's usual phrasing and nothing about
                  this instance, so a metric of new information should score it about 0, like `empty`
  borrowed_other  the gold rationale of another test instance with a different gold label (seeded draw): it argues
                  for another label, so it may and should score below 0
  empty           no rationale at all (the empty string): the zero point every other score is read against

A row that has no partner (a label held by one test instance, or every instance with the same label) is left out
of `borrowed` / `borrowed_other`, with a warning; QA answers are strings, mostly unique, so QA runs keep few
`borrowed` rows.
"""

from __future__ import annotations

import logging
import random

import polars as pl

from larev.errors import ConfigError, InputError
from larev.schema import RATIONALE_SCHEMA

log = logging.getLogger(__name__)

LEAKY_TEMPLATE = "The answer is {label}."
THESIS_VARIANTS = ("gold", "leaky", "gold_leaky", "vacuous")  # the LAREV thesis's table 5.10 (its SUM)
TEST_ONLY_VARIANTS = ("borrowed", "borrowed_other", "empty")  # evaluator probes, never a training source
VARIANTS = THESIS_VARIANTS + TEST_ONLY_VARIANTS
NEEDS_GOLD = ("gold", "gold_leaky", "borrowed", "borrowed_other")
BORROW_SEED = 0  # the borrowed draws are part of the test data: the same in every training seed


def make_variants(examples: pl.DataFrame, baselines: pl.DataFrame,
                  variants: tuple[str, ...] | list[str] = VARIANTS, *, seed: int = BORROW_SEED) -> pl.DataFrame:
    """Rationale rows (id, source, rationale, label) for each requested variant; label is the gold label.

    examples: validated examples; baselines: `build_baselines` output for the gold labels (one row per id).
    Rows are grouped by variant, in the order asked, each group in the examples' order; `seed` draws the
    borrowed rationales (`borrowed_from`).
    """
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ConfigError(f"unknown rationale variant(s) {unknown}; valid names are {list(VARIANTS)}")
    if len(set(variants)) != len(variants):
        raise ConfigError(f"repeated rationale variant in {list(variants)}")
    frame = examples.select("id", "label", "rationale").with_row_index("__row")
    if "vacuous" in variants:
        frame = _with_baselines(frame, baselines)
    needs_gold = [v for v in variants if v in NEEDS_GOLD]
    if needs_gold:
        empty = frame.filter(pl.col("rationale").is_null() | (pl.col("rationale").str.strip_chars() == ""))
        if not empty.is_empty():
            raise InputError(f"no gold rationale for the {needs_gold} variant(s); drop them or give every "
                             "example a rationale", row=int(empty["__row"][0]), column="rationale")
    leaky = pl.format(LEAKY_TEMPLATE.replace("{label}", "{}"), pl.col("label"))
    texts = {
        "gold": pl.col("rationale"),
        "leaky": leaky,
        "gold_leaky": pl.concat_str([pl.col("rationale").str.strip_chars_end(), leaky], separator=" "),
        "vacuous": pl.col("baseline") if "baseline" in frame.columns else pl.lit(None, pl.String),
        "empty": pl.lit("", pl.String),
    }
    parts = []
    for v in variants:
        if v in ("borrowed", "borrowed_other"):
            donors = borrowed_from(frame["label"].to_list(), same_label=v == "borrowed", seed=seed)
            kept = [i for i, d in enumerate(donors) if d is not None]
            if len(kept) < frame.height:
                why = "no other example with their label" if v == "borrowed" else "every example shares their label"
                log.warning("variant %r: %d of %d examples have no donor (%s) and are left out", v,
                            frame.height - len(kept), frame.height, why)
            golds = frame["rationale"].to_list()
            rows = frame[kept].with_columns(pl.Series("rationale", [golds[donors[i]] for i in kept], pl.String))
            parts.append(rows.select("id", pl.lit(v).alias("source"), "rationale", "label"))
        else:
            parts.append(frame.select("id", pl.lit(v).alias("source"), texts[v].alias("rationale"), "label"))
    if not parts:
        return pl.DataFrame(schema=RATIONALE_SCHEMA)
    return pl.concat(parts).select([pl.col(c).cast(t) for c, t in RATIONALE_SCHEMA.items()])


def borrowed_from(labels: list[str], *, same_label: bool, seed: int = BORROW_SEED) -> list[int | None]:
    """For every row, the index of the row whose gold rationale it borrows (None: no donor).

    same_label: a derangement within each label (Sattolo's algorithm: a uniformly drawn single cycle over the
    label's rows, so no row keeps its own and every rationale is lent exactly once); otherwise a uniform draw
    among the rows of the other labels. Deterministic given `seed` and the labels' order.
    """
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for i, y in enumerate(labels):
        groups.setdefault(y, []).append(i)
    donors: list[int | None] = [None] * len(labels)
    if same_label:
        for y in sorted(groups):
            rows = groups[y]
            if len(rows) < 2:
                continue
            cycle = list(rows)
            for k in range(len(cycle) - 1, 0, -1):  # Sattolo: j < k, never k itself
                j = rng.randrange(k)
                cycle[k], cycle[j] = cycle[j], cycle[k]
            for k, row in enumerate(cycle):
                donors[row] = cycle[(k + 1) % len(cycle)]
        return donors
    for i, y in enumerate(labels):
        n_other = len(labels) - len(groups[y])
        if n_other == 0:
            continue
        pick = rng.randrange(n_other)  # the pick-th row (in order) among the other labels' rows
        for other in sorted(groups):
            if other == y:
                continue
            if pick < len(groups[other]):
                donors[i] = groups[other][pick]
                break
            pick -= len(groups[other])
    return donors


def _with_baselines(frame: pl.DataFrame, baselines: pl.DataFrame) -> pl.DataFrame:
    """Attach each example's baseline; every example needs exactly one."""
    duplicated = baselines.filter(pl.col("id").is_duplicated())
    if not duplicated.is_empty():
        raise InputError(f"several baselines for id {duplicated['id'][0]!r}; give one per example (gold label)",
                         file="<baselines>", column="id")
    joined = frame.join(baselines.select("id", "baseline"), on="id", how="left").sort("__row")
    missing = joined.filter(pl.col("baseline").is_null())
    if not missing.is_empty():
        raise InputError(f"no baseline for example {missing['id'][0]!r}", file="<baselines>",
                         row=int(missing["__row"][0]), column="id")
    return joined


def combine_rationale_sets(variants_df: pl.DataFrame, user_df: pl.DataFrame) -> pl.DataFrame:
    """The built-in variants followed by user rationales (both validated, rationale columns).

    A user (id, source) that is also a variant's is an error: rename the user source or drop the variant.
    """
    columns = list(RATIONALE_SCHEMA)
    clash = variants_df.select("id", "source").join(user_df.select("id", "source"), on=["id", "source"],
                                                     how="inner")
    if not clash.is_empty():
        sources = sorted(clash["source"].unique().to_list())
        raise InputError(f"user rationale source(s) {sources} collide with built-in variants (first at id "
                         f"{clash['id'][0]!r}); rename those sources or leave the variants out",
                         file="<rationales>", column="source")
    return pl.concat([variants_df.select(columns), user_df.select(columns)])


def bulk_rationales(examples: pl.DataFrame, n_rows: int, *, seed: int = 0, max_added_words: int = 4) -> pl.DataFrame:
    """A large rationale file for load tests and scale-out benchmarks: n_rows rows (id, source, rationale) over
    the examples' ids in turn, each the gold rationale followed by 0..max_added_words words drawn (seeded) from
    the examples' rationales, under the source `model-<k>` for the k-th pass over the ids (so (id, source) is
    unique)."""
    import random

    if examples.is_empty() or n_rows < 0:
        raise ConfigError(f"bulk_rationales needs examples and n_rows >= 0 (got {examples.height} examples, "
                          f"n_rows {n_rows})")
    ids, golds = examples["id"].to_list(), examples["rationale"].to_list()
    words = " ".join(golds).split() or ["word"]
    rng = random.Random(seed)
    rows = []
    for i in range(n_rows):
        added = rng.choices(words, k=rng.randint(0, max_added_words))
        rows.append((ids[i % len(ids)], f"model-{i // len(ids)}", " ".join([golds[i % len(ids)], *added])))
    return pl.DataFrame(rows, schema={"id": pl.Utf8, "source": pl.Utf8, "rationale": pl.Utf8}, orient="row")
