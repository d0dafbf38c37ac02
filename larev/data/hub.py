"""Rationale datasets from the Hugging Face hub (or a local copy of one), converted to the data contract.

Each supported dataset is a `HubSpec` in `HUB_DATASETS`: where it lives on the hub, its task, the hub's names
for the canonical splits, and a `converter` mapping one raw record to canonical fields. `load_hub_dataset`
imports `datasets` only when called, so the rest of larev works without touching the hub.

Without hub access, save a dataset elsewhere (`datasets.load_dataset(...).save_to_disk(DIR)`) or keep its raw
files, and pass `path=` to read it from disk with the same converter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from larev.data.files import SUFFIXES, conform_examples, read_table
from larev.errors import InputError
from larev.schema import EXAMPLE_SCHEMA, NLI_LABELS, SPLITS

log = logging.getLogger(__name__)

Record = dict[str, Any]
Converter = Callable[[Record], Record | None]


@dataclass(frozen=True)
class HubSpec:
    """How to fetch one dataset and turn its records into canonical examples.

    converter: raw record -> dict of canonical fields (premise/hypothesis or question/choices, label, rationale,
        optionally id); None skips the record (e.g. e-SNLI pairs without a gold label).
    splits: canonical split -> the hub's split name, for the splits the dataset has.
    aliases: other hub ids (or names) that mean this dataset.
    """

    hf_id: str
    config: str | None
    task: str
    converter: Converter
    splits: dict[str, str]
    aliases: tuple[str, ...] = ()


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) else None


def _id(value: Any) -> str | None:
    return None if value is None else str(value).strip() or None


# e-SNLI: label 0/1/2 = entailment / neutral / contradiction; -1 marks a pair without a gold label.
_ESNLI_LABELS = ("entailment", "neutral", "contradiction")


def convert_esnli(record: Record) -> Record | None:
    """premise, hypothesis, label (int, or already a label name), explanation_1 (2 and 3 are not kept)."""
    label = record["label"]
    if isinstance(label, str) and label in NLI_LABELS:
        name = label
    elif isinstance(label, int) and 0 <= label < len(_ESNLI_LABELS):
        name = _ESNLI_LABELS[label]
    elif label in (-1, None):
        return None
    else:
        raise ValueError(f"unknown e-SNLI label {label!r}")
    return {"premise": _text(record["premise"]), "hypothesis": _text(record["hypothesis"]), "label": name,
            "rationale": _text(record["explanation_1"])}


def convert_ecqa(record: Record) -> Record:
    """ECQA: q_no, q_text, q_op1..q_op5, q_ans (the answer's text) and taskB (the free-flow explanation)."""
    return {"id": _id(record.get("q_no")), "question": _text(record["q_text"]),
            "choices": [_text(record[f"q_op{i}"]) for i in range(1, 6)], "label": _text(record["q_ans"]),
            "rationale": _text(record["taskB"])}


def convert_cos_e(record: Record) -> Record:
    """CoS-E v1.11: id, question, choices (list), answer, abstractive_explanation."""
    return {"id": _id(record.get("id")), "question": _text(record["question"]),
            "choices": [_text(c) for c in record["choices"]], "label": _text(record["answer"]),
            "rationale": _text(record["abstractive_explanation"])}


def convert_strategyqa(record: Record) -> Record:
    """StrategyQA: qid, question, answer (bool -> 'yes' / 'no'), facts (list or text) joined as the rationale."""
    answer = record["answer"]
    if not isinstance(answer, bool):
        raise ValueError(f"answer should be true or false, found {answer!r}")
    facts = record.get("facts")
    rationale = " ".join(f.strip() for f in facts if f and f.strip()) if isinstance(facts, list) else _text(facts)
    return {"id": _id(record.get("qid")), "question": _text(record["question"]), "choices": ["yes", "no"],
            "label": "yes" if answer else "no", "rationale": rationale}


_ALL_SPLITS = {s: s for s in SPLITS}
HUB_DATASETS: dict[str, HubSpec] = {
    "esnli": HubSpec("esnli/esnli", None, "nli", convert_esnli, _ALL_SPLITS, aliases=("esnli", "e-snli")),
    "ecqa": HubSpec("yangdong/ecqa", None, "qa", convert_ecqa, _ALL_SPLITS, aliases=("tasksource/ecqa",)),
    "cos_e": HubSpec("Salesforce/cos_e", "v1.11", "qa", convert_cos_e,
                     {"train": "train", "validation": "validation"}, aliases=("cos_e", "cos-e")),
    "strategyqa": HubSpec("tasksource/strategy-qa", None, "qa", convert_strategyqa, {"train": "train"},
                          aliases=("strategy-qa", "wics/strategy-qa", "ChilleW/StrategyQA")),
}
SPLIT_ALIASES = {"dev": "validation", "val": "validation", "valid": "validation"}


def hub_spec(name: str) -> tuple[str, HubSpec]:
    """The registry key and spec for a registry key, hub id or alias (case-insensitive)."""
    wanted = name.strip().lower()
    for key, spec in HUB_DATASETS.items():
        if wanted in {key, spec.hf_id.lower(), *(a.lower() for a in spec.aliases)}:
            return key, spec
    raise InputError(f"unknown dataset {name!r}; known: {sorted(HUB_DATASETS)} "
                     "(for any other data, write a Parquet / JSONL / CSV file and use load_examples_file)")


def _hub_split(key: str, spec: HubSpec, split: str) -> tuple[str, str]:
    canonical = SPLIT_ALIASES.get(split, split)
    if canonical not in spec.splits:
        raise InputError(f"dataset {key!r} has no split {split!r}; it has {sorted(spec.splits)}")
    return canonical, spec.splits[canonical]


def _from_hub(spec: HubSpec, hf_split: str, cache_dir: str | None, *, file: str):
    import datasets

    try:
        return datasets.load_dataset(spec.hf_id, spec.config, split=hf_split, cache_dir=cache_dir)
    except Exception as e:  # the hub raises many kinds (connection, not found, offline mode, ...)
        detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise InputError(
            f"could not load {spec.hf_id!r}{f' config {spec.config!r}' if spec.config else ''} split {hf_split!r} "
            f"from the Hugging Face hub ({type(e).__name__}: {detail}). Without hub access, save it on a machine "
            "with access (datasets.load_dataset(...).save_to_disk(DIR)) and pass path=DIR", file=file) from None


def _from_disk(path: Path, hf_split: str, canonical: str, *, file: str):
    """A `save_to_disk` directory (one split or a DatasetDict), or one raw data file read by read_table."""
    if path.is_file() and path.suffix.lower() in SUFFIXES:
        return read_table(path)
    if not path.is_dir():
        raise InputError(f"path is neither a saved dataset directory nor a data file ({list(SUFFIXES)})",
                         file=str(path))
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError, OSError) as e:
        raise InputError(f"not a dataset saved with save_to_disk ({type(e).__name__}: {e})", file=file) from None
    if isinstance(loaded, datasets.DatasetDict):
        for name in (hf_split, canonical):
            if name in loaded:
                return loaded[name]
        raise InputError(f"the saved dataset has no split {hf_split!r}; it has {sorted(loaded)}", file=file)
    return loaded


