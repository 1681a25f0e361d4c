"""CONT with the von Mises-Fisher NLL (Kumar & Tsvetkov 2019; spec 2.4, P12).

With ``c = W h_t + b`` (``d_emb = m`` dims), ``kappa = ||c||`` and the *normalized*
target ``e^ = e / ||e||``, the per-token loss is::

    -lambda_dot * (c . e^) - log C_m(kappa) + lambda_kappa * kappa
    log C_m(kappa) = v log kappa - (m/2) log(2 pi) - log I_v(kappa),   v = m/2 - 1

``log I_v`` is exact in value and gradient (:mod:`elmoc.outputs.log_bessel`), so
the logged loss is the true NLL (the paper's code drops ``log I_v`` from the value).
``kappa`` is floored at ``min_kappa`` so a zero prediction cannot produce log(0).
The lambdas are not released by the paper; the defaults give the plain NLL.
"""
from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from elmoc.errors import ConfigError
from elmoc.outputs.continuous import ContinuousOutput
from elmoc.outputs.log_bessel import log_iv
from elmoc.registry import register


@register("output", "vmf")
class VmfOutput(ContinuousOutput):
    """vMF negative log-likelihood of the normalized target direction.

    Args:
        lambda_dot: weight of the ``c . e^`` term (the code's ``lamda_one``).
        lambda_kappa: weight of the ``kappa`` penalty (the code's ``lamda_two``).
        min_kappa: floor on ``||c||`` (> 0).
        kwargs: see :class:`elmoc.outputs.continuous.ContinuousOutput`.
    """

    def __init__(self, lambda_dot: float = 1.0, lambda_kappa: float = 0.0, min_kappa: float = 1e-6, **kwargs):
        super().__init__(**kwargs)
        if lambda_dot <= 0:
            raise ConfigError(f"output 'vmf': lambda_dot must be > 0, got {lambda_dot}")
        if lambda_kappa < 0:
            raise ConfigError(f"output 'vmf': lambda_kappa must be >= 0, got {lambda_kappa}")
        if not min_kappa > 0:
            raise ConfigError(f"output 'vmf': min_kappa must be > 0, got {min_kappa}")
        if self.embedding_dim < 2:
            raise ConfigError("output 'vmf': target vectors need at least 2 dimensions")
        self.lambda_dot = float(lambda_dot)
        self.lambda_kappa = float(lambda_kappa)
        self.min_kappa = float(min_kappa)

    def neg_log_normalizer(self, kappa: torch.Tensor) -> torch.Tensor:
        """``-log C_m(kappa)``.  Shape: kappa any shape; returns the same shape."""
        m = self.embedding_dim
        v = m / 2.0 - 1.0
        return -v * torch.log(kappa) + (m / 2.0) * math.log(2.0 * math.pi) + log_iv(v, kappa)

    def token_loss(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        kappa = prediction.norm(dim=-1).clamp(min=self.min_kappa)  # (B, T)
        direction = F.normalize(target, dim=-1)
        dot = (prediction * direction).sum(dim=-1)
        return -self.lambda_dot * dot + self.neg_log_normalizer(kappa) + self.lambda_kappa * kappa
