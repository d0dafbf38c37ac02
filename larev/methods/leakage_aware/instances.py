"""phi_LA's training instances: the environment table turned into one [r_e, b_e] input per environment e.

The environment table (environments.py) has one row per (id, environment) with that environment's b; phi_LA trains
on the example's rationale r with each environment's b (thesis eq. 4.10), and its probe term reads the masked b.
With label edits (label_edits.py) the label's own text is edited in r (and b) too, and the instances have one
environment more (`SWAPPED_AGAIN`).

LAREV's zero point (config `definition='new_information'`) adds, per instance, in one of its environments drawn
with a seeded generator: the no-rationale input [empty, b_e] (trained to y like the others) and the borrowed
input [r', b_e], r' the rationale of another instance with the same label (a derangement within each label,
`larev.data.variants.borrowed_from`), which the borrowed-rationale term pulls to the no-rationale reading. With
`label_statements` > 0 that share of the borrowed inputs (seeded) is instead a statement of the label and nothing
else, in one of `LABEL_STATEMENT_TEMPLATES` (never the test's `leaky` template): a rationale that only names the
label says nothing about the instance either. With `baseline_rationales` > 0 that share (drawn after the label
statements, with a generator of its own) is the instance's own original baseline b: r = b says nothing beyond b.

With `counterfactuals` > 0 and exclusive terms, that share of the NLI instances (seeded, a generator of its own)
gets a twin: r with the term tying it to the hypothesis swapped for an exclusive one and the label flipped
(counterfactuals.py), with the same baselines in every environment and no zero rows of its own.

With `mismatched` (the signal that ties a rationale to its instance: objective.py's mismatched-rationale term),
each instance also gets the mismatched input [r_j, b_m], r_j the rationale of another training instance j whose
label differs (`borrowed_from`, same_label False, seeded), in one environment m drawn with a generator of its own;
it is trained to this instance's label y. Such an r argues for another label than the input's, so a reader that
takes r's label words at their word loses on it: what pays is checking r against the input. The donors are the
rows given, which must all be training rows (never validation or test rows).
"""

from __future__ import annotations

import random

import polars as pl

from larev.data.variants import LEAKY_TEMPLATE, borrowed_from
from larev.formats import baseline_input, rationale_input
from larev.methods.leakage_aware.counterfactuals import ExclusiveTerms, counterfactual_rationale
from larev.methods.leakage_aware.environments import MASKED, ORIGINAL, SWAPPED_AGAIN, environment_names
from larev.methods.leakage_aware.label_edits import label_edited_environments
from larev.methods.leakage_aware.training import LAInstance
from larev.schema import label_set

# Statements of the label and nothing else (objective.label_statements): other wordings than the test's `leaky`
# variant (larev.data.variants.LEAKY_TEMPLATE), which stays a template phi_LA never saw.
LABEL_STATEMENT_TEMPLATES = ("It is {label}.", "{label}.", "So the label is {label}.", "This is a case of {label}.",
                             "Clearly {label}.", "The relation: {label}.")
assert LEAKY_TEMPLATE not in LABEL_STATEMENT_TEMPLATES


