"""The AddText stress test's configuration (Chen et al., "Can Rationalization Improve Robustness?", section 4.1)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from larev.config import _Config

Kind = Literal["rand", "wiki", "adv"]
KINDS: tuple[Kind, ...] = ("rand", "wiki", "adv")


class AddTextConfig(_Config):
    """Which AddText perturbations of each rationale to make, and how.

    One perturbed rationale per (rationale row, kind, position). Everything random follows from `seed`
    through per-row seeds (a sha256 of the seed and the row's id), so a run is reproducible and a row's
    perturbation does not depend on which other rows are in the file.
    """

    kinds: tuple[Kind, ...] = Field(
        KINDS, min_length=1,
        description="rand: random tokens from the task vocabulary; wiki: an unrelated fluent sentence; adv: the "
                    "query with its noun phrases swapped (high lexical overlap, label kept) (section 4.1)")
    positions: tuple[Literal["start", "end", "random"], ...] = Field(
        ("start", "end", "random"), min_length=1,
        description="where the text goes: before the rationale, after it, or in a seeded gap between two words")
    n_rand_tokens: int = Field(
        10, ge=1, le=200,
        description="AddText-Rand length in tokens; the paper gives none, 10 is about one short sentence")
    seed: int = Field(0, description="every draw (tokens, sentences, swaps, gaps) follows from this seed")
    wiki_corpus: str | None = Field(
        None, description="UTF-8 text file, one unrelated sentence per line, for AddText-Wiki; None: the "
                          "generated encyclopedia-like default corpus (larev/addtext/corpus.py)")
    wiki_corpus_size: int = Field(2000, ge=10, le=100_000, description="sentences in the generated default corpus")

    @field_validator("kinds", "positions")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"repeated entry in {list(value)}")
        return value

    @field_validator("wiki_corpus")
    @classmethod
    def _path_given(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("wiki_corpus is blank; give a file path or leave it out for the default corpus")
        return value
