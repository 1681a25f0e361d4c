"""Deep alternating LSTM with highway connections and recurrent dropout (He et al. 2017).

Layer k reads the sentence left-to-right when k is even and right-to-left when k
is odd; each layer's output is the next layer's input.  Each cell is an LSTM with
one extra gate r (the highway gate) mixing the LSTM output with a linear map of
the layer input (He et al. 2017, eq. 3-4, AllenNLP's ``AugmentedLstm``)::

    i, f, o, r = sigmoid(W [x_t; h_{t-1}] + b);   g = tanh(W_g [x_t; h_{t-1}] + b_g)
    c_t = i * g + f * c_{t-1}
    h_t = r * (o * tanh(c_t)) + (1 - r) * W_x x_t          (W_x without bias)

Recurrent dropout is variational: one mask per sequence on h_{t-1}, the same at
every time step (Gal & Ghahramani 2016).

Hand-written because torch's fused ``nn.LSTM`` has neither the highway gate nor
per-sequence recurrent dropout.  The input products of all steps are one matrix
product per layer; the time loop runs in one of three places:

* CPU float32/float64: a C++ loop (``csrc/highway_lstm.cpp``, built at first use by
  :mod:`elmoc.nn.native_build`) inside :class:`_HighwayLstmFunction`, with a hand-written
  backward: per step one small product and fused loops for the pointwise work and every
  gate derivative; the recurrent weight and bias gradients are single products after the loop;
* CUDA: the same autograd function with the time loop in Python, each step one product and
  one ``torch.compile``-fused pointwise cell (:func:`_cell_forward`, :func:`_cell_backward`);
* anywhere else, or on a CPU without a C++ compiler (or with ``ELMOC_NATIVE_LSTM=0``):
  :meth:`HighwayLstmLayer.reference_forward`, the plain autograd loop, which is also the
  reference the tests compare both loops against (tests/nn/test_alternating_lstm.py).

The recurrent dropout masks are drawn the same way, in the same order, on every path, so a
seed gives the same masks whichever loop runs.
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.nn import native_build
from elmoc.nn.masking import reverse_padded

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("csrc") / "highway_lstm.cpp"
_EXTENSION = native_build.Extension("elmoc_native_highway", SOURCE, "elmoc_highway", "native highway LSTM kernel", log)


def native_ops() -> Any | None:
    """``torch.ops.elmoc_highway`` (built on the first call), or None when unavailable."""
    return _EXTENSION.ops()


def native_status() -> str:
    """A one-line description for logs and benchmark reports."""
    return _EXTENSION.status()


# -- the Python time loop of the autograd function (the CUDA path) ---------------------------
def _cell_forward(z: torch.Tensor, c_prev: torch.Tensor, hd_prev: torch.Tensor, highway: torch.Tensor,
                  m: torch.Tensor, drop: torch.Tensor | None):
    """One step's pointwise work: gates ``z`` (B, 5H, bias and recurrent product included),
    the carried cell and dropped state, the highway input (B, H), the mask column (B, 1).
    Returns acts (B, 5H), carried cell, tanh(c), output, carried dropped state."""
    hidden = c_prev.shape[1]
    sig = torch.sigmoid(z[:, : 4 * hidden])
    i, f, o, r = sig.chunk(4, dim=1)
    g = torch.tanh(z[:, 4 * hidden :])
    cell = i * g + f * c_prev
    tanh_c = torch.tanh(cell)
    h = r * (o * tanh_c) + (1 - r) * highway
    hd = h if drop is None else h * drop
    return (torch.cat([sig, g], dim=1), m * cell + (1 - m) * c_prev, tanh_c, h * m, m * hd + (1 - m) * hd_prev)


def _cell_backward(grad_out: torch.Tensor, dh_product: torch.Tensor, dh_prev: torch.Tensor, m_next: torch.Tensor,
                   dc: torch.Tensor, acts: torch.Tensor, c_prev: torch.Tensor, tanh_c: torch.Tensor,
                   highway: torch.Tensor, m: torch.Tensor, drop: torch.Tensor | None):
    """One reverse step's pointwise work.  ``dh_product`` is the later step's ``dz W``; with
    ``dh_prev`` and that step's mask column ``m_next`` it gives the carried state's gradient.
    Returns dz (B, 5H), the highway input's gradient, the carried dc and dh."""
    dh_step = dh_product if drop is None else dh_product * drop
    dh = m_next * dh_step + (1 - m_next) * dh_prev
    i, f, o, r, g = acts.chunk(5, dim=1)
    dn = (grad_out + dh) * m
    dcn = dc * m + dn * r * o * (1 - tanh_c * tanh_c)
    dz = torch.cat([dcn * g * i * (1 - i), dcn * c_prev * f * (1 - f), dn * r * tanh_c * o * (1 - o),
                    dn * (o * tanh_c - highway) * r * (1 - r), dcn * i * (1 - g * g)], dim=1)
    return dz, dn * (1 - r), dcn * f + (1 - m) * dc, dh


