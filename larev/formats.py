"""How examples become evaluator inputs and targets: one definition, used by training, scoring and attribution.

REV (paper eq. 5) compares two evaluators: g on the baseline b alone, and g' on the concatenation [r, b].
The reference code formatted training and evaluation inputs differently (LAREV prepended its answer marker twice
at evaluation); here every step calls these functions, so the input a model is scored on is the input it was
trained on.
"""

from __future__ import annotations


def baseline_input(baseline: str) -> str:
    """Input of the baseline evaluator g (phi_base): the vacuous rationale b only."""
    return f"baseline: {baseline.strip()}"


def rationale_input(rationale: str, baseline: str) -> str:
    """Input of the rationale evaluator g' (phi): rationale r followed by the baseline b ([r, b] in REV eq. 5)."""
    return f"rationale: {rationale.strip()} baseline: {baseline.strip()}"


def rationale_only_input(rationale: str) -> str:
    """Input of the `r_only` control evaluator (LAREV's controls): the rationale r without b."""
    return f"rationale: {rationale.strip()}"


def target_text(label: str) -> str:
    """Decoder target: the label's text itself (NLI relation name or the answer string)."""
    return label.strip()


# RORA (paper section 3) reads the task input x itself, not REV's baseline b.


def task_input(task: str, premise: str | None, hypothesis: str | None, question: str | None,
               choices: list[str] | None) -> str:
    """x: NLI's premise and hypothesis, or the question with its answer choices."""
    if task == "nli":
        return f"premise: {(premise or '').strip()} hypothesis: {(hypothesis or '').strip()}"
    text = f"question: {(question or '').strip()}"
    if choices is not None and len(choices) > 0:
        text += " choices: " + " ; ".join(str(c).strip() for c in choices)
    return text


def task_inputs(frame) -> list[str]:
    """x for every row of an examples-shaped (polars) frame: task, premise, hypothesis, question, choices."""
    return [task_input(t, p, h, q, c) for t, p, h, q, c in
            zip(frame["task"], frame["premise"], frame["hypothesis"], frame["question"], frame["choices"])]


def input_only(x: str) -> str:
    """Input of RORA's baseline theta, log p(y | x, empty rationale) (eq. 9), and of RQ / LAS's no-rationale run."""
    return f"input: {x}"


def input_with_rationale(x: str, rationale: str) -> str:
    """Input of RORA's evaluator Phi, log p(y | x, r) (eq. 8/10), and of the RQ / LAS proxy."""
    return f"input: {x} rationale: {rationale.strip()}"


def infill_input(label: str, x: str, masked_rationale: str) -> str:
    """The counterfactual infiller's input y (+) x (+) r with each leaky span replaced by a sentinel (RORA 3.2)."""
    return f"label: {label.strip()} input: {x} rationale: {masked_rationale.strip()}"
