"""IRMv1 penalty against hand-computed values, and equal to the autograd formulation."""

from __future__ import annotations

import math

import pytest
import torch

from larev.models.irm import irm_over_environments, irm_penalty, irm_penalty_autograd


def test_two_class_toy_by_hand():
    # logits [2, 0], target 0: p0 = e^2 / (e^2 + 1); dL/dw at w=1 = E_p[z] - z_y = 2 p0 - 2
    p0 = math.e**2 / (math.e**2 + 1)
    grad = 2 * p0 - 2
    assert irm_penalty(torch.tensor([[2.0, 0.0]]), torch.tensor([0])).item() == pytest.approx(grad**2, rel=1e-6)
    # a second example [0, 1], target 0: E_p[z] - z_y = e / (1 + e); the penalty squares the MEAN gradient
    grad2 = math.e / (1 + math.e)
    both = irm_penalty(torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0]))
    assert both.item() == pytest.approx(((grad + grad2) / 2) ** 2, rel=1e-6)
    assert both.item() == pytest.approx(0.0606768, rel=1e-5)


def test_closed_form_equals_autograd_in_value_and_gradient():
    torch.manual_seed(0)
    logits = torch.randn(4, 3, 7, requires_grad=True)
    labels = torch.randint(0, 7, (4, 3))
    labels[1, 2] = -100  # ignored position
    closed = irm_penalty(logits, labels)
    reference = irm_penalty_autograd(logits, labels)
    assert closed.item() == pytest.approx(reference.item(), rel=1e-5)
    (g1,) = torch.autograd.grad(closed, [logits])
    (g2,) = torch.autograd.grad(reference, [logits])
    torch.testing.assert_close(g1, g2, rtol=1e-4, atol=1e-6)


def test_penalty_is_zero_at_the_optimal_scale_and_summed_per_environment():
    # A calibrated predictor: the gradient w.r.t. the scale is zero in expectation over its own predictions.
    logits = torch.tensor([[0.0, 0.0]])
    assert irm_penalty(logits, torch.tensor([0])).item() == pytest.approx(0.0)  # E_p[z] = z_y = 0
    a, b = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    ya = yb = torch.tensor([0])
    total = irm_over_environments([a, b], [ya, yb])
    assert total.item() == pytest.approx(irm_penalty(a, ya).item() + irm_penalty(b, yb).item())


def test_padded_label_set_scores():
    # a row with 2 of 3 candidates (third -inf) gives the same penalty as the unpadded 2-candidate row
    padded = torch.tensor([[2.0, 0.0, -math.inf]])
    assert irm_penalty(padded, torch.tensor([0])).item() == pytest.approx(
        irm_penalty(torch.tensor([[2.0, 0.0]]), torch.tensor([0])).item())
    assert torch.isfinite(irm_penalty(padded, torch.tensor([0])))
