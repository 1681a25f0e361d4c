"""Contract of sequence encoders (one direction of a bi-LM).

``encoder(inputs, mask, state)`` returns an :class:`EncoderOutput`.  ``layers``
lists every representation a downstream model may mix: layer 0 is the encoder's
own view of the token input (for the ELMo LSTM: the projected, layer-normed
input), then one entry per layer.  ``state`` is whatever the encoder carries to
the next window (``None`` for encoders that carry nothing); the trainer only
passes it back and detaches it.  :func:`map_state` is the one walk over such a
state (tensors nested in lists and tuples) that everything reshaping it uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn


def map_state(fn: Callable[..., torch.Tensor], state: Any, *others: Any) -> Any:
    """``fn`` applied to every tensor of a carried state (and the tensors at the same
    places of ``others``, states of the same structure), the nesting of lists and
    tuples kept; None stays None.  E.g. ``map_state(lambda t: t[rows], state)``."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return fn(state, *others)
    if isinstance(state, (list, tuple)):
        return type(state)(map_state(fn, *parts) for parts in zip(state, *others, strict=True))
    raise TypeError(f"an encoder state holds tensors in lists and tuples, not {type(state)!r}")


@dataclass
class EncoderOutput:
    """Shape: output (batch, time, output_dim); each of layers (batch, time, output_dim)."""

    output: torch.Tensor
    layers: list[torch.Tensor]
    state: Any = None


class Encoder(nn.Module):
    output_dim: int
    num_layers: int  # number of entries in EncoderOutput.layers
    # True: forward also takes ``starts``, bool (batch, time), True where the token is <s>
    # (lm.sentence_starts passes it; TUPE's untying in a bidirectional Transformer reads it)
    reads_sentence_starts = False
    # True: forward also takes ``mix_embedded``, a function applied to the encoder's own model-width
    # input (a Transformer's projected input plus positions) before its first layer (TNF's notes,
    # elmoc.nn.notes, place: model); False: the encoder reads the input layer's vectors as they are
    mixes_embedded = False

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, state: Any = None) -> EncoderOutput:
        raise NotImplementedError

    @staticmethod
    def detach_state(state: Any) -> Any:
        """Cut the graph of a carried state (truncated BPTT between windows)."""
        return map_state(torch.Tensor.detach, state)
