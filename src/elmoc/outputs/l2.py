"""CONT with the squared-L2 loss (spec 2.3, the paper code's ``mse`` option).

Per token ``||W h_t + b - e_{w_{t+1}}||^2`` against the raw target vector (no
normalization); with ``per_dim: true`` divided by ``d_emb`` (the code's
``reduce_loss=true``).  Heldout metric is still the mean cosine.
"""
from __future__ import annotations

import torch

from elmoc.outputs.continuous import ContinuousOutput
from elmoc.registry import register


@register("output", "l2")
class L2Output(ContinuousOutput):
    """Squared Euclidean distance to the frozen target vector.

    Args:
        per_dim: divide each token's loss by ``d_emb`` (mean over dimensions).
        kwargs: see :class:`elmoc.outputs.continuous.ContinuousOutput`.
    """

    def __init__(self, per_dim: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.per_dim = bool(per_dim)

    def token_loss(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        squared = (prediction - target).pow(2).sum(dim=-1)  # (B, T)
        return squared / self.embedding_dim if self.per_dim else squared
