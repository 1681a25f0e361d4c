"""The fused cosine of the CONT loss against torch's composite op."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from elmoc.nn.cosine import cosine_similarity


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_value_and_gradient_match_torch(dtype, tol):
    torch.manual_seed(0)
    p = torch.randn(4, 5, 7, dtype=dtype, requires_grad=True)
    t = torch.randn(4, 5, 7, dtype=dtype) * 3
    weights = torch.randn(4, 5, dtype=dtype)
    ours = cosine_similarity(p, t)
    theirs = F.cosine_similarity(p, t, dim=-1)
    torch.testing.assert_close(ours, theirs, atol=tol, rtol=tol)
    (g_ours,) = torch.autograd.grad((ours * weights).sum(), p)
    (g_theirs,) = torch.autograd.grad((theirs * weights).sum(), p)
    torch.testing.assert_close(g_ours, g_theirs, atol=tol, rtol=tol)


def test_gradcheck_and_zero_vectors():
    torch.manual_seed(1)
    p = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    t = torch.randn(6, 3, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: cosine_similarity(x, t), (p,))
    zero = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    out = cosine_similarity(zero, torch.ones(2, 3, dtype=torch.float64))
    assert torch.equal(out, torch.zeros(2, dtype=torch.float64))
    (grad,) = torch.autograd.grad(out.sum(), zero)
    zero_ref = zero.detach().clone().requires_grad_()
    (grad_ref,) = torch.autograd.grad(F.cosine_similarity(zero_ref, torch.ones(2, 3, dtype=torch.float64), dim=-1).sum(),
                                      zero_ref)
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(grad, grad_ref)


def test_target_gets_no_gradient_and_shapes_are_checked():
    t = torch.randn(3, 4, requires_grad=True)
    cosine_similarity(torch.randn(3, 4, requires_grad=True), t).sum().backward()
    assert t.grad is None
    with pytest.raises(ValueError, match="differ in shape"):
        cosine_similarity(torch.randn(3, 4), torch.randn(3, 5))
