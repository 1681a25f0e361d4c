"""Plain stacked LSTM encoder (Table 5 "LSTM" = 1 x 2048, "LSTMx2" = 2 x 2048).

A stack of single-layer ``torch.nn.LSTM`` modules (cuDNN / oneDNN kernels), one per
layer so that every layer's sequence is available to downstream models.  Nothing
is added to the paper's baseline: no projection, no clipping, no LayerNorm.

Masks: a right-padded batch is run as a packed sequence, so padding never updates
the state (a padded batch equals per-sentence runs); outputs are zero at padding.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from elmoc.encoders.base import Encoder, EncoderOutput
from elmoc.errors import ConfigError
from elmoc.nn.host_copy import to_host
from elmoc.registry import register


def tile_to_width(x: torch.Tensor, width: int) -> torch.Tensor:
    """Repeat the last dimension of ``x`` and cut it to ``width`` (spec 5.4 ``include_embedding``).

    Shape: x (batch, time, dim) -> (batch, time, width).
    """
    reps = -(-width // x.shape[-1])
    return x.repeat(*([1] * (x.dim() - 1)), reps)[..., :width]


@register("encoder", "lstm")
class LstmEncoder(Encoder):
    """Stacked unidirectional ``nn.LSTM``.

    Args:
        input_dim: token vector size (set by the builder).
        hidden_size: LSTM hidden size (2048 in Table 5).
        num_layers: number of layers (1 = "LSTM", 2 = "LSTMx2").
        dropout: dropout between layers (training only).

    Shape:
        inputs (batch, time, input_dim); mask (batch, time) bool, True on a prefix of
        each row (right padding).  output (batch, time, hidden_size); layers:
        [input tiled and cut to hidden_size, layer 1, ..., layer num_layers];
        state: list of per-layer (h (batch, hidden), c (batch, hidden)).
    """

    OPTION_RANGES = {"hidden_size": "int > 0", "num_layers": "int > 0", "dropout": "[0, 1)"}

    def __init__(self, input_dim: int, hidden_size: int = 2048, num_layers: int = 1, dropout: float = 0.0):
        super().__init__()
        for name, value in (("input_dim", input_dim), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"encoder 'lstm': {name} must be a positive integer, got {value!r}")
        if not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ConfigError(f"encoder 'lstm': dropout must be in [0, 1), got {dropout!r}")
        self.input_dim = input_dim
        self.hidden_size = hidden_size
        self.output_dim = hidden_size
        self.num_layers = num_layers + 1
        self.rnns = nn.ModuleList(
            nn.LSTM(input_dim if i == 0 else hidden_size, hidden_size, batch_first=True) for i in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, state: Any = None) -> EncoderOutput:
        if inputs.dim() != 3 or inputs.shape[-1] != self.input_dim:
            raise ValueError(f"lstm expects (batch, time, {self.input_dim}) inputs, got {tuple(inputs.shape)}")
        if mask.shape != inputs.shape[:2] or mask.dtype != torch.bool:
            raise ValueError(f"mask must be bool (batch, time) = {tuple(inputs.shape[:2])}")
        # Padding, lengths and the prefix check are decided on the mask's CPU original (a batch
        # moved by to_device has one): pack_padded_sequence wants CPU lengths anyway, and a
        # device read here would make the host wait for the GPU every step.
        host_mask = to_host(mask)
        host_lengths = host_mask.sum(1)
        all_valid = bool(host_mask.all())
        if not all_valid:
            prefix = torch.arange(host_mask.shape[1])[None, :] < host_lengths[:, None]
            if not torch.equal(prefix, host_mask):
                raise ValueError("encoder 'lstm' needs right-padded masks (True on a prefix of each row)")
            empty = host_lengths == 0
            any_empty = bool(empty.any())
            empty = empty.to(inputs.device, non_blocking=True)[None, :, None]
        maskf = mask.unsqueeze(-1).to(inputs.dtype)
        layers = [tile_to_width(inputs, self.hidden_size) * maskf]
        new_state = []
        x = inputs
        for index, rnn in enumerate(self.rnns):
            if index > 0:
                x = self.dropout(x)
            hc = None if state is None else tuple(s.unsqueeze(0).contiguous() for s in state[index])
            if all_valid:
                out, (h, c) = rnn(x, hc)
            else:
                # Zero-length rows keep their initial state: run them with length 1, then restore.
                # (Padded windows only, the end of a shard: pack_padded_sequence moves its sort
                # order to the device with a blocking copy, one host sync per layer there.)
                packed = pack_padded_sequence(x, host_lengths.clamp(min=1), batch_first=True, enforce_sorted=False)
                out, (h, c) = rnn(packed, hc)
                out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
                if any_empty:
                    h0 = torch.zeros_like(h) if hc is None else hc[0]
                    c0 = torch.zeros_like(c) if hc is None else hc[1]
                    h, c = torch.where(empty, h0, h), torch.where(empty, c0, c)
                out = out * maskf
            layers.append(out)
            new_state.append((h[0], c[0]))
            x = out
        return EncoderOutput(output=x, layers=layers, state=new_state)
