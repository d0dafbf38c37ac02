"""LAREV's environments edited at the label's own text (larev/methods/leakage_aware/label_edits.py): by hand,
wired into phi_LA's instances, and the claim on planted data (phi_LA trained with them gives an answer restated
in r no credit)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from larev.config import TrainConfig
from larev.formats import rationale_input
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.methods.leakage_aware.label_edits import label_edited_environments, swapped_label

ENVS = ["E1", "E2", "E3"]
CHOICES = ["old clock", "watch", "bell"]


def test_environments_are_found_by_name_and_a_new_one_passes_through():
    """A contributor's fourth environment (any name but the label edits' own), anywhere after E1: E2 and E3 are
    still edited by name, the new one is left as it is."""
    b = {"E1": "The thing that chimes is an old clock.", "E5": "Paraphrased: an old clock chimes.",
         "E2": "The thing that chimes is an <mask>.", "E3": "The thing that chimes is an bell."}
    r = "An old clock rings."
    by_position = label_edited_environments(r, "old clock", CHOICES, b, "<mask>", ENVS, "rationale")
    shuffled = label_edited_environments(r, "old clock", CHOICES, b, "<mask>", ["E1", "E5", "E3", "E2"], "rationale")
    assert shuffled == {**by_position, "E5": (r, b["E5"])}
    assert shuffled["E2"] == ("An <mask> rings.", b["E2"]) and shuffled["E3"] == ("An bell rings.", b["E3"])


def test_an_environment_named_like_the_label_edits_one_is_refused():
    from larev.methods.leakage_aware.environments import ENVIRONMENT_NAMES, check_environment_names

    check_environment_names()  # the table as shipped
    with pytest.raises(ValueError, match=r"\['E4'\] taken twice"):
        check_environment_names((*ENVIRONMENT_NAMES, "E4"))
    with pytest.raises(ValueError, match="first environment must be the original"):
        check_environment_names(("E2", "E1", "E3"))
    b = {"E1": "It is an old clock.", "E4": "It is an old clock, again."}
    with pytest.raises(ValueError, match="the environment the label edits add"):
        label_edited_environments("r", "old clock", CHOICES, b, "<mask>", ["E1", "E4"])


def test_label_edits_in_the_rationale_by_hand():
    b = {"E1": "The thing that chimes is an old clock.", "E2": "The thing that chimes is an <mask>.",
         "E3": "The thing that chimes is an bell."}
    r = "Old clocks have chimes, and an old clock rings on the hour."
    out = label_edited_environments(r, "old clock", CHOICES, b, "<mask>", ENVS, "rationale")
    assert out == {"E1": (r, b["E1"]), "E2": ("<mask> have chimes, and an <mask> rings on the hour.", b["E2"]),
                   "E3": ("bell have chimes, and an bell rings on the hour.", b["E3"]),
                   # E4: the choice neither E1 nor E3 names, in r and b
                   "E4": ("watch have chimes, and an watch rings on the hour.", "The thing that chimes is an watch.")}


def test_label_edits_in_the_baseline_finish_what_the_spans_missed():
    # IG's span covered 'clock' only: 'old' stays in E2 / E3 ... and here the whole answer stays in b's E2
    b = {"E1": "An old clock, an old clock.", "E2": "An old clock, an <mask>.", "E3": "An old clock, an watch."}
    out = label_edited_environments("An old clock chimes.", "old clock", CHOICES, b, "<mask>", ENVS,
                                    "rationale_and_baseline")
    assert out["E2"] == ("An <mask> chimes.", "An <mask>, an <mask>.")
    assert out["E3"] == ("An watch chimes.", "An watch, an watch.")
    # only in r, b's environments stay as the spans left them
    assert label_edited_environments("An old clock chimes.", "old clock", CHOICES, b, "<mask>", ENVS,
                                     "rationale")["E2"] == ("An <mask> chimes.", b["E2"])


def test_a_row_without_e3_gets_one_only_when_b_is_edited_too():
    b = {"E1": "It is an old clock.", "E2": "It is an old clock.", "E3": None}  # IG found no span in b
    r = "An old clock chimes."
    assert label_edited_environments(r, "old clock", CHOICES, b, "<mask>", ENVS, "rationale") == {
        "E1": (r, b["E1"]), "E2": ("An <mask> chimes.", "It is an old clock."), "E3": None,
        "E4": ("An bell chimes.", "It is an bell.")}
    both = label_edited_environments(r, "old clock", CHOICES, b, "<mask>", ENVS, "rationale_and_baseline")
    assert both["E2"] == ("An <mask> chimes.", "It is an <mask>.")
    assert both["E3"] == ("An watch chimes.", "It is an watch.")  # the first other choice
    assert both["E4"] == ("An bell chimes.", "It is an bell.")
    # two labels: no third one for E4; a b that does not state its label: no E4
    assert label_edited_environments(r, "old clock", ["old clock", "bell"], b, "<mask>", ENVS)["E4"] is None
    assert label_edited_environments(r, "old clock", CHOICES, {**b, "E1": "It is a thing."}, "<mask>",
                                     ENVS)["E4"] is None
    # a rationale that does not state its label is the same text in every environment
    b["E3"] = "It is an bell."
    assert {r_e for r_e, _ in label_edited_environments("Clocks tick.", "old clock", CHOICES, b, "<mask>", ENVS,
                                                         "rationale").values()} == {"Clocks tick."}
    assert set(label_edited_environments(r, "old clock", CHOICES, b, "<mask>", ENVS, "none").values()) == {
        (r, b["E1"]), (r, b["E2"]), (r, b["E3"]), None}
    with pytest.raises(ValueError, match="mask_token"):
        label_edited_environments("x", "bell", CHOICES, b, "", ENVS)
    with pytest.raises(ValueError, match="label edits"):
        label_edited_environments("x", "bell", CHOICES, b, "<mask>", ENVS, "answer")


def test_swapped_label_is_the_one_b_was_rewritten_to_else_the_first_other():
    assert swapped_label("old clock", CHOICES, "an old clock", "an bell") == "bell"
    # a relation phrase of NLI names no label: the first other label of the set
    assert swapped_label("entailment", ["entailment", "contradiction", "neutral"], "p implies h",
                         "p contradicts h") == "contradiction"
    assert swapped_label("yes", ["yes"], "a", "b") is None


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"task": pl.String, "choices": pl.List(pl.String), "label": pl.String,
                                      "rationale": pl.String, "E1": pl.String, "E2": pl.String, "E3": pl.String})


def test_la_instances_edit_the_label_only_when_asked():
    from larev.methods.leakage_aware.instances import la_env_names, la_instances

    df = _frame([{"task": "qa", "choices": CHOICES, "label": "old clock", "rationale": "an old clock chimes",
                  "E1": "it is an old clock", "E2": "it is an <mask>", "E3": "it is an bell"}])
    edited = la_instances(df, ENVS, label_edits="rationale", mask_token="<mask>")[0]
    assert edited.inputs == (rationale_input("an old clock chimes", "it is an old clock"),
                             rationale_input("an <mask> chimes", "it is an <mask>"),
                             rationale_input("an bell chimes", "it is an bell"),
                             rationale_input("an watch chimes", "it is an watch"))
    assert la_env_names(ENVS, "rationale") == ["E1", "E2", "E3", "E4"] and la_env_names(ENVS, "none") == ENVS
    plain = la_instances(df, ENVS)[0]
    assert len(plain.inputs) == 3 and plain.inputs[2] == rationale_input("an old clock chimes", "it is an bell")
    assert edited.candidates == tuple(CHOICES) and edited.label == "old clock"


COLOURS = ["red", "green", "blue"]
HINT = {"red": "apple", "green": "grass", "blue": "sky"}
WORDS = ["it", "is", "because", "the", "colour", "<mask>", "rationale", "baseline", ":", ".", *HINT.values()]


def _planted_rows(n: int, seed: int) -> list[dict]:
    """QA rows whose b states the answer and whose r restates it half the time, next to a hint word that is right
    80 % of the time."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        y = COLOURS[i % 3]
        other = COLOURS[(i + 1) % 3]
        hint = HINT[y] if rng.random() < 0.8 else HINT[rng.choice(COLOURS)]
        rationale = f"it is {y} because {hint}" if i % 2 == 0 else f"because {hint}"
        rows.append({"task": "qa", "choices": COLOURS, "label": y, "rationale": rationale,
                     "E1": f"the colour is {y}", "E2": "the colour is <mask>", "E3": f"the colour is {other}"})
    return rows


