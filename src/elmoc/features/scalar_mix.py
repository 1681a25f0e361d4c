"""Learned scalar mix of representation layers (spec 5.4).

``mix = gamma * sum_k softmax(w)_k * L_k`` with ``w`` initialised to 0 (equal
weights) and ``gamma`` to 1.  With ``layer_norm=True`` every layer is first
normalised with the mean and variance over *all unmasked elements* of the batch
(not per token), eps 1e-12, as AllenNLP's ``ScalarMix`` does.

Hand-written because torch has no scalar mix; ~60 lines, one idea.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from elmoc.errors import ConfigError

LAYER_NORM_EPS = 1e-12


class ScalarMix(nn.Module):
    """Softmax-weighted, scaled sum of ``num_layers`` same-shaped layers.

    Args:
        num_layers: how many layers are mixed (>= 1).
        layer_norm: normalise each layer over its unmasked elements first.
        initial_weights: optional starting values of ``w`` (default zeros).
        trainable: when False, ``w`` and ``gamma`` are frozen.

    Shape:
        layers: (num_layers, batch, time, dim) tensor or a sequence of
            ``num_layers`` tensors of shape (batch, time, dim).
        mask: (batch, time) bool, True for real tokens (required with layer_norm;
            padded positions are always zeroed in the output).
        returns: (batch, time, dim).
    """

    def __init__(
        self,
        num_layers: int,
        layer_norm: bool = False,
        initial_weights: Sequence[float] | None = None,
        trainable: bool = True,
    ):
        super().__init__()
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ConfigError(f"scalar mix needs num_layers >= 1, got {num_layers!r}")
        if initial_weights is None:
            initial_weights = [0.0] * num_layers
        if len(initial_weights) != num_layers:
            raise ConfigError(
                f"scalar mix: {len(initial_weights)} initial weights for {num_layers} layers; "
                f"give exactly {num_layers} values or none"
            )
        self.num_layers = num_layers
        self.layer_norm = bool(layer_norm)
        self.weights = nn.Parameter(torch.tensor([float(w) for w in initial_weights]), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor([1.0]), requires_grad=trainable)

    def extra_repr(self) -> str:
        return f"num_layers={self.num_layers}, layer_norm={self.layer_norm}"

    def normalized_weights(self) -> torch.Tensor:
        """softmax(w), shape (num_layers,)."""
        return torch.softmax(self.weights, dim=0)

    def forward(self, layers: torch.Tensor | Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        if not isinstance(layers, torch.Tensor):
            layers = torch.stack(list(layers), dim=0)
        if layers.dim() != 4 or layers.shape[0] != self.num_layers:
            raise ValueError(
                f"scalar mix expects (num_layers={self.num_layers}, batch, time, dim), got {tuple(layers.shape)}"
            )
        if mask.dtype != torch.bool or mask.shape != layers.shape[1:3]:
            raise ValueError(f"mask must be bool (batch, time) = {tuple(layers.shape[1:3])}, got {mask.dtype} {tuple(mask.shape)}")
        maskf = mask.to(layers.dtype)[None, :, :, None]  # (1, B, T, 1)
        if self.layer_norm:
            count = (maskf.sum() * layers.shape[-1]).clamp(min=1.0)
            mean = (layers * maskf).sum(dim=(1, 2, 3), keepdim=True) / count
            var = (((layers - mean) * maskf) ** 2).sum(dim=(1, 2, 3), keepdim=True) / count
            layers = (layers - mean) / torch.sqrt(var + LAYER_NORM_EPS)
        weights = self.normalized_weights().to(layers.dtype)[:, None, None, None]
        mixed = self.gamma * (weights * layers).sum(dim=0)
        return mixed * maskf[0]

    def l2_penalty(self) -> torch.Tensor:
        """||w||^2, for the L2 on scalar-mix parameters of the NER/SRL configs."""
        return (self.weights**2).sum()
