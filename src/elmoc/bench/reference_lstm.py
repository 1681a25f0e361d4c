"""A plain per-time-step ELMo LSTM (the AllenNLP ``LstmCellWithProjection`` approach).

It computes the input *and* the recurrent products at every step and lets autograd
build the backward: the slow, obviously-correct baseline.  It reuses the parameters
of an :class:`elmoc.encoders.elmo_lstm.ElmoLstmEncoder`, so it serves twice:

* as the oracle in tests/encoders (outputs and gradients agree to 1e-5);
* as the baseline of the LSTM speed comparison in ``elmoc bench``.

Nothing here is used for training.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from elmoc.encoders.base import EncoderOutput
from elmoc.encoders.elmo_lstm import ElmoLstmEncoder, ProjectedLstmLayer


def reference_layer(
    layer: ProjectedLstmLayer,
    inputs: torch.Tensor,
    mask: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor] | None,
    dropout_mask: torch.Tensor | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One layer, one step at a time.

    Shape: inputs (batch, time, input); mask (batch, time) bool; returns outputs
    (batch, time, projection) and the final (h, c).
    """
    batch, steps, _ = inputs.shape
    cell = layer.cell_size
    if state is None:
        h = inputs.new_zeros(batch, layer.projection_size)
        c = inputs.new_zeros(batch, cell)
    else:
        h, c = state
    outputs = []
    for t in range(steps):
        gates = layer.input_linearity(inputs[:, t]) + layer.state_linearity(h)  # (B, 4C)
        i = torch.sigmoid(gates[:, :cell])
        f = torch.sigmoid(gates[:, cell : 2 * cell])
        g = torch.tanh(gates[:, 2 * cell : 3 * cell])
        o = torch.sigmoid(gates[:, 3 * cell :])
        memory = i * g + f * c
        if layer.cell_clip is not None:
            memory = torch.clamp(memory, -layer.cell_clip, layer.cell_clip)
        projected = layer.state_projection(o * torch.tanh(memory))
        if layer.proj_clip is not None:
            projected = torch.clamp(projected, -layer.proj_clip, layer.proj_clip)
        if layer.layer_norm is not None:
            projected = F.layer_norm(projected, (layer.projection_size,), layer.layer_norm.weight,
                                     layer.layer_norm.bias, layer.layer_norm.eps)
        if dropout_mask is not None:
            projected = projected * dropout_mask
        m = mask[:, t].unsqueeze(-1)
        h = torch.where(m, projected, h)
        c = torch.where(m, memory, c)
        outputs.append(torch.where(m, projected, torch.zeros_like(projected)))
    return torch.stack(outputs, dim=1), (h, c)


def reference_forward(
    encoder: ElmoLstmEncoder,
    inputs: torch.Tensor,
    mask: torch.Tensor,
    state: list | None = None,
    dropout_masks: list[torch.Tensor | None] | None = None,
) -> EncoderOutput:
    """The whole stack with ``encoder``'s parameters, step by step.

    ``dropout_masks``: one (batch, projection) mask per layer (or None each); pass the
    masks the optimized encoder drew to compare training-mode outputs.
    """
    x = inputs
    if encoder.input_projection is not None:
        x = encoder.input_projection(x)
    if encoder.input_norm is not None:
        x = encoder.input_norm(x)
    x = x * mask.unsqueeze(-1).to(x.dtype)
    layers = [x]
    new_state = []
    for index, layer in enumerate(encoder.lstm_layers):
        dm = None if dropout_masks is None else dropout_masks[index]
        out, layer_state = reference_layer(layer, x, mask, None if state is None else state[index], dm)
        if encoder.residual and index >= 1:
            out = out + x
        layers.append(out)
        new_state.append(layer_state)
        x = out
    return EncoderOutput(output=x, layers=layers, state=new_state)