class _CompiledCells:
    """:func:`_cell_forward` and :func:`_cell_backward` through ``torch.compile`` (one fused kernel
    each on a GPU) or eager; a compile that fails falls back to eager once, with a warning."""

    def __init__(self, compiled: bool):
        self.forward = self._wrap(_cell_forward, compiled)
        self.backward = self._wrap(_cell_backward, compiled)

    @staticmethod
    def _wrap(fn: Callable, compiled: bool) -> Callable:
        if not compiled:
            return fn
        state = {"fn": torch.compile(fn, dynamic=True)}

        def call(*args):
            try:
                return state["fn"](*args)
            except Exception as err:  # no triton, an unsupported backend...: eager, loudly
                if state["fn"] is fn:
                    raise
                log.warning("torch.compile of the highway LSTM cell failed (%s: %s); running it eagerly",
                            type(err).__name__, (str(err).strip().splitlines() or [""])[0])
                state["fn"] = fn
                return fn(*args)

        return call


class PythonLoops:
    """The time loops in Python, each step one product and one (compiled) pointwise cell.
    Same arguments and results as the C++ ``highway_forward`` / ``highway_backward``."""

    def __init__(self, compiled: bool):
        self.cells = _CompiledCells(compiled)

    def highway_forward(self, projected, mask, drop, weight, bias):
        steps, batch, six_h = projected.shape
        hidden = six_h // 6
        gates_in = projected[..., : 5 * hidden] + bias
        highway = projected[..., 5 * hidden :]
        maskf = mask.to(projected.dtype).unsqueeze(-1)
        cell = projected.new_zeros(batch, hidden)
        hd = projected.new_zeros(batch, hidden)
        acts, outs, cells, hds, tanhs = [], [], [cell], [hd], []
        for t in range(steps):
            z = torch.addmm(gates_in[t], hd, weight.t())
            a, cell, tanh_c, out, hd = self.cells.forward(z, cell, hd, highway[t], maskf[t], drop)
            for kept, value in zip((acts, outs, cells, hds, tanhs), (a, out, cell, hd, tanh_c)):
                kept.append(value)
        return [torch.stack(x) for x in (acts, outs, cells, hds, tanhs)]

    def highway_backward(self, grad_out, projected, mask, acts, c_all, hd_all, tanh_c, drop, weight):
        steps, batch, six_h = projected.shape
        hidden = six_h // 6
        highway = projected[..., 5 * hidden :]
        maskf = mask.to(projected.dtype).unsqueeze(-1)
        zeros = projected.new_zeros(batch, hidden)
        dh_product, dh, dc, m_next = zeros, zeros, zeros, maskf[0] * 0
        dzs, dhws = [None] * steps, [None] * steps
        for t in range(steps - 1, -1, -1):
            dzs[t], dhws[t], dc, dh = self.cells.backward(grad_out[t], dh_product, dh, m_next, dc, acts[t],
                                                          c_all[t], tanh_c[t], highway[t], maskf[t], drop)
            dh_product = dzs[t] @ weight
            m_next = maskf[t]
        dz = torch.stack(dzs)
        d_weight = dz.reshape(-1, 5 * hidden).t() @ hd_all[:steps].reshape(-1, hidden)
        return torch.cat([dz, torch.stack(dhws)], dim=-1), d_weight, dz.sum((0, 1))


