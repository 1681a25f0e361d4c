"""Building blocks shared by the task models: a masked biLSTM, masked softmax, maxout.

Thin wrappers over torch: ``nn.LSTM`` with packing so padding never leaks into
the recurrence, and the maxout feedforward of BCN (torch has none).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from elmoc.errors import ConfigError


class MaskedLSTM(nn.Module):
    """(Bi)LSTM over padded batches.

    Args:
        input_dim, hidden_dim: sizes; the output is ``2 * hidden_dim`` when bidirectional.
        num_layers: stacked layers; dropout: between layers (torch semantics).

    Shape:
        x: (batch, time, input_dim); mask: (batch, time) bool, True for real tokens
        (every row needs at least one).  Returns (batch, time, output_dim), zero at padding.
    """

    def __init__(self, input_dim: int, hidden_dim: int, num_layers: int = 1, bidirectional: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        if input_dim < 1 or hidden_dim < 1 or num_layers < 1:
            raise ConfigError(f"LSTM sizes must be positive, got input {input_dim}, hidden {hidden_dim}, layers {num_layers}")
        self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers=num_layers, batch_first=True,
                            bidirectional=bidirectional, dropout=dropout if num_layers > 1 else 0.0)
        self.output_dim = hidden_dim * (2 if bidirectional else 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = mask.sum(dim=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out


def masked_softmax(logits: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` ignoring masked-out entries; a fully masked slice gives zeros.

    Shape: ``mask`` (bool) broadcastable to ``logits``.
    """
    logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    probs = torch.softmax(logits, dim=dim)
    return probs * mask.to(probs.dtype)


class Maxout(nn.Module):
    """Stack of maxout layers: ``Linear(in, out * pool)`` -> max over pool -> dropout.

    Args:
        input_dim: size of the input.
        output_dims: output size of each layer (the last one is the number of classes for BCN).
        pool_size: maxout pieces per unit.
        dropouts: dropout after each layer (same length as ``output_dims``).

    Shape: (..., input_dim) -> (..., output_dims[-1]).
    """

    def __init__(self, input_dim: int, output_dims: Sequence[int], pool_size: int = 4,
                 dropouts: Sequence[float] | None = None):
        super().__init__()
        output_dims = list(output_dims)
        dropouts = [0.0] * len(output_dims) if dropouts is None else list(dropouts)
        if not output_dims or len(dropouts) != len(output_dims):
            raise ConfigError(f"maxout: give one dropout per layer; got dims {output_dims}, dropouts {dropouts}")
        if pool_size < 1:
            raise ConfigError(f"maxout pool_size must be >= 1, got {pool_size}")
        self.pool_size = pool_size
        dims = [input_dim] + output_dims
        self.linears = nn.ModuleList(nn.Linear(dims[i], dims[i + 1] * pool_size) for i in range(len(output_dims)))
        self.dropouts = nn.ModuleList(nn.Dropout(p) for p in dropouts)
        self.output_dims = output_dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for linear, dropout, dim in zip(self.linears, self.dropouts, self.output_dims):
            x = linear(x).view(*x.shape[:-1], dim, self.pool_size).max(dim=-1).values
            x = dropout(x)
        return x


class VariationalDropout(nn.Dropout):
    """Dropout with one mask per sequence, shared over time (AllenNLP's InputVariationalDropout).

    Shape: (batch, time, dim) -> same.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1.0 - self.p) / (1.0 - self.p)
        return x * keep


def masked_max_mean(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Max and mean over time of the unmasked steps.

    Shape: x (batch, time, dim); mask (batch, time) bool; returns two (batch, dim).
    """
    m = mask.unsqueeze(-1)
    maximum = x.masked_fill(~m, -1e7).max(dim=1).values
    mean = (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
    return maximum, mean
