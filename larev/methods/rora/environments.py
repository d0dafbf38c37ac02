"""RORA's environments D^e (paper sections 3.2-3.3): the infiller's training pairs, one counterfactual request per
(example, label e), the rebuilt counterfactual rationales, and Phi's training instances over the environments."""

from __future__ import annotations

import polars as pl

from larev.formats import infill_input, input_with_rationale, task_inputs
from larev.methods.leakage_aware.training import LAInstance
from larev.methods.rora.infill import mask_spans, rebuild, sentinel_target
from larev.schema import label_sets


def infill_examples(frame: pl.DataFrame, spans: list[list[list[int]]], max_spans: int) -> pl.DataFrame:
    """The infiller's training pairs for rows with at least one leaky span: input y (+) x (+) masked r, target
    the spans in sentinel format. `frame` holds the examples' columns and `rationale`."""
    rows = []
    for x, r, y, row_spans in zip(task_inputs(frame), frame["rationale"], frame["label"], spans):
        if not row_spans:
            continue
        masked, originals = mask_spans(r, row_spans, max_spans)
        rows.append({"input": infill_input(y, x, masked), "target": sentinel_target(originals)})
    return pl.DataFrame(rows, schema={"input": pl.String, "target": pl.String})


def counterfactual_requests(frame: pl.DataFrame, spans: list[list[list[int]]],
                            max_spans: int) -> pl.DataFrame:
    """One row per (example, label e of its label set): the masked rationale and the infiller input for e."""
    rows = []
    for i, (x, r, cands, row_spans) in enumerate(zip(task_inputs(frame), frame["rationale"], label_sets(frame),
                                                    spans)):
        masked, originals = mask_spans(r, row_spans or [], max_spans)
        for k, e in enumerate(cands):
            rows.append({"row": i, "env": k, "env_label": e, "masked": masked, "n_spans": len(originals),
                         "input": infill_input(e, x, masked)})
    return pl.DataFrame(rows, schema={"row": pl.Int64, "env": pl.Int64, "env_label": pl.String, "masked": pl.String,
                                      "n_spans": pl.Int64, "input": pl.String})


def rebuild_all(masked: list[str], fills: list[list[str | None]]) -> tuple[list[str], list[int]]:
    """The counterfactual rationales and, per row, how many fills were missing."""
    out = [rebuild(m, f) for m, f in zip(masked, fills)]
    return [t for t, _ in out], [n for _, n in out]


def rora_instances(frame: pl.DataFrame, env_rationales: list[list[str]], n_env: int) -> list[LAInstance]:
    """Phi's training instances: for each example, input_with_rationale(x, r^e) for e = 1..n_env, the gold label.

    A QA example with fewer choices than `n_env` repeats its original rationale in the missing environments.
    """
    out = []
    for x, r, y, cands, envs in zip(task_inputs(frame), frame["rationale"], frame["label"], label_sets(frame),
                                    env_rationales):
        texts = list(envs) + [r] * (n_env - len(envs))
        out.append(LAInstance(inputs=tuple(input_with_rationale(x, t) for t in texts[:n_env]), probe_input="",
                              label=y, candidates=tuple(cands)))
    return out


def environment_names(n_env: int) -> tuple[str, ...]:
    return tuple(f"D{k + 1}" for k in range(n_env))
