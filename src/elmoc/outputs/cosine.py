"""CONT with the cosine loss, the loss of every ELMo-C result (spec 2.2, P4).

Per token ``l_t = -cos(W h_t + b, e_{w_{t+1}})`` with ``e`` the raw (unnormalized)
target vector; ``-cos`` rather than ``1 - cos`` as in the paper's code (same
gradients).  :func:`elmoc.nn.cosine.cosine_similarity` does the math: the value of
``torch.nn.functional.cosine_similarity`` (eps 1e-8) with a fused backward.
"""
from __future__ import annotations

import torch

from elmoc.nn.cosine import cosine_similarity
from elmoc.outputs.continuous import ContinuousOutput
from elmoc.registry import register


@register("output", "cosine")
class CosineOutput(ContinuousOutput):
    """``-cos`` against a frozen target table; see :class:`ContinuousOutput` for arguments."""

    @classmethod
    def table_label(cls) -> str:
        return "CONT"  # the paper's CONT layer

    def token_loss(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return -cosine_similarity(prediction, target)

    def step_logs(self, loss_sum: torch.Tensor, count: torch.Tensor, prediction: torch.Tensor, target: torch.Tensor,
             mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"cosine": -loss_sum / count}  # the loss is -cos: no second pass
