"""phi_LA's loss (thesis eq. 4.9/4.10) and the leakage probe psi built from phi (eq. 4.8).

L = ERM + lambda_irm * sum_e IRMv1_e - lambda_probe * min(L_probe, log K) + w_empty * ERM_empty
      + lambda_borrowed * L_borrowed + lambda_mismatched * L_mismatched
    ERM       mean over the environments of the token cross-entropy of y given [r, b_e]  (eq. 4.7's first term)
    IRMv1_e   per-environment penalty (eq. 4.6, larev/models/irm.py)
    ERM_empty not in the thesis: the token cross-entropy of y given [empty, b_z] over the no-rationale rows (each
              instance's in one environment z), weight 1 after the warm-up: the trained no-rationale reading that
              LAREV's zero point is. Outside the IRM penalty: a no-rationale row's label is mostly unpredictable,
              and in the penalty it pulled every prediction of its environment to the prior.
    L_probe   the frozen probe's negative log-likelihood of y over the label set (log-softmax of the label-set
              scores s_k = log p(label k | .), decoded from phi_LA's own encoding of b~), per row bounded at chance
              level log K and averaged: unbounded, phi_LA could lower its loss forever by making the probe
              confidently wrong. The bound is in label-set units on purpose: the token cross-entropy over the
              whole vocabulary (end token included) sits near log(K)/2 at chance for one-token labels, so a
              clip at log K there would still reward a probe pushed below chance.
    L_borrowed  not in the thesis (its future work: invariance on the rationale side): the mean over rows of
              KL(sg p(. | empty, b_e) || p(. | r', b_e)) over the label set, r' another training instance's
              rationale with the same label, sg: no gradient through the target. A rationale about another
              instance carries the label's usual phrasing and nothing about this one: it must leave phi_LA's
              belief where no rationale leaves it, which is the zero point of LAREV's score.
    L_mismatched  not in the thesis, off unless asked (`larev.lambda_mismatched`): the token cross-entropy of y_i
              given [r_j, b_i^m] over the batch's instances, r_j the rationale of another training instance j with
              y_j != y_i, m one of i's environments (seeded). Such an r argues for another label than the input's:
              a reader that takes r's label words at their word pays for it, one that checks r against the input
              does not. Outside the IRM penalty, like ERM_empty.
All weights ramp up linearly over the first `warmup_fraction` of the steps (thesis 5.3.3); the zero terms
(w_empty, lambda_borrowed) on their own schedule (training.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch

from larev.models.evaluator import Evaluator


def ramp(step: int, total: int, fraction: float) -> float:
    """Linear warm-up of a penalty weight: 0 at step 0, 1 from `fraction * total` steps on."""
    ramp_steps = fraction * total
    return 1.0 if ramp_steps <= 0 else min(1.0, step / ramp_steps)


def label_set_nll(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per row -log softmax(scores)[target]: the NLL of the label over the row's label set.

    scores: (B, K_max) label-set scores s_k, -inf where a row has fewer than K_max labels; target: (B,) indices.
    """
    return -torch.log_softmax(scores, dim=-1).gather(1, target.unsqueeze(1)).squeeze(1)


def bounded_probe_loss(probe_nll: torch.Tensor, n_labels: int | torch.Tensor, bound: bool = True) -> torch.Tensor:
    """The probe loss to subtract: the mean over rows of min(NLL_i, log K_i) when `bound` (chance level of row i
    with K_i labels; see the module docstring), else the mean NLL. probe_nll: (B,) or a scalar; n_labels: an int
    or (B,)."""
    if not bound:
        return probe_nll.mean()
    chance = torch.log(torch.as_tensor(n_labels, dtype=probe_nll.dtype, device=probe_nll.device))
    return torch.minimum(probe_nll, chance).mean()


def borrowed_consistency(borrowed_scores: torch.Tensor, empty_scores: torch.Tensor) -> torch.Tensor:
    """L_borrowed: mean over rows of KL(sg softmax(empty_scores) || softmax(borrowed_scores)), the label-set
    distributions of [r', b_e] and [empty, b_e] (same row, same environment); the target gets no gradient.

    borrowed_scores, empty_scores: (B, K_max) label-set scores s_k, -inf where a row has fewer labels (the same
    places in both). Returns a scalar >= 0 (0 for B = 0), 0 exactly when the two distributions agree.
    """
    if borrowed_scores.shape[0] == 0:
        return borrowed_scores.new_zeros(())
    target = torch.log_softmax(empty_scores.detach(), dim=-1)
    logq = torch.log_softmax(borrowed_scores, dim=-1)
    present = torch.isfinite(target)
    kl = torch.where(present, target.exp() * (target - logq), torch.zeros_like(target))
    return kl.sum(dim=-1).mean()


def la_objective(erm_losses: list[torch.Tensor], irm_penalties: list[torch.Tensor], probe_loss: torch.Tensor,
                 w_irm: float, w_probe: float, borrowed_loss: torch.Tensor | None = None,
                 w_borrowed: float = 0.0, empty_loss: torch.Tensor | None = None,
                 w_empty: float = 0.0, mismatched_loss: torch.Tensor | None = None,
                 w_mismatched: float = 0.0) -> torch.Tensor:
    """Eq. 4.9: mean_e L^e + w_irm * sum_e IRM_e - w_probe * L_probe, plus w_borrowed * L_borrowed,
    w_empty * ERM_empty and w_mismatched * L_mismatched where computed (None: not computed, adds nothing)."""
    erm = torch.stack(erm_losses).mean()
    loss = erm + w_irm * torch.stack(irm_penalties).sum() - w_probe * probe_loss
    for term, weight in ((borrowed_loss, w_borrowed), (empty_loss, w_empty), (mismatched_loss, w_mismatched)):
        if term is not None:
            loss = loss + weight * term
    return loss


def freeze(modules: Iterable[torch.nn.Module]) -> None:
    for module in modules:
        module.eval()
        for p in module.parameters():
            p.requires_grad_(False)


def probe_from(phi: Evaluator) -> Evaluator:
    """psi: a copy of phi whose encoder (input embeddings included, which T5 shares with the decoder and the
    output layer) is frozen; only the decoder blocks train."""
    psi = copy.deepcopy(phi)
    freeze([psi.model.get_encoder()])
    psi.meta = {"role": "probe"}
    return psi