def environment_frame(examples: pl.DataFrame, environments: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """`examples` joined with one column per environment (its b), and the environment names in table order.
    Examples without environments are dropped."""
    wide = environments.pivot(on="env", index="id", values="baseline")
    return examples.join(wide, on="id", how="inner"), environment_names(environments)


def la_env_names(env_names: list[str], label_edits: str) -> list[str]:
    """phi_LA's environments: the table's, and `SWAPPED_AGAIN` when the label's text is edited."""
    return list(env_names) if label_edits == "none" else [*env_names, SWAPPED_AGAIN]


def la_instances(df: pl.DataFrame, env_names: list[str], label_edits: str = "none",
                 mask_token: str | None = None, *, empty_rationales: bool = False, borrowed: bool = False,
                 label_statements: float = 0.0, baseline_rationales: float = 0.0, counterfactuals: float = 0.0,
                 exclusive_terms: ExclusiveTerms | None = None, mismatched: bool = False,
                 seed: int = 0) -> list[LAInstance]:
    """phi_LA's training instances from an `environment_frame`: [r_e, b_e] for every environment e and the
    probe's input (the masked b). With `label_edits` other than 'none', the label's own text is edited in r (and b)
    like b's spans and the instances have the environments of `la_env_names` (needs `mask_token`).

    empty_rationales: each instance also gets [empty, b_z] in one environment z of those it has (seeded by
    `seed`); borrowed (needs empty_rationales): and [r', b_z], r' the (unedited) rationale of another row of `df`
    with the same label, None for a row whose label no other row has; label_statements: the share of instances
    whose r' is a statement of their label instead (a template of LABEL_STATEMENT_TEMPLATES, drawn with a
    generator of its own, so the other draws do not change); baseline_rationales: the share whose r' is the row's
    original baseline (column ORIGINAL) instead, drawn after the label statements with a generator of its own;
    counterfactuals (needs `exclusive_terms`): the share of instances followed by a counterfactual twin where they
    have one (`counterfactual_rationale`; a generator of its own, one coin per row whatever the share);
    mismatched: each instance's mismatched input (module docstring; every row of `df` must be a training row).
    """
    if borrowed and not empty_rationales:
        raise ValueError("borrowed rationales need the no-rationale instances (empty_rationales)")
    names = la_env_names(env_names, label_edits)
    rng, statements = random.Random(seed), random.Random(f"label-statements-{seed}")
    restated = random.Random(f"baseline-rationales-{seed}")
    twins = random.Random(f"counterfactuals-{seed}")
    if counterfactuals > 0 and exclusive_terms is None:
        raise ValueError("counterfactual rationales need exclusive terms (counterfactuals.EXCLUSIVE_TERMS)")
    donors = borrowed_from(df["label"].to_list(), same_label=True, seed=seed) if borrowed else [None] * df.height
    rationales = df["rationale"].to_list()
    mismatch_donors = mismatched_donors(df, seed) if mismatched else [None] * df.height
    mismatch_env = random.Random(f"mismatched-{seed}")
    out = []
    for i, row in enumerate(df.iter_rows(named=True)):
        candidates = tuple(label_set(row["task"], row["choices"]))
        if label_edits == "none":
            pairs = {e: None if row[e] is None else (row["rationale"], row[e]) for e in env_names}
        else:
            pairs = label_edited_environments(row["rationale"], row["label"], candidates,
                                              {e: row[e] for e in env_names}, mask_token, env_names, label_edits)
        zero = {}
        if empty_rationales:
            z = rng.choice([k for k, e in enumerate(names) if pairs[e] is not None])
            b_z = pairs[names[z]][1]
            r_other = None if donors[i] is None else rationales[donors[i]]
            if borrowed and statements.random() < label_statements:
                r_other = statements.choice(LABEL_STATEMENT_TEMPLATES).format(label=row["label"])
            if borrowed and restated.random() < baseline_rationales and row.get(ORIGINAL) is not None:
                r_other = row[ORIGINAL]
            zero = {"zero_env": z, "empty_input": rationale_input("", b_z),
                    "borrowed_input": None if r_other is None else rationale_input(r_other, b_z)}
        if mismatch_donors[i] is not None:
            m = mismatch_env.choice([k for k, e in enumerate(names) if pairs[e] is not None])
            zero |= {"mismatch_env": m,
                     "mismatched_input": rationale_input(rationales[mismatch_donors[i]], pairs[names[m]][1])}
        probe_input = baseline_input(row[MASKED])
        out.append(LAInstance(inputs=tuple(None if pairs[e] is None else rationale_input(*pairs[e]) for e in names),
                              probe_input=probe_input, label=row["label"], candidates=candidates, **zero))
        if exclusive_terms is not None and twins.random() < counterfactuals and row["task"] == "nli":
            twin = counterfactual_rationale(row["rationale"], row["hypothesis"], row["label"], exclusive_terms, twins)
            if twin is not None:
                out.append(LAInstance(inputs=tuple(None if pairs[e] is None else rationale_input(twin[0], pairs[e][1])
                                                   for e in names),
                                      probe_input=probe_input, label=twin[1], candidates=candidates))
    return out


def mismatched_donors(df: pl.DataFrame, seed: int) -> list[int | None]:
    """For every row of `df`, the row whose rationale its mismatched input reads: another row with another label,
    drawn uniformly (`borrowed_from`, seeded; None where every row has its label). The rows must all be training
    rows (a `split` column saying 'train', when there is one): a mismatched input never reads a validation or test
    rationale."""
    if "split" in df.columns:
        others = df.filter(pl.col("split") != "train")
        if not others.is_empty():
            raise ValueError(f"mismatched rationales are drawn from training rows only; {others.height} row(s) of "
                             f"split(s) {sorted(set(others['split']))} given (first id {others['id'][0]!r})")
    return borrowed_from(df["label"].to_list(), same_label=False, seed=seed)