def _records(data) -> Iterable[Record]:
    return data.iter_rows(named=True) if isinstance(data, pl.DataFrame) else iter(data)


def _head(data, limit: int | None):
    if limit is None or limit >= len(data):
        return data
    return data.head(limit) if isinstance(data, pl.DataFrame) else data.select(range(limit))


def convert_records(records: Iterable[Record], converter: Converter, *, id_prefix: str,
                    file: str) -> pl.DataFrame:
    """Apply a converter to raw records; rows without an id get `{id_prefix}-{index}` (the raw record's index)."""
    rows, skipped = [], 0
    for index, record in enumerate(records):
        try:
            row = converter(record)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"record does not have the expected layout: {type(e).__name__}: {e}", file=file,
                             row=index) from None
        if row is None:
            skipped += 1
            continue
        rows.append({**row, "id": row.get("id") or f"{id_prefix}-{index}"})
    if skipped:
        log.info("%s: skipped %d record(s) the converter rejects (e.g. no gold label)", file, skipped)
    if not rows:
        raise InputError("no usable records", file=file)
    schema = {k: v for k, v in EXAMPLE_SCHEMA.items() if k not in ("task", "split")}
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)


def load_hub_dataset(name: str, *, split: str, cache_dir: str | None = None, limit: int | None = None,
                     path: str | Path | None = None, require_rationale: bool = True,
                     drop_empty_rationales: bool = False) -> pl.DataFrame:
    """Load a supported rationale dataset (see `HUB_DATASETS`) as canonical examples.

    name: a registry key ('esnli', 'ecqa', 'cos_e', 'strategyqa'), its hub id or an alias.
    split: 'train', 'validation' (or 'dev' / 'val') or 'test', where the dataset has it.
    path: read from disk instead of the hub: a directory written by `save_to_disk` or a raw data file
        (.parquet / .jsonl / .json / .csv) in the dataset's own layout.
    limit: keep the first `limit` raw records.
    require_rationale / drop_empty_rationales: as in `load_examples_file`.
    """
    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    key, spec = hub_spec(name)
    canonical, hf_split = _hub_split(key, spec, split)
    file = str(path) if path is not None else f"hub:{spec.hf_id}[{hf_split}]"
    data = (_from_disk(Path(path), hf_split, canonical, file=file) if path is not None
            else _from_hub(spec, hf_split, cache_dir, file=file))
    frame = convert_records(_records(_head(data, limit)), spec.converter, id_prefix=f"{key}-{canonical}",
                            file=file)
    return conform_examples(frame, file=file, task=spec.task, split=canonical, require_rationale=require_rationale,
                            drop_empty_rationales=drop_empty_rationales)