@functools.cache
def _cuda_loops() -> PythonLoops:
    """One set of compiled loops per process, so that each cell is compiled once."""
    return PythonLoops(compiled=True)


def time_loops(t: torch.Tensor) -> Any | None:
    """The loops for tensors like ``t``: the C++ ones on a CPU (float32/float64), the Python
    ones with compiled cells on CUDA, None (the reference autograd loop) otherwise."""
    if t.device.type == "cpu":
        return native_ops() if t.dtype in (torch.float32, torch.float64) else None
    if t.device.type == "cuda":
        return _cuda_loops()
    return None


class _HighwayLstmFunction(torch.autograd.Function):
    """One layer's time loop over time-major tensors with a hand-written backward.

    Inputs: projected (T, B, 6H) = x W_in^T; mask (T, B) bool; drop (B, H) or None;
    weight (5H, H), bias (5H,) of the recurrent map; loops (see :func:`time_loops`).
    Output: (T, B, H), zero at padding.
    """

    @staticmethod
    def forward(ctx: Any, projected, mask, drop, weight, bias, loops):
        acts, out, c_all, hd_all, tanh_c = loops.highway_forward(projected, mask, drop, weight, bias)
        ctx.save_for_backward(projected, mask, acts, c_all, hd_all, tanh_c, drop, weight)
        ctx.loops = loops
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out):
        projected, mask, acts, c_all, hd_all, tanh_c, drop, weight = ctx.saved_tensors
        d_projected, d_weight, d_bias = ctx.loops.highway_backward(
            grad_out, projected, mask, acts, c_all, hd_all, tanh_c, drop, weight)
        return d_projected, None, None, d_weight, d_bias, None


def _time_major_reversal(mask: torch.Tensor) -> torch.Tensor:
    """(T, B) index that reverses each column's first ``length`` steps (padding stays)."""
    steps = torch.arange(mask.shape[0], device=mask.device).unsqueeze(1)
    rev = mask.sum(0, keepdim=True) - 1 - steps
    return torch.where(rev >= 0, rev, steps)


