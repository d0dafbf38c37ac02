"""phi_LA's training instances: the environment table turned into one [r_e, b_e] input per environment e.

The environment table (environments.py) has one row per (id, environment) with that environment's b; phi_LA trains
on the example's rationale r with each environment's b (thesis eq. 4.10), and its probe term reads the masked b.
With label edits (label_edits.py) the label's own text is edited in r (and b) too, and the instances have one
environment more (`SWAPPED_AGAIN`).
"""

from __future__ import annotations

import polars as pl

from larev.formats import baseline_input, rationale_input
from larev.methods.leakage_aware.environments import MASKED, environment_names
from larev.methods.leakage_aware.label_edits import SWAPPED_AGAIN, label_edited_environments
from larev.methods.leakage_aware.training import LAInstance
from larev.schema import label_set


def environment_frame(examples: pl.DataFrame, environments: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """`examples` joined with one column per environment (its b), and the environment names in table order.
    Examples without environments are dropped."""
    wide = environments.pivot(on="env", index="id", values="baseline")
    return examples.join(wide, on="id", how="inner"), environment_names(environments)


def la_env_names(env_names: list[str], label_edits: str) -> list[str]:
    """phi_LA's environments: the table's, and `SWAPPED_AGAIN` when the label's text is edited."""
    return list(env_names) if label_edits == "none" else [*env_names, SWAPPED_AGAIN]


def la_instances(df: pl.DataFrame, env_names: list[str], label_edits: str = "none",
                 mask_token: str | None = None) -> list[LAInstance]:
    """phi_LA's training instances from an `environment_frame`: [r_e, b_e] for every environment e and the
    probe's input (the masked b). With `label_edits` other than 'none', the label's own text is edited in r (and b)
    like b's spans and the instances have the environments of `la_env_names` (needs `mask_token`)."""
    names = la_env_names(env_names, label_edits)
    out = []
    for row in df.iter_rows(named=True):
        candidates = tuple(label_set(row["task"], row["choices"]))
        if label_edits == "none":
            pairs = {e: None if row[e] is None else (row["rationale"], row[e]) for e in env_names}
        else:
            pairs = label_edited_environments(row["rationale"], row["label"], candidates,
                                              {e: row[e] for e in env_names}, mask_token, env_names, label_edits)
        out.append(LAInstance(inputs=tuple(None if pairs[e] is None else rationale_input(*pairs[e]) for e in names),
                              probe_input=baseline_input(row[MASKED]), label=row["label"], candidates=candidates))
    return out