def test_phi_la_with_label_edits_gives_a_restated_answer_no_credit():
    """The claim, on planted data: without the edits phi_LA learns to copy the answer out of r (E2 and E3 only
    hide it in b, and r's answer is always right); with them, r's answer is masked in E2 and swapped with b's in
    E3, so it tells nothing and phi_LA leans on the hint instead. Measured as LAREV reads (the original b) on the
    leaky rationale r = 'it is y' (the answer, no hint): log p(y | r, b) over chance log(1/3)."""
    import math

    from larev.config import ScoreConfig
    from larev.methods.leakage_aware.training import train_leakage_aware
    from larev.models.evaluator import score_labels
    from larev.methods.leakage_aware.instances import la_env_names, la_instances
    from tests.helpers import tiny_evaluator

    train = _frame(_planted_rows(150, seed=0))
    config = TrainConfig(epochs=4, batch_size=4, learning_rate=3e-3)
    # the edits' effect under a fixed objective: the token penalty at weight 1 (the QA default, the label-set
    # penalty at weight 10, keeps this tiny model from learning either way in 4 epochs of 150 rows)
    objective = LeakageAwareConfig(lambda_probe=0.0, lambda_irm=1.0, irm_on="tokens")

    def credit_for_restating(edits: str) -> float:
        phi_la = tiny_evaluator(WORDS + COLOURS, seed=1)
        train_leakage_aware(phi_la, None, la_instances(train, ENVS, label_edits=edits, mask_token="<mask>"),
                            [], [], config, objective, "qa", progress=False,
                            env_names=tuple(la_env_names(ENVS, edits)))
        phi_la.model.eval()
        labels = COLOURS * 10
        inputs = [rationale_input(f"it is {y}", f"the colour is {y}") for y in labels]
        logp = score_labels(phi_la, inputs, labels, [COLOURS] * len(labels), ScoreConfig()).logp
        return float(logp.mean()) - math.log(1 / 3)

    plain, edited = credit_for_restating("none"), credit_for_restating("rationale")
    print(f"log p(y | 'it is y', b) over chance: without edits {plain:.3f}, with {edited:.3f}")
    assert plain > 0.3  # without the edits phi_LA reads the restated answer
    assert edited < plain / 2
