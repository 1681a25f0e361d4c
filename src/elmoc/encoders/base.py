"""Contract of sequence encoders (one direction of a bi-LM).

``encoder(inputs, mask, state)`` returns an :class:`EncoderOutput`.  ``layers``
lists every representation a downstream model may mix: layer 0 is the encoder's
own view of the token input (for the ELMo LSTM: the projected, layer-normed
input), then one entry per layer.  ``state`` is whatever the encoder carries to
the next window (``None`` for encoders that carry nothing); the trainer only
passes it back and detaches it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class EncoderOutput:
    """Shape: output (batch, time, output_dim); each of layers (batch, time, output_dim)."""

    output: torch.Tensor
    layers: list[torch.Tensor]
    state: Any = None


class Encoder(nn.Module):
    output_dim: int
    num_layers: int  # number of entries in EncoderOutput.layers

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, state: Any = None) -> EncoderOutput:
        raise NotImplementedError

    @staticmethod
    def detach_state(state: Any) -> Any:
        """Cut the graph of a carried state (truncated BPTT between windows)."""
        if state is None:
            return None
        if isinstance(state, torch.Tensor):
            return state.detach()
        if isinstance(state, (list, tuple)):
            return type(state)(Encoder.detach_state(s) for s in state)
        raise TypeError(f"cannot detach state of type {type(state)!r}")
