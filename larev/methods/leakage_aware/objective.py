"""phi_LA's loss (thesis eq. 4.9/4.10) and the leakage probe psi built from phi (eq. 4.8).

L = ERM + lambda_irm * sum_e IRMv1_e - lambda_probe * min(L_probe, log K)
    ERM       mean over the environments of the token cross-entropy of y given [r, b_e]  (eq. 4.7's first term)
    IRMv1_e   per-environment penalty (eq. 4.6, larev/models/irm.py)
    L_probe   the frozen probe's cross-entropy of y decoded from phi_LA's own encoding of b~; bounded at chance
              level: unbounded, phi_LA could lower its loss forever by making the probe confidently wrong.
Both weights ramp up linearly over the first `warmup_fraction` of the steps (thesis 5.3.3).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable

import torch

from larev.models.evaluator import Evaluator


def ramp(step: int, total: int, fraction: float) -> float:
    """Linear warm-up of a penalty weight: 0 at step 0, 1 from `fraction * total` steps on."""
    ramp_steps = fraction * total
    return 1.0 if ramp_steps <= 0 else min(1.0, step / ramp_steps)


def bounded_probe_loss(probe_loss: torch.Tensor, n_labels: int, bound: bool = True) -> torch.Tensor:
    """The probe loss to subtract: clipped at chance level log K when `bound` (see the module docstring)."""
    return torch.clamp(probe_loss, max=math.log(n_labels)) if bound else probe_loss


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


def decoder_loss_on(model: torch.nn.Module, hidden: torch.Tensor, attention_mask: torch.Tensor,
                    labels: torch.Tensor) -> torch.Tensor:
    """Token cross-entropy of `labels` decoded by `model` from given encoder states (the probe on phi_LA's h)."""
    return model(encoder_outputs=(hidden,), attention_mask=attention_mask, labels=labels).loss
