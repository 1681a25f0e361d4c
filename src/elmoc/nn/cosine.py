"""Cosine similarity along the last dimension with a fused backward (the CONT loss).

Same value as ``torch.nn.functional.cosine_similarity(p, t, dim=-1)``::

    cos = <p, t> / (max(|p|, eps) * max(|t|, eps))

but as one :class:`torch.autograd.Function`: the forward keeps the norms it needs
and the backward is ``g * (t / denom - cos * p / |p|^2)`` in three element-wise ops,
where autograd over the composite op replays a dozen (norms, clamps, divisions).
The target ``t`` is a frozen pretrained vector, so it never receives a gradient.
On the ELMo-C demo size this takes the CONT layer + loss from ~0.58 to ~0.45 ms per
step (``elmoc bench --tables lstm``, docs/benchmarks.md).
"""
from __future__ import annotations

from typing import Any

import torch

__all__ = ["cosine_similarity"]


class _Cosine(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, p: torch.Tensor, t: torch.Tensor, eps: float) -> torch.Tensor:
        p_norm = torch.linalg.vector_norm(p, dim=-1)
        denom = p_norm.clamp_min(eps) * torch.linalg.vector_norm(t, dim=-1).clamp_min(eps)
        cos = torch.linalg.vecdot(p, t) / denom
        ctx.save_for_backward(p, t, p_norm, denom, cos)
        ctx.eps = eps
        return cos

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor):
        p, t, p_norm, denom, cos = ctx.saved_tensors
        along_t = (grad / denom).unsqueeze(-1)
        # |p| is clamped below eps: that branch has no dependence on |p|, so no second term
        along_p = (grad * cos / p_norm.square()).masked_fill_(p_norm <= ctx.eps, 0.0).unsqueeze(-1)
        return torch.addcmul(t * along_t, p, along_p, value=-1.0), None, None


def cosine_similarity(prediction: torch.Tensor, target: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Cosine of ``prediction`` and ``target`` (same shape ``(..., d)``) -> ``(...)``.

    Gradients flow to ``prediction`` only; ``target`` is treated as a constant.
    """
    if prediction.shape != target.shape:
        raise ValueError(f"prediction {tuple(prediction.shape)} and target {tuple(target.shape)} differ in shape")
    return _Cosine.apply(prediction, target.detach(), eps)
