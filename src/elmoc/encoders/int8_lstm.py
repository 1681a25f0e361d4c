"""An inference-only projected LSTM layer whose three matrix products are int8
(issue 24.3: ``elmoc compress --format int8``).

:class:`~elmoc.encoders.elmo_lstm.ProjectedLstmLayer` hands its weight matrices to a
time loop (C++ on the CPU) that multiplies them in float32; a dynamically quantized
``Linear`` cannot enter that loop.  :class:`Int8ProjectedLstmLayer` keeps the same
three ``Linear`` modules and *calls* them, so that
:func:`torch.ao.quantization.quantize_dynamic` can replace each with torch's
``DynamicQuantizedLinear`` (int8 weights with one scale per output row, activations
quantized per call, fbgemm/x86 kernels); the time loop then runs in Python:

- the input product ``x W_in^T`` for all time steps in one quantized call;
- per step, the recurrent product ``h W_s^T + b`` and the projection ``h~ W_P^T``,
  one quantized call each; the gates, clips and LayerNorm stay float32.

Same math as the float layer (gates i, f, g, o; cell clip; projection clip;
LayerNorm of the projection; masked steps keep the state; outputs zero there), no
dropout and no backward: it exists only in a compressed model directory.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from elmoc.encoders.elmo_lstm import LayerState, ProjectedLstmLayer


class Int8ProjectedLstmLayer(nn.Module):
    """A :class:`ProjectedLstmLayer` run step by step through its ``Linear`` modules.

    Built with :meth:`from_float`; the caller then quantizes its ``input_linearity``,
    ``state_linearity`` and ``state_projection`` (any module with a ``Linear``'s call
    signature works, float ones too, which is how the tests check the loop).

    Shape: as :meth:`ProjectedLstmLayer.forward`.
    """

    def __init__(self, input_linearity: nn.Module, state_linearity: nn.Module, state_projection: nn.Module,
                 layer_norm: nn.LayerNorm | None, cell_size: int, projection_size: int,
                 cell_clip: float | None, proj_clip: float | None):
        super().__init__()
        self.input_linearity = input_linearity
        self.state_linearity = state_linearity
        self.state_projection = state_projection
        self.layer_norm = layer_norm
        self.cell_size = cell_size
        self.projection_size = projection_size
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip

    @classmethod
    def from_float(cls, layer: ProjectedLstmLayer) -> "Int8ProjectedLstmLayer":
        """The same weights (the modules themselves, not copies) in the step-by-step layer."""
        return cls(layer.input_linearity, layer.state_linearity, layer.state_projection, layer.layer_norm,
                   layer.cell_size, layer.projection_size, layer.cell_clip, layer.proj_clip)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, state: LayerState | None,
                dropout_mask: torch.Tensor | None, all_valid: bool | None = None) -> tuple[torch.Tensor, LayerState]:
        """Run the layer over a window (inference only).

        Shape:
            inputs: (batch, time, input_size); mask: (batch, time) bool;
            state: (h (batch, projection), c (batch, cell)) or None for zeros;
            dropout_mask: must be None (an int8 layer does not train);
            all_valid: ``mask.all()`` when known (None: read from ``mask``).
            returns: outputs (batch, time, projection), zero where mask is False,
            and the final (h, c).  Masked steps leave (h, c) unchanged.
        """
        if dropout_mask is not None or torch.is_grad_enabled() and inputs.requires_grad:
            raise RuntimeError("an int8 LSTM layer runs inference only: call .eval() and run under torch.no_grad()")
        batch, steps, _ = inputs.shape
        cell, proj = self.cell_size, self.projection_size
        if state is None:
            h = inputs.new_zeros(batch, proj)
            c = inputs.new_zeros(batch, cell)
        else:
            h, c = state
        if all_valid is None:
            all_valid = bool(mask.all())
        input_gates = self.input_linearity(inputs)  # (B, T, 4C): i, f, g, o
        outputs = inputs.new_zeros(batch, steps, proj)
        for t in range(steps):
            z = input_gates[:, t] + self.state_linearity(h)  # (B, 4C), bias included
            i = torch.sigmoid(z[:, :cell])
            f = torch.sigmoid(z[:, cell : 2 * cell])
            g = torch.tanh(z[:, 2 * cell : 3 * cell])
            o = torch.sigmoid(z[:, 3 * cell :])
            c_new = i * g + f * c  # (B, C)
            if self.cell_clip is not None:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            p = self.state_projection(o * torch.tanh(c_new))  # (B, P)
            if self.proj_clip is not None:
                p = p.clamp(-self.proj_clip, self.proj_clip)
            if self.layer_norm is not None:
                p = F.layer_norm(p, (proj,), self.layer_norm.weight, self.layer_norm.bias, self.layer_norm.eps)
            if all_valid:
                h, c = p, c_new
                outputs[:, t] = p
            else:
                m = mask[:, t].unsqueeze(-1)  # (B, 1)
                h = torch.where(m, p, h)
                c = torch.where(m, c_new, c)
                outputs[:, t] = p * m
        return outputs, (h, c)

    def extra_repr(self) -> str:
        return (f"cell={self.cell_size}, projection={self.projection_size}, cell_clip={self.cell_clip}, "
                f"proj_clip={self.proj_clip}, inference only")
