"""``log I_v(kappa)``, the log of the modified Bessel function of the first kind,
with its exact derivative, stable for large orders (vMF loss, spec 2.4, P12).

Why hand-written: PyTorch has ``i0``/``i1`` only, and SciPy's ``iv`` overflows for
the kappas a 300-d vMF sees.  The value is computed in float64 on CPU with
``scipy.special.ive`` (the exponentially scaled ``I_v(k) * exp(-k)``, finite for
every kappa up to ~1e300): ``log I_v = log ive(v, k) + k``.  Where ``ive``
underflows (small kappa against a large order, e.g. v=149, kappa < 1.5) the power
series ``I_v(k) = sum_j (k/2)^(v+2j) / (j! Gamma(v+j+1))`` is summed in log space
instead, which converges fast exactly there.  The derivative is the exact
``d/dk log I_v(k) = v/k + I_{v+1}(k)/I_v(k)`` from the same two sources, so neither
the value nor the gradient is approximated (unlike the paper's code, whose forward
returns 0, P12).  No NaN/inf for kappa in [1e-8, 1e300) and any order v >= 0.
"""
from __future__ import annotations

import numpy as np
import torch

from elmoc.errors import ConfigError


_NORMAL_FLOOR = 1e-280


def _scipy_special():
    try:
        from scipy import special
    except ImportError as e:  # pragma: no cover - scipy is installed with elmoc[test]
        raise ConfigError("the vMF loss needs SciPy for exact Bessel functions: pip install scipy") from e
    return special


def _series(v: float, kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log I_v and d/dk log I_v from the power series (float64, any kappa > 0)."""
    special = _scipy_special()
    half = np.log(kappa / 2.0)  # (n,)
    n_terms = int(min(20000, 40 + 3 * np.max(kappa**2 / (4.0 * (v + 1.0)))))
    j = np.arange(n_terms, dtype=np.float64)  # (J,)
    log_terms = 2.0 * j[None, :] * half[:, None] - special.gammaln(j + 1.0)[None, :] - special.gammaln(v + j + 1.0)[None, :]
    top = log_terms.max(axis=1, keepdims=True)
    weights = np.exp(log_terms - top)
    total = weights.sum(axis=1)
    log_iv = v * half + top[:, 0] + np.log(total)
    d_log_iv = v / kappa + (weights * (2.0 * j[None, :] / kappa[:, None])).sum(axis=1) / total
    return log_iv, d_log_iv


def log_iv_and_derivative(v: float, kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log I_v(kappa), d/dkappa log I_v(kappa))`` elementwise, float64 arrays."""
    special = _scipy_special()
    kappa = np.asarray(kappa, dtype=np.float64)
    flat = kappa.reshape(-1)
    if np.any(flat <= 0) or not np.all(np.isfinite(flat)):
        raise ValueError("log I_v needs finite kappa > 0")
    ive_v = special.ive(v, flat)
    ive_v1 = special.ive(v + 1.0, flat)
    # denormal ive values have lost digits: use the series there too
    exact = (ive_v > _NORMAL_FLOOR) & (ive_v1 > _NORMAL_FLOOR) & np.isfinite(ive_v) & np.isfinite(ive_v1)
    log_iv = np.empty_like(flat)
    d_log_iv = np.empty_like(flat)
    log_iv[exact] = np.log(ive_v[exact]) + flat[exact]
    d_log_iv[exact] = v / flat[exact] + ive_v1[exact] / ive_v[exact]
    if not exact.all():
        rest = ~exact
        log_iv[rest], d_log_iv[rest] = _series(v, flat[rest])
    return log_iv.reshape(kappa.shape), d_log_iv.reshape(kappa.shape)


class _LogIv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, kappa: torch.Tensor, v: float) -> torch.Tensor:  # noqa: D401
        value, derivative = log_iv_and_derivative(v, kappa.detach().to("cpu", torch.float64).numpy())
        ctx.save_for_backward(torch.from_numpy(derivative).to(kappa.device, kappa.dtype))
        return torch.from_numpy(value).to(kappa.device, kappa.dtype)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (derivative,) = ctx.saved_tensors
        return grad_output * derivative, None


def log_iv(v: float, kappa: torch.Tensor) -> torch.Tensor:
    """Differentiable ``log I_v(kappa)``.  Shape: kappa any shape, > 0; returns the same shape."""
    if v < 0:
        raise ValueError(f"order v must be >= 0, got {v}")
    return _LogIv.apply(kappa, float(v))
