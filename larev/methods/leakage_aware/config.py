"""LAREV's configuration: phi_LA's objective (thesis eq. 4.10), the ablations of thesis table 5.6 and the controls
(`larev`, the thesis's LAREV), and the no-rationale-reference metric's own settings (`larev_vs_empty`).

Settings left unset (None, 'auto') take the values of larev/presets.toml for the run's backbone, task and data,
filled once before the first metric step (larev/presets.py); the core functions below read them concrete.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from larev.config import ModelConfig, TrainConfig, _Config
from larev.leakage.attribution import AttributionConfig
from larev.methods.leakage_aware.antonyms import AntonymConfig
from larev.methods.leakage_aware.counterfactuals import EXCLUSIVE_TERMS
from larev.presets import preset_named, preset_values


def thesis_weights(task: str) -> tuple[float, float]:
    """The thesis's (lambda_irm, lambda_probe) for the task (5.3.3: e-SNLI 25 / 0.005, ECQA 5 / 0.0005), as the
    `thesis-<task>` preset holds them."""
    settings = preset_named(f"thesis-{task}").settings
    return settings["larev.objective.lambda_irm"], settings["larev.objective.lambda_probe"]


class ThesisObjective(_Config):
    """`larev.objective`: the terms of the thesis's phi_LA objective (eq. 4.10). Unset: the preset for the backbone
    and task (larev/presets.toml)."""

    lambda_irm: float | None = Field(None, ge=0, description="IRMv1 weight; unset: the preset (the thesis's 25 / 5 on "
                                                             "hub checkpoints, 1 / 10 on the backbones trained here; "
                                                             "0 on the embedded backbone's real NLI data)")
    lambda_probe: float | None = Field(None, ge=0, description="probe-loss weight; unset: the preset (the thesis's; 0 on "
                                                               "the embedded backbone's real NLI data)")
    warmup_fraction: float = Field(1 / 3, ge=0, le=1, description="both weights ramp up over this share of steps")
    probe_bound: bool = Field(True, description="clip the subtracted probe loss at chance level (log K): a "
                                                "deliberate departure from eq. 4.10, whose subtraction is unbounded "
                                                "(docs/methods.md)")
    irm_on: Literal["auto", "tokens", "label_set"] = Field(
        "auto", description="what the IRM scale multiplies: the decoder's token logits (thesis eq. 4.6) or the "
                            "label-set scores (RORA eq. 8's normalisation); 'auto': the preset")


class ZeroTerms(_Config):
    """The terms that make a no-rationale reading the zero point (larev_vs_empty; docs/methods.md, LAREV step 6)."""

    lambda_borrowed: float | None = Field(
        None, ge=0, description="weight of the borrowed-rationale consistency term: KL(sg p(.|empty, b_e) || "
                                "p(.|r', b_e)) over the label set, r' another training instance's rationale with "
                                "the same label. 0: off. Unset: the preset (2; 4 on minilm-frozen and on the embedded "
                                "backbone's real NLI data)")
    label_statements: float = Field(
        0.5, ge=0, le=1, description="share of the borrowed-rationale rows whose r' states the label and nothing "
                                     "else ('It is {label}.'; instances.LABEL_STATEMENT_TEMPLATES), never the "
                                     "test's `leaky` template")
    baseline_rationales: float = Field(
        0.25, ge=0, le=1, description="share of the borrowed-rationale rows whose r' is the instance's own baseline b "
                                      "(drawn after the label statements)")
    zero_terms_start: float | None = Field(
        None, ge=0, lt=1, description="share of phi_LA's steps on eq. 4.10 alone before the no-rationale rows and the "
                                      "borrowed term ramp in (over warmup_fraction of the steps left); an epoch "
                                      "that ends before both are at full weight is not kept by model selection "
                                      "(unless it is the last). Unset: the preset (0.5; 0.75 on minilm-frozen)")


class LeakageAwareConfig(ThesisObjective, ZeroTerms):
    """phi_LA's training objective as the core trains it: eq. 4.10's terms (ThesisObjective) and, for the
    no-rationale-reference metric, the zero terms (ZeroTerms, the no-rationale instances, counterfactual twins).
    A pipeline run builds it from `LarevConfig.objective_for` or `LarevVsEmptyConfig.objective`, resolved; None /
    'auto' here (a direct caller of the core) read the presets for the backbone on real data (`weights`,
    `irm_target`, `resolved`)."""

    empty_rationales: bool = Field(
        True, description="every instance also trains with no rationale, [empty, b_e] -> y, in one of its "
                          "environments (seeded): the no-rationale reading is then a trained reading; needed by "
                          "lambda_borrowed > 0")
    counterfactual_rationales: float = Field(
        0.0, ge=0, le=1, description="share of the NLI training instances that also train on a counterfactual twin "
                                     "(r's exclusive term swapped, the label flipped; counterfactuals.py) where "
                                     "exclusive terms are given. 0: off")
    lambda_mismatched: float = Field(
        0.0, ge=0, description="weight of the mismatched-rationale term: y from [r_j, b_m], r_j another training "
                               "instance's rationale of another label (objective.py). 0: off")

    @model_validator(mode="after")
    def _borrowed_needs_empty(self) -> "LeakageAwareConfig":
        if (self.lambda_borrowed is None or self.lambda_borrowed > 0) and not self.empty_rationales:
            raise ValueError("lambda_borrowed > 0 (unset: the preset, > 0) needs empty_rationales (the term pulls a "
                             "borrowed rationale's reading to the no-rationale reading); set lambda_borrowed=0 or "
                             "empty_rationales=true")
        return self

    def resolved(self, backbone: str | None = None, task: str = "nli") -> "LeakageAwareConfig":
        """This objective with lambda_borrowed and zero_terms_start made concrete: the value set, else the preset
        for the backbone (the no-rationale-reference metric's)."""
        presets = preset_values(backbone or "", task, "real")
        updates = {k: presets[f"larev_vs_empty.{k}"][0] for k in ("lambda_borrowed", "zero_terms_start")
                   if getattr(self, k) is None}
        return self.model_copy(update=updates)

    def irm_target(self, task: str, backbone: str = "pretrained") -> str:
        """What the IRM scale multiplies, 'tokens' or 'label_set': the value set, else the preset."""
        if self.irm_on != "auto":
            return self.irm_on
        return preset_values(backbone, task, "real")["larev.objective.irm_on"][0]

    def weights(self, task: str, backbone: str = "pretrained") -> tuple[float, float]:
        """(lambda_irm, lambda_probe): the values set, else the presets for the backbone and task."""
        presets = preset_values(backbone, task, "real")
        return (presets["larev.objective.lambda_irm"][0] if self.lambda_irm is None else self.lambda_irm,
                presets["larev.objective.lambda_probe"][0] if self.lambda_probe is None else self.lambda_probe)


# The thesis's objective has none of the zero terms: no no-rationale instances, no borrowed term, no label
# statements, no baselines as rationales, no counterfactual twins.
THESIS_OBJECTIVE = {"empty_rationales": False, "lambda_borrowed": 0.0, "label_statements": 0.0,
                    "baseline_rationales": 0.0, "counterfactual_rationales": 0.0, "zero_terms_start": 0.0}

# The ablations of thesis table 5.6 and the control of training on the environments with no invariance term
# (erm_envs): updates of phi_LA's objective by name. 'thesis' (the thesis's weights for the task, IRM on the tokens)
# is built per task by `LarevConfig.objective_for`.
ABLATIONS: dict[str, dict] = {
    "no_irm": {"lambda_irm": 0.0},
    "no_probe": {"lambda_probe": 0.0},
    "erm_envs": {"lambda_irm": 0.0, "lambda_probe": 0.0},
    "thesis": {},
}

CONTROLS = ("erm_envs", "phi", "r_only")  # LarevConfig.controls, scored as control_NAME (scores.CONTROL_PREFIX)


class LarevConfig(_Config):
    """`larev`: the thesis's LAREV. Its score is eq. 4.4, log p_LA(y | r, b) - log p_base(y | b), phi_LA trained by
    eq. 4.10 on the baseline environments; no option changes that formula."""

    enabled: bool = Field(True, description="train phi_LA and score LAREV next to REV")
    attribution: AttributionConfig = Field(default_factory=AttributionConfig, description="IG leakage terms")
    antonyms: AntonymConfig = Field(default_factory=AntonymConfig, description="how E3 is built")
    objective: ThesisObjective = Field(default_factory=ThesisObjective, description="phi_LA's objective (eq. 4.10)")
    probe_train: TrainConfig = Field(default_factory=lambda: TrainConfig(epochs=3),
                                     description="the leakage probe (decoder only; the thesis trains 8 epochs)")
    la_start: Literal["auto", "fresh", "phi"] = Field(
        "auto", description="phi_LA's starting weights: a fresh model (the backbone's initialisation; the thesis "
                            "fine-tunes the pretrained checkpoint), or REV's trained phi, which already reads "
                            "[r, b]. 'auto': the preset (phi for QA on the backbones trained here, fresh otherwise)")
    la_min_steps: int | None = Field(
        None, ge=0, description="phi_LA trains at least this many optimizer steps: on a small training set its epochs "
                                "grow past la_train.epochs to reach them. 0: exactly la_train.epochs. Unset: the "
                                "preset (0; 400 on the embedded backbone's demo data)")
    label_edits: Literal["auto", "none", "rationale", "rationale_and_baseline"] = Field(
        "auto", description="phi_LA's environments edit the label's own text too (the thesis's future work: "
                            "invariance on r): E2 masks it, E3 swaps it for the label b's E3 names. 'rationale': "
                            "in r; 'rationale_and_baseline': in r and wherever it is left in b after b's spans; "
                            "'none': b's spans only (the thesis). 'auto': the preset (rationale_and_baseline for QA "
                            "on the backbones trained here, none otherwise)")
    la_dropout: float | None = Field(
        None, ge=0.0, lt=1.0, description="dropout of a fresh phi_LA (la_start fresh); a phi_LA started from phi "
                                          "keeps phi's. Unset: the preset, else model.dropout")
    la_train: TrainConfig = Field(default_factory=lambda: TrainConfig(epochs=2, batch_size=16),
                                  description="phi_LA: batch_size counts instances, each with its environments "
                                              "(the thesis: 2 epochs, one instance per step); learning rate unset: "
                                              "the preset, else the run's")
    ablations: list[Literal["no_irm", "no_probe", "erm_envs", "thesis"]] = Field(
        default_factory=list, description="extra phi_LA variants scored as larev_NAME: no_irm (lambda_irm 0), "
                                          "no_probe (lambda_probe 0), erm_envs (both 0), thesis (the thesis's "
                                          "weights for the task); thesis table 5.6")
    lambda_mismatched: float = Field(
        0.0, ge=0, description="the signal that ties a rationale to its instance: weight of the mismatched-rationale "
                               "term, phi_LA trained to this instance's label from [r_j, b], r_j another training "
                               "instance's rationale of another label (every phi_LA of `larev`: its ablations and "
                               "controls too). 0: off. Its scorers then train on borrowed rationales and are not "
                               "judged on them")
    controls: list[Literal["erm_envs", "phi", "r_only"]] = Field(
        default_factory=list, description="controls scored with LAREV's estimator as control_NAME, to read LAREV's "
                                          "numbers against (`larev bench quality --controls`): erm_envs (phi_LA by "
                                          "ERM over the same environments, no IRM, no probe), phi (phi_LA replaced by "
                                          "REV's phi: LAREV's estimator must then give REV's scores), r_only (an "
                                          "evaluator trained on r without b)")

    @field_validator("controls", "ablations")
    @classmethod
    def _no_repeats(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError(f"repeated name in {names}")
        return names

    def objective_for(self, ablation: str | None, task: str) -> LeakageAwareConfig:
        """The core objective of the main phi_LA (None) or of an ablation: eq. 4.10's terms from `objective`
        (resolved), none of the zero terms (THESIS_OBJECTIVE), the ablation's updates; 'thesis' takes the thesis's
        weights for the task with IRM on the tokens."""
        update = dict(ABLATIONS[ablation]) if ablation is not None else {}
        if ablation == "thesis":
            irm, probe = thesis_weights(task)
            update = {"lambda_irm": irm, "lambda_probe": probe, "irm_on": "tokens"}
        return LeakageAwareConfig(**{**self.objective.model_dump(), **THESIS_OBJECTIVE, **update},
                                  lambda_mismatched=self.lambda_mismatched)


class LarevVsEmptyConfig(ZeroTerms):
    """`larev_vs_empty`: the no-rationale-reference metric, log p_LA(y | r, b) - log p_LA(y | empty, b). Its phi_LA
    trains on LAREV's environments with eq. 4.10's terms (`larev.objective`, its own IRM and probe weights where
    set) plus the zero terms (ZeroTerms), so that a rationale that says nothing about the instance scores about 0
    (docs/methods.md). Off unless asked for."""

    enabled: bool = Field(False, description="train its phi_LA and score larev_vs_empty (reads LAREV's environments)")
    lambda_irm: float | None = Field(
        None, ge=0, description="its phi_LA's IRMv1 weight. Unset: the preset, else larev.objective.lambda_irm (each "
                                "metric's weights are decided on its own evidence)")
    lambda_probe: float | None = Field(
        None, ge=0, description="its phi_LA's probe-loss weight. Unset: the preset, else larev.objective.lambda_probe")
    la_min_steps: int | None = Field(
        None, ge=0, description="its phi_LA's minimum optimizer steps. Unset: the preset, else larev.la_min_steps")
    exclusive_terms: Literal["none", "demo"] = Field(
        "none", description="counterfactual twins (r's term swapped for a mutually exclusive one, the label flipped): "
                            "'demo' swaps the demo world's categories, a rule of the demo generator itself, so it "
                            "is a test fixture, never a default; 'none': no twins")
    counterfactual_rationales: float = Field(
        1.0, ge=0, le=1, description="share of the NLI training instances followed by a twin where exclusive_terms "
                                     "names some")

    @model_validator(mode="after")
    def _known_terms(self) -> "LarevVsEmptyConfig":
        if self.exclusive_terms != "none" and self.exclusive_terms not in EXCLUSIVE_TERMS:
            raise ValueError(f"exclusive_terms must be 'none' or one of {sorted(EXCLUSIVE_TERMS)}")
        return self

    def objective(self, larev: LarevConfig) -> LeakageAwareConfig:
        """The core objective: `larev.objective`'s eq. 4.10 terms plus this metric's zero terms."""
        twins = self.counterfactual_rationales if self.exclusive_terms != "none" else 0.0
        weights = {k: v for k in ("lambda_irm", "lambda_probe") if (v := getattr(self, k)) is not None}
        return LeakageAwareConfig(**{**larev.objective.model_dump(), **weights},
                                  **self.model_dump(include=set(ZeroTerms.model_fields)),
                                  empty_rationales=True, counterfactual_rationales=twins)


def la_model_for(model: ModelConfig, la_dropout: float) -> ModelConfig:
    """The model config a fresh phi_LA is built from: `model` with its dropout set to `la_dropout`."""
    return model if la_dropout == model.dropout else model.model_copy(update={"dropout": la_dropout})
