"""The degradations of each source's own rationales, as the thesis builds them for its table 5.8 (section 5.4.5).

Section 5.4.5 replaces the gold rationale r with a task model's generated rationale and keeps the baseline b and
the evaluator fixed; its table 5.8 then reports, per task model, r minus each of r's degradations (section 5.2.1):

  leaky       "The answer is {label}." - the label the row explains, and nothing else (independent of r)
  gold_leaky  r followed by the leaky sentence ("a combination of r with additional answer-revealing content")
  vacuous     the baseline b of the row's example and label (b states the label being evaluated)

They are built by larev.data.variants.make_variants with the source's rationale in the gold rationale's place, so
the degradations of the gold rationale are exactly the built-in variants `leaky`, `gold_leaky` and `vacuous`.
Source S's degradation D is named `S~D` (`degraded_name`): '~' is no character of a source name a generator writes
(larev/generate/config.py NAME_PATTERN), nor of the names larev derives (`OUTPUT:SOURCE`, `SOURCE:think`,
`SOURCE+addtext-...`); a file whose sources contain it is refused (`check_source_names`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import polars as pl

from larev.data.variants import THESIS_VARIANTS, make_variants
from larev.errors import InputError
from larev.schema import RATIONALE_SCHEMA

#: Between a source's name and its degradation's: `gpt-4~leaky`.
SEPARATOR = "~"
#: The degradations of table 5.8, in its column order (the thesis's variants other than gold).
DEGRADATIONS: tuple[str, ...] = tuple(v for v in THESIS_VARIANTS if v != "gold")


def degraded_name(source: str, degradation: str) -> str:
    """The source name of `source`'s degradation `degradation` (`gpt-4`, `leaky` -> `gpt-4~leaky`)."""
    return f"{source}{SEPARATOR}{degradation}"


def split_degraded(name: str) -> tuple[str, str] | None:
    """(source, degradation) of a name `degraded_name` made; None for any other name."""
    source, sep, degradation = name.rpartition(SEPARATOR)
    return (source, degradation) if sep and source and degradation in DEGRADATIONS else None


def is_degraded(source: pl.Expr) -> pl.Expr:
    """Whether each source name (a string expression) is a degradation's (holds the separator)."""
    return source.str.contains(SEPARATOR, literal=True)


def check_source_names(sources: Iterable[str], *, file: str = "<rationales>") -> None:
    """Refuse source names holding the separator: their degradations' names could not be told apart."""
    bad = sorted({s for s in sources if SEPARATOR in s})
    if bad:
        raise InputError(f"source name(s) {bad} hold {SEPARATOR!r}, which names a source's degradations "
                         f"(SOURCE{SEPARATOR}leaky): rename those sources to score them with degradations",
                         file=file, column="source")


def degraded_rationales(rationales: pl.DataFrame, baselines: pl.DataFrame,
                        degradations: Sequence[str] = DEGRADATIONS) -> pl.DataFrame:
    """The degradations of every source's own rationales (thesis table 5.8): rows (id, source, rationale, label)
    named `S~D`, source by source in the order the sources first appear, each source's rows by degradation in the
    order asked, then in the rationales' order.

    rationales: validated rationale rows (id, source, rationale, label; one per (id, source)); baselines: (id,
    label, baseline) for every (id, label) among them (the vacuous degradation is the row's b).
    """
    check_source_names(rationales["source"].unique().to_list())
    parts = [_degraded_source(rationales.filter(pl.col("source") == source), baselines, source, degradations)
             for source in rationales["source"].unique(maintain_order=True).to_list()]
    if not parts:
        return pl.DataFrame(schema=RATIONALE_SCHEMA)
    return pl.concat(parts)


def _degraded_source(rows: pl.DataFrame, baselines: pl.DataFrame, source: str,
                     degradations: Sequence[str]) -> pl.DataFrame:
    """One source's degradations: make_variants with the source's rationales and labels in the gold ones' place,
    and each row's own baseline (its example's, for its label)."""
    own = rows.select("id", "label", "rationale")
    own_baselines = own.join(baselines.select("id", "label", "baseline"), on=["id", "label"], how="left",
                             maintain_order="left").select("id", "baseline")
    made = make_variants(own, own_baselines.drop_nulls("baseline"), tuple(degradations))
    return made.with_columns(source=pl.lit(source + SEPARATOR) + pl.col("source"))


def with_degradations(rationales: pl.DataFrame, baselines: pl.DataFrame,
                      degradations: Sequence[str] = DEGRADATIONS) -> pl.DataFrame:
    """The rationales followed by every source's degradations (`degraded_rationales`), in the rationale columns."""
    columns = list(RATIONALE_SCHEMA)
    return pl.concat([rationales.select(columns),
                      degraded_rationales(rationales, baselines, degradations).select(columns)])
