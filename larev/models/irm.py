"""IRMv1 (Arjovsky et al., 2019), per environment, as LAREV eq. 4.6 and RORA eq. 7 use it.

penalty_e = ( d/dw  L^e(w * logits) |_{w=1} )^2,   L^e = mean token cross-entropy of environment e,
summed over environments. The gradient with respect to the scalar w has a closed form: for one token with
logits z and target y, d/dw [-log softmax(w z)_y] at w = 1 equals E_{p=softmax(z)}[z] - z_y. Using it avoids
the double backward pass of the autograd formulation (`irm_penalty_autograd`, kept as the test reference)
and gives the same value and the same gradients.
"""

from __future__ import annotations

import torch

IGNORE_INDEX = -100


def _scale_gradient(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """d/dw of the mean token cross-entropy of (w * logits) at w = 1 (a scalar tensor).

    -inf logits (absent candidates in a padded label set) get probability 0 and do not count.
    """
    valid = labels != IGNORE_INDEX
    z = logits.float()[valid]  # [n_tokens, V]
    y = labels[valid]
    finite_z = z.masked_fill(~torch.isfinite(z), 0.0)
    expected_z = (torch.softmax(z, dim=-1) * finite_z).sum(dim=-1)
    return (expected_z - z.gather(1, y[:, None]).squeeze(1)).mean()


def irm_penalty(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """IRMv1 penalty of one environment: logits [N, T, V] (or [N, V]), labels [N, T] (or [N]), -100 = ignore."""
    return _scale_gradient(logits, labels) ** 2


def irm_penalty_autograd(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The same penalty through autograd on a dummy scale (the textbook formulation; slower)."""
    w = torch.ones((), device=logits.device, requires_grad=True)
    loss = torch.nn.functional.cross_entropy((w * logits.float()).reshape(-1, logits.shape[-1]),
                                             labels.reshape(-1), ignore_index=IGNORE_INDEX)
    (grad,) = torch.autograd.grad(loss, [w], create_graph=True)
    return grad**2


def irm_over_environments(logits_by_env: list[torch.Tensor], labels_by_env: list[torch.Tensor]) -> torch.Tensor:
    """Sum of per-environment penalties (LAREV eq. 4.6). Each environment gets its own penalty: the reference
    RORA code computed one penalty on the pooled batch, which is not IRM."""
    return sum(irm_penalty(z, y) for z, y in zip(logits_by_env, labels_by_env, strict=True))
