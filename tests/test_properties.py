"""Property tests: loaders round-trip arbitrary valid rows in every format and name the row of a bad label;
baseline builders are deterministic, keep their inputs and record their provenance.

What the loaders normalise (asserted below): nothing in a valid row's text. id, source and rationale come back
exactly as written (no stripping, no whitespace or newline changes, in CSV, JSON lines and Parquet alike); a
missing or null label is filled with the example's gold label. Blank means "no value": a rationale or label that
is empty or whitespace only is rejected (CSV also reads an empty cell as null), so the strategies only draw
rationales with a non-blank character.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from larev.baselines.build import build_baselines
from larev.baselines.nli import RELATIONS, NLIItem, OfflineParaphraser, as_clause, nli_template
from larev.config import BaselineConfig
from larev.data.files import load_examples_file, load_rationales_file
from larev.errors import InputError
from larev.schema import NLI_LABELS, validate_examples

SUFFIXES = (".parquet", ".jsonl", ".csv")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text with the characters files get wrong: separators, quotes, line breaks, padding, non-ASCII (surrogates
# excluded: they cannot be encoded as UTF-8).
AWKWARD = st.sampled_from([",", '"', "'", "\n", "\r\n", "\r", " ", "\t", "  ", ";", "|", "\\", "{", "}", "[", "]",
                           "\u2028", "\x85", "\u00e9", "\u4e2d", "\U0001f600", "null", "NA", "\ufeff"])
CHARS = st.characters(exclude_categories=("Cs",))
TEXT = st.lists(st.one_of(AWKWARD, st.text(CHARS, max_size=8)), max_size=8).map("".join)
NONBLANK = TEXT.filter(lambda t: t.strip() != "")
SOURCES = st.sampled_from(["gold", "gpt-4", "leaky", "model, v2", 'say "hi"', " padded ", "\u00e9t\u00e9"])


def _write(frame: pl.DataFrame, path: Path) -> Path:
    {".parquet": frame.write_parquet, ".jsonl": frame.write_ndjson, ".csv": frame.write_csv}[path.suffix](path)
    return path


def _nli_examples(ids: list[str], gold: list[str]) -> pl.DataFrame:
    return validate_examples(pl.DataFrame({"id": ids, "premise": ["A man sleeps."] * len(ids),
                                           "hypothesis": ["He is tired."] * len(ids), "label": gold}),
                             task="nli", require_rationale=False, default_split="test")


@st.composite
def rationale_tables(draw):
    """(rationale rows, examples they explain): unique ids, sources from a small alphabet, awkward text."""
    ids = draw(st.lists(NONBLANK, min_size=1, max_size=6, unique=True))
    gold = draw(st.lists(st.sampled_from(NLI_LABELS), min_size=len(ids), max_size=len(ids)))
    rows = pl.DataFrame({
        "id": ids,
        "source": draw(st.lists(SOURCES, min_size=len(ids), max_size=len(ids))),
        "rationale": draw(st.lists(NONBLANK, min_size=len(ids), max_size=len(ids))),
        "label": draw(st.lists(st.one_of(st.none(), st.sampled_from(NLI_LABELS)), min_size=len(ids),
                               max_size=len(ids))),
    }, schema={"id": pl.String, "source": pl.String, "rationale": pl.String, "label": pl.String})
    return rows, _nli_examples(ids, gold)


# ---- loaders ------------------------------------------------------------------------------------------------

@SETTINGS
@given(table=rationale_tables())
def test_rationale_files_round_trip_in_every_format(table):
    rows, examples = table
    gold = dict(zip(examples["id"], examples["label"]))
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in SUFFIXES:
            df = load_rationales_file(_write(rows, Path(tmp) / f"r{suffix}"), examples)
            assert df.columns == ["id", "source", "rationale", "label"], suffix
            # no normalisation: text comes back exactly as written
            assert df["id"].to_list() == rows["id"].to_list(), suffix
            assert df["source"].to_list() == rows["source"].to_list(), suffix
            assert df["rationale"].to_list() == rows["rationale"].to_list(), suffix
            # a missing label is the gold one
            assert df["label"].to_list() == [y if y is not None else gold[i] for i, y in
                                             zip(rows["id"], rows["label"])], suffix


@SETTINGS
@given(table=rationale_tables(), data=st.data(), bad=TEXT.filter(lambda t: t not in NLI_LABELS and t != ""))
def test_a_label_outside_the_label_set_names_its_row(table, data, bad):
    """A rationales file and an examples file with one row's label replaced by a string outside the label set.

    The empty string is left out: it is no label in CSV (an empty cell is null, filled with the gold label).
    """
    rows, examples = table
    row = data.draw(st.integers(0, rows.height - 1), label="row")
    labels = rows["label"].to_list()
    labels[row] = bad
    rationales = rows.with_columns(pl.Series("label", labels, dtype=pl.String))
    example_rows = examples.select("id", "premise", "hypothesis", "label", "split").with_columns(
        pl.Series("label", [bad if i == row else y for i, y in enumerate(examples["label"])], dtype=pl.String))
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in SUFFIXES:
            path = _write(rationales, Path(tmp) / f"r{suffix}")
            with pytest.raises(InputError) as info:
                load_rationales_file(path, examples)
            assert (info.value.file, info.value.row, info.value.column) == (str(path), row, "label"), suffix
            assert str(info.value).startswith(f"{path}: row {row}, column 'label': ")
            path = _write(example_rows, Path(tmp) / f"ex{suffix}")
            with pytest.raises(InputError) as info:
                load_examples_file(path, task="nli", require_rationale=False)
            assert (info.value.file, info.value.row, info.value.column) == (str(path), row, "label"), suffix
            assert str(info.value).startswith(f"{path}: row {row}, column 'label': ")


# ---- baseline builders --------------------------------------------------------------------------------------

def _kept(clause: str, text: str) -> bool:
    """Whether `clause` appears in `text` word for word, up to the case of its first letter."""
    if not clause:
        return True
    first, rest = clause[0], clause[1:]
    return any(f + rest in text for f in {first, first.upper(), first.lower()})


@SETTINGS
@given(premise=NONBLANK, hypothesis=NONBLANK, label=st.sampled_from(NLI_LABELS))
def test_nli_template_states_premise_relation_and_hypothesis(premise, hypothesis, label):
    """The template keeps premise and hypothesis word for word after `as_clause` (whitespace runs collapsed to one
    space, ends stripped, final . ! ? ; : , dropped), up to the case of their first letter; one line."""
    text = nli_template(premise, hypothesis, label)
    assert f" {RELATIONS[label]} " in text and text.endswith(".")
    assert _kept(as_clause(premise), text) and _kept(as_clause(hypothesis), text)
    assert len(text.splitlines()) == 1


@st.composite
def nli_frames(draw):
    n = draw(st.integers(1, 5))
    texts = st.lists(NONBLANK, min_size=n, max_size=n)
    return validate_examples(pl.DataFrame({
        "id": [f"n{i}" for i in range(n)], "premise": draw(texts), "hypothesis": draw(texts),
        "label": draw(st.lists(st.sampled_from(NLI_LABELS), min_size=n, max_size=n)),
    }), task="nli", require_rationale=False, default_split="test")


@SETTINGS
@given(examples=nli_frames(), seed=st.integers(0, 2**16))
def test_offline_nli_baselines_are_deterministic_keep_the_text_and_record_provenance(examples, seed):
    config = BaselineConfig(paraphrase="offline", seed=seed)
    out = build_baselines(examples, config, progress=False)
    assert out.columns == ["id", "baseline", "baseline_backend"]
    assert out["id"].to_list() == examples["id"].to_list()
    assert set(out["baseline_backend"]) == {"offline"}
    # deterministic for a seed, whatever the batching or row order
    assert out.equals(build_baselines(examples, config, progress=False, batch_size=1))
    reversed_out = build_baselines(examples.reverse(), config, progress=False)
    assert reversed_out.reverse().equals(out)
    for row, baseline in zip(examples.iter_rows(named=True), out["baseline"], strict=True):
        assert baseline == OfflineParaphraser(seed).rewrite(NLIItem(row["premise"], row["hypothesis"], row["label"]))
        assert _kept(as_clause(row["premise"]), baseline) and _kept(as_clause(row["hypothesis"]), baseline)
        assert len(baseline.splitlines()) == 1 and baseline.endswith(".")
    template = build_baselines(examples, BaselineConfig(paraphrase="none"), progress=False)
    assert set(template["baseline_backend"]) == {"template"}
    assert template["baseline"].to_list() == [nli_template(p, h, y) for p, h, y in
                                              zip(examples["premise"], examples["hypothesis"], examples["label"])]


@SETTINGS
@given(questions=st.lists(TEXT.filter(lambda t: t.strip() != ""), min_size=1, max_size=5), data=st.data())
def test_rule_qa_baselines_one_statement_per_row_with_provenance(questions, data):
    answers = data.draw(st.lists(NONBLANK, min_size=len(questions), max_size=len(questions)), label="answers")
    examples = validate_examples(pl.DataFrame({"id": [f"q{i}" for i in range(len(questions))],
                                               "question": questions, "label": answers}),
                                 task="qa", require_rationale=False, default_split="test")
    out = build_baselines(examples, BaselineConfig(qa_converter="rules"), progress=False)
    assert out["id"].to_list() == examples["id"].to_list()
    assert all(text.strip() and len(text.splitlines()) == 1 for text in out["baseline"])
    assert all(backend.startswith("rules:") for backend in out["baseline_backend"])
    assert out.equals(build_baselines(examples, BaselineConfig(qa_converter="rules"), progress=False, batch_size=1))
