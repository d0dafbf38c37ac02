"""LAREV's objective pieces by hand, the probe's gradient path, and a tiny phi_LA / probe training smoke test."""

from __future__ import annotations

import math

import pytest
import torch

from larev.config import TrainConfig
from larev.formats import baseline_input, rationale_input
from larev.methods.leakage_aware.config import LarevConfig, LeakageAwareConfig, ThesisObjective
from larev.methods.leakage_aware.objective import (borrowed_consistency, bounded_probe_loss, freeze, la_objective,
                                                   label_set_nll, probe_from, ramp)
from larev.methods.leakage_aware.training import (LAInstance, probe_label_set_nll, train_leakage_aware,
                                                  step_weights, zero_terms_full_step)
from larev.models.evaluator import pad_batch, tokenize
from larev.models.train import train_evaluator
from tests.helpers import tiny_evaluator

LABELS = ["entailment", "contradiction", "neutral"]
WORDS = ["a", "man", "dog", "sleeps", "runs", "implies", "contradicts", "unrelated", "<mask>", "fruit", "tool",
         "rationale", "baseline", ":", "."]


def test_zero_terms_wait_for_their_start():
    """zero_terms_start=0.5 over 12 steps, warm-up 1/3: the zero terms are 0 for steps 0-5, then ramp over 1/3 of
    the 6 steps left (2 steps): 0, 0.5, 1 at steps 6, 7, 8; the penalties keep the thesis's ramp (full at step 4)."""
    staged = LeakageAwareConfig(zero_terms_start=0.5)
    weights = [step_weights((2.0, 0.1, 1.0, 1.0, 0.5), s, 12, staged) for s in (0, 2, 5, 6, 7, 8, 11)]
    assert [w[2] for w in weights] == pytest.approx([0, 0, 0, 0, 0.5, 1, 1])
    assert [w[3] for w in weights] == [w[2] for w in weights]
    assert [w[0] for w in weights] == pytest.approx([0, 1, 2, 2, 2, 2, 2])
    assert [w[1] for w in weights] == pytest.approx([0, 0.05, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert [w[4] for w in weights] == pytest.approx([0, 0.25, 0.5, 0.5, 0.5, 0.5, 0.5])  # the mismatched term
    assert zero_terms_full_step(12, staged) == 8
    # without a start (the default is 0.5) they ramp with the penalties
    unstaged = LeakageAwareConfig(zero_terms_start=0.0)
    assert step_weights((2.0, 0.1, 1.0, 1.0, 0.0), 2, 12, unstaged) == pytest.approx((1.0, 0.05, 0.5, 0.5, 0.0))
    assert zero_terms_full_step(12, unstaged) == 4
    with pytest.raises(ValueError):
        LeakageAwareConfig(zero_terms_start=1.0)
    # unset (the backbone's default) must be resolved first: a clear error, not a TypeError
    with pytest.raises(ValueError, match="resolve the objective"):
        zero_terms_full_step(12, LeakageAwareConfig())
    assert zero_terms_full_step(12, LeakageAwareConfig().resolved("embedded")) == 8


def test_ramp_and_thesis_defaults():
    assert [ramp(s, total=9, fraction=1 / 3) for s in (0, 1, 2, 3, 8)] == pytest.approx([0, 1 / 3, 2 / 3, 1, 1])
    assert ramp(0, total=9, fraction=0) == 1.0
    # unset weights read the presets: the thesis's for hub checkpoints, 1 (NLI) / 10 (QA) on the backbones trained
    # here; on the embedded backbone's real NLI data, what the validity benchmark's tune split decided (0 / 0)
    assert LeakageAwareConfig().weights("nli") == (25.0, 0.005)
    assert LeakageAwareConfig().weights("qa") == (5.0, 0.0005)
    assert LeakageAwareConfig(lambda_irm=0.0).weights("nli") == (0.0, 0.005)
    assert LeakageAwareConfig().weights("nli", "embedded") == (0.0, 0.0)
    assert LeakageAwareConfig().weights("nli", "minilm-frozen") == (1.0, 0.005)
    assert LeakageAwareConfig().weights("nli", "minilm") == (1.0, 0.005)  # 25 collapsed it on e-SNLI
    assert LeakageAwareConfig().weights("nli", "t5-large") == (25.0, 0.005)
    cfg = LarevConfig(objective=ThesisObjective(lambda_irm=2.0, lambda_probe=0.005, irm_on="label_set"))
    assert cfg.objective_for("thesis", "qa").weights("qa", "embedded") == (5.0, 0.0005)
    assert cfg.objective_for("thesis", "nli").weights("nli", "embedded") == (25.0, 0.005)
    assert cfg.objective_for("no_probe", "nli").weights("nli", "embedded") == (2.0, 0.0)
    assert cfg.objective_for("erm_envs", "nli").weights("nli") == (0.0, 0.0)
    # QA on the small backbones: the penalty on the label-set scores at weight 10; the thesis's tokens elsewhere
    assert LeakageAwareConfig().weights("qa", "embedded") == (10.0, 0.0005)
    assert LeakageAwareConfig().irm_target("qa", "embedded") == "label_set"
    assert LeakageAwareConfig().irm_target("qa", "minilm") == "label_set"
    assert LeakageAwareConfig().irm_target("nli", "embedded") == "tokens"
    assert LeakageAwareConfig().irm_target("qa", "t5-large") == "tokens"
    assert cfg.objective_for("thesis", "qa").irm_target("qa", "embedded") == "tokens"
    assert cfg.objective_for(None, "qa").irm_target("qa", "embedded") == "label_set"  # as set


def test_larev_is_the_thesis_objective_for_every_variant_and_larev_vs_empty_adds_the_zero_terms():
    """`larev` has no option that switches its definition: its phi_LA and every ablation train eq. 4.10 alone (no
    no-rationale rows, no borrowed term, no label statements, no baselines as rationales, no twins). The
    no-rationale-reference metric is a section of its own, off by default, whose objective is larev's eq. 4.10
    terms plus its zero terms; its counterfactual twins act only with exclusive terms named."""
    from larev.methods.leakage_aware.config import ABLATIONS, LarevVsEmptyConfig

    assert "definition" not in LarevConfig.model_fields and "exclusive_terms" not in LarevConfig.model_fields
    thesis = ThesisObjective(lambda_irm=1.0, lambda_probe=0.005, irm_on="tokens")
    larev = LarevConfig(objective=thesis)
    for ablation in (None, *ABLATIONS):
        objective = larev.objective_for(ablation, "nli")
        assert not objective.empty_rationales and objective.lambda_borrowed == 0.0
        assert objective.label_statements == objective.baseline_rationales == 0.0
        assert objective.counterfactual_rationales == 0.0 and objective.zero_terms_start == 0.0
    assert larev.objective_for(None, "nli").model_dump(include=set(ThesisObjective.model_fields)) == \
        thesis.model_dump()
    assert LarevVsEmptyConfig().enabled is False and LarevVsEmptyConfig().exclusive_terms == "none"
    own = LarevVsEmptyConfig(lambda_borrowed=2.0, zero_terms_start=0.5)
    objective = own.objective(larev)
    assert objective.empty_rationales and objective.lambda_borrowed == 2.0 and objective.zero_terms_start == 0.5
    assert (objective.label_statements, objective.baseline_rationales) == (0.5, 0.25)
    assert objective.counterfactual_rationales == 0.0  # no exclusive terms: no twins
    assert (objective.lambda_irm, objective.lambda_probe, objective.irm_on) == (1.0, 0.005, "tokens")
    # its own IRM and probe weights, where set, replace larev's in its objective (and only there)
    pinned = LarevVsEmptyConfig(lambda_borrowed=2.0, zero_terms_start=0.5, lambda_irm=3.0, lambda_probe=0.0)
    assert (pinned.objective(larev).lambda_irm, pinned.objective(larev).lambda_probe) == (3.0, 0.0)
    assert pinned.objective(larev).irm_on == "tokens" and larev.objective.lambda_irm == 1.0
    twins = LarevVsEmptyConfig(lambda_borrowed=2.0, zero_terms_start=0.5, exclusive_terms="demo")
    assert twins.objective(larev).counterfactual_rationales == 1.0
    with pytest.raises(ValueError, match="needs empty_rationales"):
        LeakageAwareConfig(empty_rationales=False)  # the borrowed term (unset: > 0) pulls toward the empty reading
    assert LeakageAwareConfig(empty_rationales=False, lambda_borrowed=0.0).lambda_borrowed == 0.0


def test_a_core_objective_left_unset_reads_the_zero_terms_preset_of_its_backbone():
    assert LeakageAwareConfig().lambda_borrowed is None  # unresolved until the backbone is known
    frozen = LeakageAwareConfig().resolved("minilm-frozen")
    assert (frozen.lambda_borrowed, frozen.zero_terms_start) == (4.0, 0.75)
    assert frozen.resolved("embedded") == frozen  # a set value is kept
    other = LeakageAwareConfig().resolved("minilm")
    assert (other.lambda_borrowed, other.zero_terms_start) == (2.0, 0.5)
    decided = LeakageAwareConfig().resolved("embedded")  # the validity benchmark's tune split (NLI, real data)
    assert (decided.lambda_borrowed, decided.zero_terms_start) == (4.0, 0.5)
    kept = LeakageAwareConfig(lambda_borrowed=1.5).resolved("minilm-frozen")
    assert (kept.lambda_borrowed, kept.zero_terms_start) == (1.5, 0.75)  # only the unset one resolves


def test_objective_by_hand_and_probe_bound():
    erm = [torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0)]
    irm = [torch.tensor(0.1), torch.tensor(0.2), torch.tensor(0.3)]
    # mean ERM 2.0 + 10 * 0.6 - 0.5 * 0.4 = 7.8
    assert la_objective(erm, irm, torch.tensor(0.4), 10.0, 0.5).item() == pytest.approx(7.8)
    # label-set NLL by hand: softmax of log(0.5, 0.25, 0.25) is (0.5, 0.25, 0.25); a 2-label row padded with -inf
    scores = torch.tensor([[math.log(0.5), math.log(0.25), math.log(0.25)], [0.0, 0.0, -math.inf]])
    nll = label_set_nll(scores, torch.tensor([0, 1]))
    assert nll.tolist() == pytest.approx([math.log(2), math.log(2)])
    # per row min(NLL_i, log K_i), averaged: (min(5, log 3) + min(0.5, log 5)) / 2
    rows = torch.tensor([5.0, 0.5], requires_grad=True)
    bounded = bounded_probe_loss(rows, torch.tensor([3, 5]))
    assert bounded.item() == pytest.approx((math.log(3) + 0.5) / 2)
    bounded.backward()
    assert rows.grad.tolist() == [0.0, 0.5]  # beyond chance level the subtracted term gives no more reward
    assert bounded_probe_loss(torch.tensor([5.0]), 3, bound=False).item() == 5.0


def test_borrowed_consistency_by_hand_and_its_target_gets_no_gradient():
    """L_borrowed = mean_i KL(sg p_empty,i || p_borrowed,i) over each row's label set. Row 1: p_empty (0.25, 0.5,
    0.25), p_borrowed (0.5, 0.25, 0.25): 0.25 ln(0.5) + 0.5 ln(2) + 0 = 0.25 ln 2. Row 2, two labels (padded with
    -inf), equal distributions: 0. Mean: ln(2) / 8."""
    borrowed = torch.tensor([[math.log(0.5), math.log(0.25), math.log(0.25)], [1.0, 1.0, -math.inf]],
                            requires_grad=True)
    empty = torch.tensor([[math.log(0.25), math.log(0.5), math.log(0.25)], [3.0, 3.0, -math.inf]],
                         requires_grad=True)
    loss = borrowed_consistency(borrowed, empty)
    assert loss.item() == pytest.approx(math.log(2) / 8)
    loss.backward()
    assert empty.grad is None  # the no-rationale reading is the target, not pulled toward the borrowed one
    assert borrowed.grad[0].abs().sum() > 0 and borrowed.grad[1].abs().sum() == 0
    assert borrowed_consistency(torch.zeros(0, 3), torch.zeros(0, 3)).item() == 0.0
    # la_objective adds it with its weight: 2.0 + 0 - 0 + 3 * 0.5
    one = [torch.tensor(2.0)]
    assert la_objective(one, [torch.tensor(0.0)], torch.tensor(0.0), 1.0, 1.0, torch.tensor(0.5), 3.0).item() == 3.5


def test_la_instances_add_a_no_rationale_and_a_borrowed_row_in_one_environment():
    import polars as pl

    from larev.methods.leakage_aware.instances import la_instances

    labels = ["entailment", "entailment", "entailment", "neutral", "neutral", "contradiction"]
    df = pl.DataFrame({"id": [f"i{k}" for k in range(6)], "task": "nli", "choices": [None] * 6, "label": labels,
                       "rationale": [f"r{k}" for k in range(6)], "E1": [f"b{k}" for k in range(6)],
                       "E2": [f"m{k}" for k in range(6)], "E3": [None, *[f"a{k}" for k in range(1, 6)]]},
                      schema_overrides={"choices": pl.List(pl.String)})
    plain = la_instances(df, ["E1", "E2", "E3"])
    assert all(x.zero_env is None and x.empty_input is None and x.borrowed_input is None for x in plain)
    rows = la_instances(df, ["E1", "E2", "E3"], empty_rationales=True, borrowed=True, seed=3)
    assert [x.inputs for x in rows] == [x.inputs for x in plain]  # the own rows are unchanged
    for k, x in enumerate(rows):
        assert x.inputs[x.zero_env] is not None  # an environment the row has (row 0 lacks E3)
        b_z = df[["E1", "E2", "E3"][x.zero_env]][k]
        assert x.empty_input == rationale_input("", b_z)
        if labels[k] == "contradiction":  # the only row of its label: nobody to borrow from
            assert x.borrowed_input is None
            continue
        donor = int(x.borrowed_input.split("rationale: r")[1][0])
        assert donor != k and labels[donor] == labels[k] and x.borrowed_input == rationale_input(f"r{donor}", b_z)
    assert rows[0].zero_env in (0, 1)
    with pytest.raises(ValueError, match="need the no-rationale"):
        la_instances(df, ["E1", "E2", "E3"], borrowed=True)
    # label statements replace a seeded share of the borrowed rationales; every other draw stays as it was
    from larev.methods.leakage_aware.instances import LABEL_STATEMENT_TEMPLATES

    mixed = la_instances(df, ["E1", "E2", "E3"], empty_rationales=True, borrowed=True, label_statements=0.5, seed=3)
    assert [(x.inputs, x.zero_env, x.empty_input) for x in mixed] == [(x.inputs, x.zero_env, x.empty_input)
                                                                      for x in rows]
    said = {t.format(label=lab) for t in LABEL_STATEMENT_TEMPLATES for lab in labels}
    kinds = []
    for k, (x, y) in enumerate(zip(mixed, rows)):
        r_other = x.borrowed_input.split("rationale: ")[1].split(" baseline:")[0]
        kinds.append("statement" if r_other in said else "borrowed")
        assert r_other in said and labels[k] in r_other or x.borrowed_input == y.borrowed_input
        assert "The answer is" not in r_other  # never the test's `leaky` template
    assert set(kinds) == {"statement", "borrowed"}
    everything = la_instances(df, ["E1", "E2", "E3"], empty_rationales=True, borrowed=True, label_statements=1.0)
    assert all(x.borrowed_input.split("rationale: ")[1].split(" baseline:")[0] in said for x in everything)
    # the row's own original baseline as r' (r = b): a seeded share, drawn after the label statements, with every
    # other draw as it was; a row without a donor gets one too (its b is its own)
    restated = la_instances(df, ["E1", "E2", "E3"], empty_rationales=True, borrowed=True, label_statements=0.5,
                            baseline_rationales=0.5, seed=3)
    assert [(x.inputs, x.zero_env, x.empty_input) for x in restated] == [(x.inputs, x.zero_env, x.empty_input)
                                                                         for x in rows]
    own = [k for k, x in enumerate(restated)
           if x.borrowed_input == rationale_input(f"b{k}", df[["E1", "E2", "E3"][x.zero_env]][k])]
    assert 0 < len(own) < df.height
    assert all(restated[k].borrowed_input == mixed[k].borrowed_input for k in range(df.height) if k not in own)
    only_b = la_instances(df, ["E1", "E2", "E3"], empty_rationales=True, borrowed=True, baseline_rationales=1.0)
    assert [x.borrowed_input.split("rationale: ")[1].split(" baseline:")[0] for x in only_b] == df["E1"].to_list()


def test_probe_bound_removes_the_reward_for_a_probe_pushed_below_chance():
    """A probe made confidently wrong (trained on shifted labels) has a label-set NLL above log K on every row; the
    bounded term is then exactly log K and sends no gradient into phi_LA's encoder, while the unbounded one does."""
    phi_la = tiny_evaluator(WORDS + LABELS, seed=1)
    psi = probe_from(phi_la)  # same encoder as phi_LA now, so the probe reads what it was trained on
    inputs = [baseline_input(f"a man <mask> a dog {w}") for w in ("sleeps", "runs", "fruit")]
    wrong = {y: LABELS[(i + 1) % 3] for i, y in enumerate(LABELS)}
    train_evaluator(psi, inputs * 8, [wrong[y] for y in LABELS] * 8, [], [], [],
                    TrainConfig(epochs=30, batch_size=8, learning_rate=1e-2), progress=False,
                    keep_eval=[psi.model.get_encoder()])
    freeze([psi.model])
    rows = [LAInstance(inputs=(x,), probe_input=x, label=y, candidates=tuple(LABELS)) for x, y in zip(inputs, LABELS)]
    ids, mask = pad_batch(tokenize(phi_la.tokenizer, inputs, 32, phi_la.eos_id)[0], phi_la.pad_id)
    cand = {c: tokenize(phi_la.tokenizer, [c], 8, phi_la.eos_id)[0][0] for c in LABELS}

    def encoder_grad(bound: bool) -> float:
        phi_la.model.zero_grad(set_to_none=True)
        hidden = phi_la.model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        nll = probe_label_set_nll(psi.model, hidden, mask, rows, cand, phi_la.pad_id)
        term = bounded_probe_loss(nll, 3, bound=bound)
        (-term).backward()
        return nll, term, sum(p.grad.abs().sum().item() for n, p in phi_la.model.named_parameters()
                              if n.startswith("encoder.") and p.grad is not None)

    nll, term, grad = encoder_grad(bound=True)
    assert nll.min().item() > math.log(3)  # below chance on every row: the precondition of the claim
    assert term.item() == pytest.approx(math.log(3)) and grad == 0.0
    _, unbounded, grad = encoder_grad(bound=False)
    assert unbounded.item() > math.log(3) and grad > 0


def test_probe_gradient_reaches_phi_la_encoder_only():
    phi = tiny_evaluator(WORDS + LABELS, seed=0)
    psi = probe_from(phi)
    freeze([psi.model])  # as during phi_LA training: the trained probe is fixed
    phi_la = tiny_evaluator(WORDS + LABELS, seed=1)
    rows, _ = tokenize(phi_la.tokenizer, [baseline_input("a man <mask> a dog sleeps")] * 2, 32, phi_la.eos_id)
    ids, mask = pad_batch(rows, phi_la.pad_id)
    hidden = phi_la.model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
    rows = [LAInstance(inputs=("",), probe_input="", label=y, candidates=tuple(LABELS))
            for y in ("neutral", "entailment")]
    cand = {c: tokenize(phi_la.tokenizer, [c], 8, phi_la.eos_id)[0][0] for c in LABELS}
    (-0.5 * probe_label_set_nll(psi.model, hidden, mask, rows, cand, phi_la.pad_id).mean()).backward()
    encoder_grads = [p.grad for n, p in phi_la.model.named_parameters() if n.startswith("encoder.")]
    assert encoder_grads and all(g is not None and g.abs().sum() > 0 for g in encoder_grads)
    decoder_grads = [p.grad for n, p in phi_la.model.named_parameters() if n.startswith("decoder.")]
    assert all(g is None for g in decoder_grads)
    assert all(p.grad is None and not p.requires_grad for p in psi.model.parameters())


def test_probe_training_moves_the_decoder_only():
    phi = tiny_evaluator(WORDS + LABELS, seed=0)
    psi = probe_from(phi)
    before = {n: p.clone() for n, p in psi.model.named_parameters()}
    inputs = [baseline_input(f"a man <mask> a dog {w}") for w in ("sleeps", "runs", "fruit")] * 8
    labels = LABELS * 8
    train_evaluator(psi, inputs, labels, [], [], [], TrainConfig(epochs=1, batch_size=8), progress=False,
                    keep_eval=[psi.model.get_encoder()])
    changed = {n for n, p in psi.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(n.startswith("decoder.") for n in changed)


def test_phi_la_training_smoke():
    phi = tiny_evaluator(WORDS + LABELS, seed=0)
    psi = probe_from(phi)
    phi_la = tiny_evaluator(WORDS + LABELS, seed=2)
    before = {n: p.clone() for n, p in phi_la.model.named_parameters()}
    cue = {"entailment": "implies", "contradiction": "contradicts", "neutral": "unrelated"}
    anti = {"entailment": "contradicts", "contradiction": "implies", "neutral": "implies"}
    data = [LAInstance(inputs=tuple(rationale_input(f"a {w}", f"a man {t} a dog") for t in (cue[y], "<mask>", anti[y])),
                       probe_input=baseline_input("a man <mask> a dog"), label=y,
                       candidates=tuple(LABELS))
            for y, w in zip(LABELS * 6, ["fruit", "tool", "dog"] * 6)]
    thesis_terms = LeakageAwareConfig(lambda_irm=1.0, lambda_probe=0.005)  # the IRM and probe terms both on
    result = train_leakage_aware(phi_la, psi, data[:15], data[15:], [LABELS] * 3,
                                 TrainConfig(epochs=2, batch_size=4, learning_rate=3e-3), thesis_terms,
                                 "nli", progress=False, log_every=2)
    assert len(result.history) == 2
    mean_val = [sum(h[f"val_logp_{e}"] for e in ("E1", "E2", "E3")) / 3 for h in result.history]
    assert result.best_epoch == 1 + mean_val.index(max(mean_val))  # selection by mean validation log p over envs
    assert {"erm", "irm", "probe", "val_logp_E1", "val_logp_E2", "val_logp_E3"} <= set(result.history[0])
    assert result.trace[0].w_irm < result.trace[-1].w_irm == 1.0  # warm-up reached the weight set
    assert all(not torch.equal(p, before[n]) for n, p in phi_la.model.named_parameters())
    assert phi_la.meta["objective"]["effective_weights"] == {"lambda_irm": 1.0, "lambda_probe": 0.005,
                                                             "lambda_borrowed": 0.0,  # no borrowed rows here
                                                             "lambda_mismatched": 0.0}


def test_phi_la_trains_the_no_rationale_rows_and_the_borrowed_term_after_the_warm_up():
    """With no-rationale and borrowed rows and no staged start: both terms are computed on every step, their
    weights ramp up with the penalties' (0 at the first step, 1 from the warm-up's end), and validation reports
    the no-rationale and borrowed readings beside the environments."""
    phi_la = tiny_evaluator(WORDS + LABELS, seed=2)
    psi = probe_from(tiny_evaluator(WORDS + LABELS, seed=0))
    cue = {"entailment": "implies", "contradiction": "contradicts", "neutral": "unrelated"}
    data = [LAInstance(inputs=tuple(rationale_input(f"a {w}", f"a man {t} a dog") for t in (cue[y], "<mask>")),
                       probe_input=baseline_input("a man <mask> a dog"), label=y, candidates=tuple(LABELS),
                       zero_env=k % 2, empty_input=rationale_input("", "a man <mask> a dog"),
                       borrowed_input=rationale_input("a tool", "a man <mask> a dog"))
            for k, (y, w) in enumerate(zip(LABELS * 6, ["fruit", "tool", "dog"] * 6))]
    unstaged = LeakageAwareConfig(zero_terms_start=0.0, lambda_borrowed=1.0)  # the terms ramp with the penalties
    result = train_leakage_aware(phi_la, psi, data[:15], data[15:], [LABELS] * 3,
                                 TrainConfig(epochs=2, batch_size=4), unstaged, "nli", progress=False,
                                 log_every=1, env_names=("E1", "E2"))
    assert result.trace[0].w_borrowed == 0 and result.trace[0].borrowed is None  # weight 0: not computed
    assert all(t.borrowed is not None and t.borrowed >= 0 and t.empty is not None for t in result.trace[1:])
    assert result.trace[0].w_empty < result.trace[-1].w_empty == 1.0
    assert result.trace[0].w_borrowed < result.trace[-1].w_borrowed == 1.0
    assert {"borrowed", "empty", "val_logp_empty", "val_logp_borrowed"} <= set(result.history[0])
    assert phi_la.meta["objective"]["effective_weights"]["lambda_borrowed"] == 1.0


def test_staged_zero_terms_start_after_the_first_epoch_and_it_is_not_kept():
    """zero_terms_start=0.5 over 2 epochs: the first epoch computes no zero rows (trace: None), the second ramps
    them in; the first epoch, which never trained the no-rationale reading, is not a candidate for the kept model
    even where its validation score is the better one."""
    phi_la = tiny_evaluator(WORDS + LABELS, seed=2)
    psi = probe_from(tiny_evaluator(WORDS + LABELS, seed=0))
    data = [LAInstance(inputs=(rationale_input(f"a {w}", "a man <mask> a dog"),), probe_input=baseline_input("a man"),
                       label=y, candidates=tuple(LABELS), zero_env=0,
                       empty_input=rationale_input("", "a man <mask> a dog"),
                       borrowed_input=rationale_input("a tool", "a man <mask> a dog"))
            for y, w in zip(LABELS * 6, ["fruit", "tool", "dog"] * 6)]
    result = train_leakage_aware(phi_la, psi, data[:16], data[16:], [LABELS] * 2,
                                 TrainConfig(epochs=2, batch_size=4), LeakageAwareConfig(zero_terms_start=0.5), "nli",
                                 progress=False, log_every=1, env_names=("E1",))
    first, second = ([t for t in result.trace if t.epoch == e] for e in (1, 2))
    assert all(t.empty is None and t.borrowed is None and t.w_empty == 0 for t in first)
    assert second[0].empty is None and second[0].w_empty == 0  # the ramp's first step: weight 0, not computed
    assert all(t.empty is not None and t.borrowed is not None for t in second[1:]) and second[-1].w_empty == 1.0
    # the premise: epoch 1 validates better (selection score: mean validation log p over the environments)
    assert result.history[0]["val_logp_E1"] > result.history[1]["val_logp_E1"]
    assert result.best_epoch == 2


def test_label_set_scores_match_scoring_and_train():
    from larev.config import ScoreConfig
    from larev.methods.leakage_aware.training import label_set_scores
    from larev.models.evaluator import score_labels

    ev = tiny_evaluator(WORDS + LABELS + ["yes", "no"], seed=4)
    ev.model.eval()
    rows = [LAInstance(inputs=("",) * 3, probe_input="", label=y, candidates=c)
            for y, c in (("neutral", tuple(LABELS)), ("no", ("yes", "no")))]
    texts = [rationale_input("a fruit", "a man implies a dog"), rationale_input("a tool", "a dog runs")]
    ids, mask = pad_batch(tokenize(ev.tokenizer, texts, 32, ev.eos_id)[0], ev.pad_id)
    cand_tokens = {c: tokenize(ev.tokenizer, [c], 8, ev.eos_id)[0][0] for x in rows for c in x.candidates}
    with torch.no_grad():
        hidden = ev.model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        scores, target = label_set_scores(ev.model, hidden, mask, rows, cand_tokens, ev.pad_id)
    assert scores.shape == (2, 3) and scores[1, 2] == -math.inf and target.tolist() == [2, 1]
    expected = score_labels(ev, texts, ["neutral", "no"], [list(x.candidates) for x in rows],
                            ScoreConfig(normalisation="sum")).logp
    assert scores.gather(1, target[:, None]).squeeze(1).tolist() == pytest.approx(expected.tolist(), abs=1e-5)


def test_phi_la_trains_with_label_set_irm():
    phi_la = tiny_evaluator(WORDS + LABELS, seed=2)
    psi = probe_from(tiny_evaluator(WORDS + LABELS, seed=0))
    before = {n: p.clone() for n, p in phi_la.model.named_parameters()}
    data = [LAInstance(inputs=(rationale_input("a fruit", "a man implies a dog"),) * 3,
                       probe_input=baseline_input("a man <mask> a dog"), label=y, candidates=tuple(LABELS))
            for y in LABELS * 4]
    result = train_leakage_aware(phi_la, psi, data, [], [], TrainConfig(epochs=1, batch_size=4),
                                 LeakageAwareConfig(irm_on="label_set"), "nli", progress=False, log_every=1)
    assert all(t.irm >= 0 for t in result.trace) and any(t.irm > 0 for t in result.trace)
    assert any(not torch.equal(p, before[n]) for n, p in phi_la.model.named_parameters())


def test_phi_la_relies_less_on_the_leakage_span_than_phi_and_so_does_erm_over_the_environments():
    """The claim of LAREV, on planted data: b states the label with a cue word, the rationale names it with a
    word that is right 80 % of the time. phi (trained on [r, b]) reads the cue; phi_LA (trained on the three
    environments with the IRM and probe terms) takes less of its label from it: smaller
    log p(y | no rationale, b) - log p(y | no rationale, masked b).

    The control (issue 33): phi_LA by plain ERM over the same environments relies less too; the environments (the
    cue masked in E2, swapped in E3) do that work. Whether the IRM and probe terms add to it is not settled at
    this size: measured over four data / initialisation seeds (0-3), reliance phi_LA 0.743 / 0.026 / -0.034 /
    0.152 against ERM 0.143 / 0.543 / 0.726 / 0.424 nats (phi 3.4 / 2.3 / 2.7 / 3.8), lower in three of four, so
    this test asserts only what every seed showed."""
    import random

    from larev.methods.leakage_aware.reliance import leakage_reliance

    rng = random.Random(0)
    cue = {"entailment": "implies", "contradiction": "contradicts", "neutral": "unrelated"}
    anti = {"entailment": "contradicts", "contradiction": "unrelated", "neutral": "implies"}
    hint = {"entailment": "fruit", "contradiction": "tool", "neutral": "sleeps"}
    rows = []
    for i in range(180):
        y = LABELS[i % 3]
        word = hint[y] if rng.random() < 0.8 else hint[rng.choice(LABELS)]
        subject = rng.choice(["man", "dog"])
        rows.append((y, f"a {word}", f"a {subject} {cue[y]} a dog", f"a {subject} <mask> a dog",
                     f"a {subject} {anti[y]} a dog"))
    train, test = rows[:150], rows[150:]
    config = TrainConfig(epochs=4, batch_size=8, learning_rate=3e-3)
    phi = tiny_evaluator(WORDS + LABELS, seed=0)
    train_evaluator(phi, [rationale_input(r, b) for _, r, b, _, _ in train], [y for y, *_ in train], [], [], [],
                    config, progress=False)
    psi = probe_from(phi)
    train_evaluator(psi, [baseline_input(m) for _, _, _, m, _ in train], [y for y, *_ in train], [], [], [],
                    config, progress=False, keep_eval=[psi.model.get_encoder()])
    data = [LAInstance(inputs=tuple(rationale_input(r, e) for e in (b, m, a)), probe_input=baseline_input(m),
                       label=y, candidates=tuple(LABELS)) for y, r, b, m, a in train]
    args = ([b for _, _, b, _, _ in test], [m for _, _, _, m, _ in test], [y for y, *_ in test],
            [LABELS] * len(test))

    def trained_phi_la(objective: LeakageAwareConfig):
        model = tiny_evaluator(WORDS + LABELS, seed=1)
        train_leakage_aware(model, psi, data, [], [], config.model_copy(update={"batch_size": 4}), objective, "nli",
                            progress=False)
        return model

    phi_reliance = leakage_reliance(phi, *args)
    phi_la_reliance = leakage_reliance(trained_phi_la(LeakageAwareConfig()), *args)
    # the control: the same environments, same start, no IRM and no probe term
    erm_reliance = leakage_reliance(trained_phi_la(LeakageAwareConfig(lambda_irm=0.0, lambda_probe=0.0)), *args)
    assert phi_reliance > 0.3  # phi reads the cue
    assert phi_la_reliance < phi_reliance / 2
    assert erm_reliance < phi_reliance / 2


def test_phi_la_epochs_grow_to_the_minimum_steps_on_small_data():
    from larev.methods.leakage_aware.training import epochs_for_min_steps

    two = TrainConfig(epochs=2, batch_size=16)
    assert epochs_for_min_steps(two, 1600, 400).epochs == 4  # 100 steps an epoch: the demo
    assert epochs_for_min_steps(two, 1601, 400).epochs == 4  # 101 steps an epoch: 4 epochs reach 404
    assert epochs_for_min_steps(two, 7200, 400).epochs == 2  # 450 steps an epoch: e-SNLI keeps the thesis's 2
    assert epochs_for_min_steps(two, 1600, 0).epochs == 2
    assert epochs_for_min_steps(TrainConfig(epochs=5, batch_size=16), 1600, 400).epochs == 5  # never fewer
    assert epochs_for_min_steps(two, 10, 400).epochs == 400  # one step an epoch


# the planted test's objective: eq. 4.10's IRM and probe terms at 1 / 0.005, the borrowed term at 2 from half-way,
# the label statements and baselines as rationales at their defaults
PLANTED_OBJECTIVE = LeakageAwareConfig(lambda_irm=1.0, lambda_probe=0.005, lambda_borrowed=2.0, zero_terms_start=0.5)


def planted_phrasing_scores(seed: int = 0, objective: LeakageAwareConfig = PLANTED_OBJECTIVE,
                            ) -> dict[str, dict[str, float]]:
    """Mean LAREV scores (`new_information`, phi_LA trained on `objective`) of gold, borrowed and
    empty test rationales on planted data, for phi_LA and for the erm_envs control (the same objective with IRM,
    the probe, the borrowed term and the label statements off; `seed` draws the data and initialises the models).
    b's relation word carries the label, and so does r's phrasing (a hint word per label); r also names the
    instance's subject, which b names too. A borrowed rationale (another instance's, same label) has the label's
    phrasing and another subject: it says nothing about this instance."""
    import random

    import polars as pl

    from larev.config import ScoreConfig
    from larev.data.variants import borrowed_from
    from larev.methods.leakage_aware.instances import la_instances
    from larev.metrics.rev import score_rev

    subjects = ["man", "dog", "cat", "boy", "girl", "bird", "cow", "fox"]
    cue = {"entailment": "implies", "contradiction": "contradicts", "neutral": "unrelated"}
    anti = {"entailment": "contradicts", "contradiction": "unrelated", "neutral": "implies"}
    hint = {"entailment": "fruit", "contradiction": "tool", "neutral": "sleeps"}
    rng = random.Random(seed)
    rows = []
    for i in range(540):
        y, s = LABELS[i % 3], rng.choice(subjects)
        rows.append({"id": f"p{i}", "task": "nli", "choices": None, "label": y, "rationale": f"{s} {hint[y]}",
                     "E1": f"a {s} {cue[y]} a ball", "E2": f"a {s} <mask> a ball", "E3": f"a {s} {anti[y]} a ball"})
    frame = pl.DataFrame(rows, schema_overrides={"choices": pl.List(pl.String)})
    train, test = frame[:480], frame[480:]
    words = [*subjects, *cue.values(), *hint.values(), "a", "ball", "<mask>", "rationale", "baseline", ":"]
    config = TrainConfig(epochs=10, batch_size=8, learning_rate=3e-3, seed=seed)
    phi = tiny_evaluator(words + LABELS, seed=seed)
    train_evaluator(phi, [rationale_input(r, b) for r, b in zip(train["rationale"], train["E1"])],
                    train["label"].to_list(), [], [], [], config, progress=False)
    psi = probe_from(phi)
    train_evaluator(psi, [baseline_input(m) for m in train["E2"]], train["label"].to_list(), [], [], [], config,
                    progress=False, keep_eval=[psi.model.get_encoder()])
    donors = borrowed_from(test["label"].to_list(), same_label=True, seed=seed + 1)
    golds = test["rationale"].to_list()
    rationales = pl.concat([test.select("id", pl.lit(source).alias("source"), pl.Series("rationale", texts), "label")
                            for source, texts in (("gold", golds), ("borrowed", [golds[d] for d in donors]),
                                                  ("empty", [""] * test.height))])
    baselines = test.select("id", "label", pl.col("E1").alias("baseline"))

    def scores(objective: LeakageAwareConfig) -> dict[str, float]:
        objective = objective.resolved()  # unset zero-term settings: the general defaults (not minilm-frozen's)
        instances = la_instances(train, ["E1", "E2", "E3"], empty_rationales=True, borrowed=True,
                                 label_statements=objective.label_statements if objective.lambda_borrowed else 0.0,
                                 baseline_rationales=objective.baseline_rationales if objective.lambda_borrowed
                                 else 0.0, seed=seed)
        phi_la = tiny_evaluator(words + LABELS, seed=seed + 1)
        train_leakage_aware(phi_la, psi, instances, [], [], config.model_copy(update={"batch_size": 4}), objective,
                            "nli", progress=False)
        table = score_rev(phi_la, None, rationales, test, baselines, ScoreConfig(), zero="empty")
        return dict(table.group_by("source").agg(pl.col("score").mean()).iter_rows())

    return {"larev": scores(objective),
            "erm_envs": scores(objective.model_copy(update={"lambda_irm": 0.0, "lambda_probe": 0.0,
                                                            "lambda_borrowed": 0.0, "label_statements": 0.0}))}


def test_planted_label_phrasing_larev_pays_a_borrowed_rationale_far_less_than_its_erm_control():
    """Issue 34's claim on planted data (`planted_phrasing_scores`): LAREV (phi_LA with no-rationale instances and
    the borrowed-rationale term, read against its own reading of no rationale) gives a borrowed same-label rationale
    little; the erm_envs control (same environments and no-rationale instances, no invariance term) pays it exactly
    what it pays the gold one. The training rows' borrowed rationales are those the term trains on; the test rows'
    are drawn afresh among the test rows, so the test measures the trained behaviour on new pairs.

    What is not claimed: gold above borrowed. At this size phi_LA does not learn to check that r's subject is the
    instance's (gold and borrowed come out about equal), so the test asks only that gold is not below borrowed
    beyond 0.01 nats. Seed 0 is not bit-identical across machines or torch thread counts (float kernels differ), so
    the bounds leave room: LAREV pays under half what the control pays."""
    result = planted_phrasing_scores(seed=0)
    larev, control = result["larev"], result["erm_envs"]
    assert abs(larev["empty"]) < 1e-5 and abs(control["empty"]) < 1e-5  # the zero point: by construction
    assert control["borrowed"] > 0.5  # the control pays for the label's phrasing ...
    assert abs(control["gold"] - control["borrowed"]) < 0.01  # ... as much as for the instance's own rationale
    assert larev["borrowed"] < control["borrowed"] / 2  # LAREV pays a fraction of that
    assert larev["gold"] >= larev["borrowed"] - 0.01  # gold not below borrowed, up to float kernels


def test_the_borrowed_term_is_the_same_whether_or_not_the_irm_penalty_decoded_the_label_set():
    """With `irm_on='label_set'` the borrowed term reuses the label-set scores the penalty decoded for every row;
    with 'tokens' it decodes its own rows: the same value either way."""
    from larev.methods.leakage_aware.training import _batch_loss, _encode

    phi_la = tiny_evaluator(WORDS + LABELS, seed=3)
    phi_la.model.eval()
    data = [LAInstance(inputs=(rationale_input(f"a {w}", "a man implies a dog"),
                               rationale_input(f"a {w}", "a man <mask> a dog")),
                       probe_input=baseline_input("a man <mask> a dog"), label=y, candidates=tuple(LABELS),
                       zero_env=k % 2, empty_input=rationale_input("", "a man <mask> a dog"),
                       borrowed_input=rationale_input("a tool", "a man implies a dog"))
            for k, (y, w) in enumerate(zip(LABELS * 2, ["fruit", "tool", "dog"] * 2))]
    enc = _encode(phi_la, data, 2, with_probe=False)
    values = [_batch_loss(phi_la, None, data, enc, list(range(6)), 2, LeakageAwareConfig(irm_on=irm_on), 1.0,
                          0.0, False, torch.device("cpu"), False, w_borrowed=1.0, w_empty=1.0)[1][3]
              for irm_on in ("tokens", "label_set")]
    assert values[0] > 0 and values[0] == pytest.approx(values[1], abs=1e-6)


def test_a_run_whose_larev_was_trained_under_another_definition_is_refused_before_scoring():
    """run.json of a run made when `larev.definition` existed: new_information's phi_LA is not eq. 4.4's, so
    scoring it as `larev` is refused with what to do; a run that recorded the thesis's (or nothing) is scored."""
    from types import SimpleNamespace

    from larev.errors import ConfigError
    from tasks.leakage_aware import LeakageAware

    def finished(saved):
        return SimpleNamespace(params=None, saved_params=saved)

    with pytest.raises(ConfigError, match="larev.definition=new_information, which is the metric larev_vs_empty"):
        LeakageAware().score(finished({"larev": {"definition": "new_information"}}), {"larev": None}, None)
    assert LeakageAware().score(finished({"larev": {"definition": "thesis"}}), {}, None) == []
    assert LeakageAware().score(finished({"larev": {}}), {}, None) == []