class HighwayLstmLayer(nn.Module):
    """One direction of one layer.

    Args:
        input_dim, hidden_dim: sizes.
        recurrent_dropout: probability of dropping a hidden unit of h_{t-1} (same mask over time).

    Shape:
        forward(x (batch, time, input_dim), mask (batch, time) bool) -> (batch, time, hidden_dim),
        zero at padding.  Sequences are read left-to-right; reverse them outside for
        the backward direction.
    """

    def __init__(self, input_dim: int, hidden_dim: int, recurrent_dropout: float = 0.0):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.recurrent_dropout = recurrent_dropout
        # 6 blocks: input gate, forget gate, output gate, highway gate, candidate, highway input map
        self.input_linear = nn.Linear(input_dim, 6 * hidden_dim, bias=False)
        self.state_linear = nn.Linear(hidden_dim, 5 * hidden_dim, bias=True)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        h = self.hidden_dim
        for k in range(6):
            nn.init.orthogonal_(self.input_linear.weight.data[k * h : (k + 1) * h])
        for k in range(5):
            nn.init.orthogonal_(self.state_linear.weight.data[k * h : (k + 1) * h])
        self.state_linear.bias.data.zero_()
        self.state_linear.bias.data[h : 2 * h].fill_(1.0)  # forget-gate bias 1

    def dropout_mask(self, x: torch.Tensor, batch: int) -> torch.Tensor | None:
        """The recurrent dropout mask (batch, H) of one forward call, or None (eval / no dropout)."""
        if not (self.training and self.recurrent_dropout > 0):
            return None
        keep = 1.0 - self.recurrent_dropout
        return torch.bernoulli(x.new_full((batch, self.hidden_dim), keep)) / keep

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        loops = time_loops(x)
        if loops is None:
            return self.reference_forward(x, mask)
        return self.time_major(x.transpose(0, 1), mask.t().contiguous(), loops).transpose(0, 1)

    def time_major(self, x: torch.Tensor, mask: torch.Tensor, loops: Any) -> torch.Tensor:
        """:meth:`forward` on time-major tensors (x (T, B, D), mask (T, B)) through ``loops``."""
        projected = self.input_linear(x)  # (T, B, 6H), one product for all steps
        drop = self.dropout_mask(x, x.shape[1])
        weight, bias = self.state_linear.weight, self.state_linear.bias
        device_type = x.device.type
        if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
            # The recurrence (and its memory cell, which accumulates over time) stays in the
            # parameters' dtype under autocast; the input product ran in the autocast dtype.
            with torch.autocast(device_type, enabled=False):
                return _HighwayLstmFunction.apply(projected.to(weight.dtype), mask, drop, weight, bias, loops)
        return _HighwayLstmFunction.apply(projected, mask, drop, weight, bias, loops)

    def reference_forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The plain autograd time loop in Python (the fallback and the tests' reference)."""
        batch, time, _ = x.shape
        h = self.hidden_dim
        projected = self.input_linear(x)  # (B, T, 6H)
        state = x.new_zeros(batch, h)
        cell = x.new_zeros(batch, h)
        drop = self.dropout_mask(x, batch)
        outputs = []
        maskf = mask.to(x.dtype).unsqueeze(-1)  # (B, T, 1)
        for t in range(time):
            recurrent = self.state_linear(state if drop is None else state * drop)  # (B, 5H)
            gates = projected[:, t, : 5 * h] + recurrent
            i, f, o, r = (torch.sigmoid(gates[:, k * h : (k + 1) * h]) for k in range(4))
            g = torch.tanh(gates[:, 4 * h :])
            new_cell = i * g + f * cell
            new_state = r * (o * torch.tanh(new_cell)) + (1 - r) * projected[:, t, 5 * h :]
            m = maskf[:, t]
            cell = m * new_cell + (1 - m) * cell
            state = m * new_state + (1 - m) * state
            outputs.append(new_state * m)
        return torch.stack(outputs, dim=1)


class AlternatingHighwayLstm(nn.Module):
    """Stack of :class:`HighwayLstmLayer` with alternating directions (layer 0 forward).

    Args:
        input_dim, hidden_dim: sizes; output is ``hidden_dim``.
        num_layers: depth (8 in He et al. 2017).
        recurrent_dropout: see :class:`HighwayLstmLayer` (0.1 in the paper config).

    Shape:
        forward(x (batch, time, input_dim), mask (batch, time) bool) -> (batch, time, hidden_dim).
    """

    def __init__(self, input_dim: int, hidden_dim: int, num_layers: int = 8, recurrent_dropout: float = 0.1):
        super().__init__()
        if input_dim < 1 or hidden_dim < 1 or num_layers < 1:
            raise ConfigError(f"alternating LSTM sizes must be positive: input {input_dim}, hidden {hidden_dim}, layers {num_layers}")
        if not 0.0 <= recurrent_dropout < 1.0:
            raise ConfigError(f"recurrent_dropout must be in [0, 1), got {recurrent_dropout}")
        dims = [input_dim] + [hidden_dim] * num_layers
        self.layers = nn.ModuleList(
            HighwayLstmLayer(dims[k], hidden_dim, recurrent_dropout) for k in range(num_layers)
        )
        self.output_dim = hidden_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        loops = time_loops(x)
        if loops is None:
            return self.reference_forward(x, mask)
        # time-major through the whole stack: one transpose in, one out
        mask_t = mask.t().contiguous()
        x = x.transpose(0, 1)
        index = None
        for k, layer in enumerate(self.layers):
            if k % 2 == 0:
                x = layer.time_major(x, mask_t, loops)
            else:
                if index is None:
                    index = _time_major_reversal(mask_t).unsqueeze(-1)
                x = torch.gather(x, 0, index.expand(-1, -1, x.shape[2]))
                x = layer.time_major(x, mask_t, loops)
                x = torch.gather(x, 0, index.expand_as(x))
        return x.transpose(0, 1)

    def reference_forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The stack over :meth:`HighwayLstmLayer.reference_forward` (the tests' reference)."""
        lengths = mask.sum(dim=1)
        for k, layer in enumerate(self.layers):
            if k % 2 == 0:
                x = layer.reference_forward(x, mask)
            else:
                x = reverse_padded(layer.reference_forward(reverse_padded(x, lengths), mask), lengths)
        return x
