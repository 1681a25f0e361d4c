"""Contract of input layers: token ids -> token vectors.

Shape:
    ids: (batch, time) long vocabulary ids.
    returns: (batch, time, output_dim) float.

``output_dim`` is an attribute so encoders can be sized at build time.
Frozen tables are buffers, not parameters, so they never reach the optimizer.
"""
from __future__ import annotations

import torch
from torch import nn


class InputLayer(nn.Module):
    output_dim: int

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError
