"""Mask helpers.  Masks are ``bool`` tensors, True for real tokens."""
from __future__ import annotations

import torch


def masked_sum_and_count(values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of ``values`` where ``mask`` is True, and how many such entries.

    Shape:
        values: (batch, time) float; mask: (batch, time) bool.
        returns: two scalars (sum as float, count as float, so it can be all-reduced).
    """
    if values.shape != mask.shape:
        raise ValueError(f"values {tuple(values.shape)} and mask {tuple(mask.shape)} differ in shape")
    maskf = mask.to(values.dtype)
    return (values * maskf).sum(), maskf.sum()


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` over ``mask``; a fully masked slice gives 0, not NaN.

    Shape:
        values: (..., time, ...) float; mask broadcastable to ``values``.
    """
    maskf = mask.to(values.dtype)
    while maskf.dim() < values.dim():
        maskf = maskf.unsqueeze(-1)
    if dim is None:
        return (values * maskf).sum() / (maskf.expand_as(values).sum()).clamp(min=1.0)
    return (values * maskf).sum(dim) / maskf.expand_as(values).sum(dim).clamp(min=1.0)


def lengths_to_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """bool (batch, max_len) mask from integer lengths (batch,)."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths[b]`` steps along dim 1; padding stays at the end.

    Shape:
        x: (batch, time, ...) ; lengths: (batch,) long.  Returns the same shape.
    Applying it twice gives back ``x`` (on the unpadded part).
    """
    batch, time = x.shape[0], x.shape[1]
    steps = torch.arange(time, device=x.device)[None, :].expand(batch, time)
    rev = lengths[:, None].to(steps.device) - 1 - steps
    index = torch.where(rev >= 0, rev, steps)  # padding positions map to themselves
    gather_index = index.view(batch, time, *([1] * (x.dim() - 2))).expand_as(x)
    return torch.gather(x, 1, gather_index)


def valid_positions(
    hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The encoder states and targets of the valid tokens, flattened, and their count.

    Shape:
        hidden: (batch, time, dim); targets: (batch, time) long; mask: (batch, time) bool.
        returns: h (N, dim), y (N,), count (scalar, ``hidden``'s dtype) with N = mask.sum().
    """
    if hidden.dim() != 3 or hidden.shape[:2] != targets.shape or targets.shape != mask.shape:
        raise ValueError(
            f"hidden {tuple(hidden.shape)}, targets {tuple(targets.shape)} and mask {tuple(mask.shape)} "
            "must agree on (batch, time)"
        )
    flat = mask.reshape(-1)
    return hidden.reshape(-1, hidden.shape[-1])[flat], targets.reshape(-1)[flat], flat.sum().to(hidden.dtype)
