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
per-sequence recurrent dropout; the time loop runs in Python, which is fine for
the task sizes here.
"""
from __future__ import annotations

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.nn.masking import reverse_padded


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, time, _ = x.shape
        h = self.hidden_dim
        projected = self.input_linear(x)  # (B, T, 6H)
        state = x.new_zeros(batch, h)
        cell = x.new_zeros(batch, h)
        drop = None
        if self.training and self.recurrent_dropout > 0:
            keep = 1.0 - self.recurrent_dropout
            drop = torch.bernoulli(x.new_full((batch, h), keep)) / keep
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
        lengths = mask.sum(dim=1)
        for k, layer in enumerate(self.layers):
            if k % 2 == 0:
                x = layer(x, mask)
            else:
                x = reverse_padded(layer(reverse_padded(x, lengths), mask), lengths)
        return x
