"""Built-in rationale variants to score next to user rationales: they pin down what a metric rewards.

  gold        the gold (human) rationale
  leaky       "The answer is {label}." - states the label and nothing else
  gold_leaky  the gold rationale followed by the leaky sentence
  vacuous     the vacuous baseline b itself (REV should score it about 0)
"""

from __future__ import annotations

import polars as pl

from larev.errors import ConfigError, InputError
from larev.schema import RATIONALE_SCHEMA

LEAKY_TEMPLATE = "The answer is {label}."
VARIANTS = ("gold", "leaky", "gold_leaky", "vacuous")


def make_variants(examples: pl.DataFrame, baselines: pl.DataFrame,
                  variants: tuple[str, ...] | list[str] = VARIANTS) -> pl.DataFrame:
    """Rationale rows (id, source, rationale, label) for each requested variant; label is the gold label.

    examples: validated examples; baselines: `build_baselines` output for the gold labels (one row per id).
    Rows are grouped by variant, in the order asked, each group in the examples' order.
    """
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ConfigError(f"unknown rationale variant(s) {unknown}; valid names are {list(VARIANTS)}")
    if len(set(variants)) != len(variants):
        raise ConfigError(f"repeated rationale variant in {list(variants)}")
    frame = examples.select("id", "label", "rationale").with_row_index("__row")
    if "vacuous" in variants:
        frame = _with_baselines(frame, baselines)
    if {"gold", "gold_leaky"} & set(variants):
        empty = frame.filter(pl.col("rationale").is_null() | (pl.col("rationale").str.strip_chars() == ""))
        if not empty.is_empty():
            raise InputError("no gold rationale for the 'gold' / 'gold_leaky' variants; drop them or give every "
                             "example a rationale", row=int(empty["__row"][0]), column="rationale")
    leaky = pl.format(LEAKY_TEMPLATE.replace("{label}", "{}"), pl.col("label"))
    texts = {
        "gold": pl.col("rationale"),
        "leaky": leaky,
        "gold_leaky": pl.concat_str([pl.col("rationale").str.strip_chars_end(), leaky], separator=" "),
        "vacuous": pl.col("baseline") if "baseline" in frame.columns else pl.lit(None, pl.String),
    }
    parts = [frame.select("id", pl.lit(v).alias("source"), texts[v].alias("rationale"), "label") for v in variants]
    if not parts:
        return pl.DataFrame(schema=RATIONALE_SCHEMA)
    return pl.concat(parts).select([pl.col(c).cast(t) for c, t in RATIONALE_SCHEMA.items()])


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
