"""phi_LA's loss (thesis eq. 4.9/4.10) and the leakage probe psi built from phi (eq. 4.8).

L = ERM + lambda_irm * sum_e IRMv1_e - lambda_probe * min(L_probe, log K)
    ERM       mean over the environments of the token cross-entropy of y given [r, b_e]  (eq. 4.7's first term)
    IRMv1_e   per-environment penalty (eq. 4.6, larev/models/irm.py)
    L_probe   the frozen probe's negative log-likelihood of y over the label set (log-softmax of the label-set
              scores s_k = log p(label k | .), decoded from phi_LA's own encoding of b~), per row bounded at chance
              level log K and averaged: unbounded, phi_LA could lower its loss forever by making the probe
              confidently wrong. The bound is in label-set units on purpose: the token cross-entropy over the
              whole vocabulary (end token included) sits near log(K)/2 at chance for one-token labels, so a
              clip at log K there would still reward a probe pushed below chance.
Both weights ramp up linearly over the first `warmup_fraction` of the steps (thesis 5.3.3).
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


def la_objective(erm_losses: list[torch.Tensor], irm_penalties: list[torch.Tensor], probe_loss: torch.Tensor,
                 w_irm: float, w_probe: float) -> torch.Tensor:
    """Eq. 4.9: mean_e L^e + w_irm * sum_e IRM_e - w_probe * L_probe."""
    erm = torch.stack(erm_losses).mean()
    return erm + w_irm * torch.stack(irm_penalties).sum() - w_probe * probe_loss


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
