"""Build the vacuous baseline rationale b of every example, for its gold label or any other label column."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from larev.baselines.nli import (RELATIONS, HFParaphraser, LLMParaphraser, NLIItem, OfflineParaphraser,
                                 TemplateParaphraser)
from larev.baselines.qa import HFQuestionConverter, LLMQuestionConverter, QAItem, RuleConverter
from larev.config import BaselineConfig
from larev.errors import ConfigError, InputError
from larev.progress import progress_bar
from larev.llm import Rewritten, TextGenerator, cached_gemini

BASELINE_COLUMNS = ("id", "baseline", "baseline_backend")
BATCH_SIZE = 64


def _generator(config: BaselineConfig, generator: TextGenerator | None) -> TextGenerator:
    """The given generator, else Gemini `config.llm_model` with an in-memory prompt cache (one call per
    distinct prompt). GeminiGenerator raises ConfigError naming the missing API key variable."""
    return generator if generator is not None else cached_gemini(config.llm_model)


def _nli_backend(config: BaselineConfig, generator: TextGenerator | None):
    if config.paraphrase == "none":
        return TemplateParaphraser()
    if config.paraphrase == "offline":
        return OfflineParaphraser(config.seed)
    if config.paraphrase == "hf":
        return HFParaphraser(config.paraphrase_model)
    return LLMParaphraser(_generator(config, generator))


def _qa_backend(config: BaselineConfig, generator: TextGenerator | None):
    if config.qa_converter == "rules":
        return RuleConverter()
    if config.qa_converter == "hf":
        if not config.qa_model:
            raise ConfigError("qa_converter='hf' needs qa_model: a Hugging Face question-converter name or local "
                              "path (REV used domenicrosati/question_converter-3b)")
        return HFQuestionConverter(config.qa_model)
    return LLMQuestionConverter(_generator(config, generator))


def build_baselines(examples: pl.DataFrame, config: BaselineConfig, *, generator: TextGenerator | None = None,
                    progress: bool = True, label_column: str = "label",
                    batch_size: int = BATCH_SIZE) -> pl.DataFrame:
    """The vacuous baseline b of each example: columns id, baseline, baseline_backend, in the examples' order.

    examples: a validated examples frame (one task). label_column: the column holding the label to state,
    'label' (gold) by default; any other column of labels (predicted ones, or one row per candidate label)
    works the same. NLI rows use `config.paraphrase`, QA rows `config.qa_converter`; the 'llm' backends use
    `generator`, or Gemini `config.llm_model` when it is None. Output is deterministic for the offline, rule and
    HF backends (and reproducible for the LLM through a prompt cache).
    """
    if examples.height == 0:
        return pl.DataFrame(schema={c: pl.String for c in BASELINE_COLUMNS})
    if label_column not in examples.columns:
        raise InputError(f"no label column {label_column!r}; the frame has columns {examples.columns}",
                         column=label_column)
    null_label = examples.with_row_index("__row").filter(pl.col(label_column).is_null())
    if not null_label.is_empty():
        raise InputError("null label: a baseline states a label", row=int(null_label["__row"][0]),
                         column=label_column)
    tasks = examples["task"].unique().to_list()
    if len(tasks) != 1:
        raise InputError(f"build baselines for one task at a time, got {sorted(map(str, tasks))}", column="task")
    task = tasks[0]
    labels = examples[label_column].cast(pl.String).to_list()
    convert: Callable[[Sequence[Any]], list[Rewritten]]
    if task == "nli":
        bad = next((i for i, y in enumerate(labels) if y not in RELATIONS), None)
        if bad is not None:
            raise InputError(f"unknown NLI label {labels[bad]!r}; expected one of {list(RELATIONS)}", row=bad,
                             column=label_column)
        items: list[Any] = [NLIItem(p, h, y) for p, h, y in
                            zip(examples["premise"].to_list(), examples["hypothesis"].to_list(), labels, strict=True)]
        convert = _nli_backend(config, generator).paraphrase
    elif task == "qa":
        items = [QAItem(q, y) for q, y in zip(examples["question"].to_list(), labels, strict=True)]
        convert = _qa_backend(config, generator).convert
    else:
        raise InputError(f"unknown task {task!r}", column="task")
    results: list[Rewritten] = []
    starts = range(0, len(items), batch_size)
    for start in progress_bar(starts, desc=f"{task} baselines", enabled=progress, unit="batch"):
        results.extend(convert(items[start:start + batch_size]))
    return pl.DataFrame({"id": examples["id"].cast(pl.String),
                         "baseline": [r.text for r in results],
                         "baseline_backend": [r.backend for r in results]})
