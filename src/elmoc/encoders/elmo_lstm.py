"""The ELMo(-C) LSTM stack: LSTM cells with projection, clipping and LayerNorm.

Exactly the recipe of paper-spec 1.1 (the ELMo-C training LSTM):

1. token vectors ``(batch, time, input_dim)`` -> ``Linear(input_dim -> projection_size,
   bias)`` -> ``LayerNorm`` when the sizes differ (layer 0 of the output);
2. ``num_layers`` LSTM layers with projection (gates i, f, g, o; cell clip; projection
   without bias; projection clip; LayerNorm of h inside the recurrence; variational
   recurrent dropout on the output and carried state);
3. residual connections from layer 1 upward (never from the token input into layer 0).

With ``layer_norm=False`` neither LayerNorm exists (original ELMo / bilm-tf).

Why hand-written and not ``torch.nn.LSTM``: ``nn.LSTM``'s ``proj_size`` has no cell or
projection clipping, no LayerNorm inside the recurrence and no variational dropout.
The time loop lives in :mod:`elmoc.encoders.projected_lstm`, which computes the input
product for all time steps in one matrix multiply and has a hand-written backward.
"""
from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from elmoc.config import check_choice
from elmoc.encoders.base import Encoder, EncoderOutput
from elmoc.encoders.fused_lstm import FUSED_CELL
from elmoc.encoders.projected_lstm import projected_lstm_layer
from elmoc.errors import ConfigError
from elmoc.nn.host_copy import to_host
from elmoc.registry import register

logger = logging.getLogger(__name__)

LayerState = tuple[torch.Tensor, torch.Tensor]


def block_orthogonal_(weight: torch.Tensor, block_rows: int, block_cols: int, gain: float = 1.0) -> None:
    """Orthogonal init of each ``(block_rows, block_cols)`` block of ``weight`` (in place).

    Shape: weight (rows, cols); both must be multiples of the block sizes.
    """
    rows, cols = weight.shape
    if weight.is_meta:  # sizing a model on the meta device: nothing to initialize
        return
    if rows % block_rows or cols % block_cols:
        raise ValueError(f"weight {tuple(weight.shape)} is not a grid of ({block_rows}, {block_cols}) blocks")
    with torch.no_grad():
        for r in range(0, rows, block_rows):
            for c in range(0, cols, block_cols):
                block = torch.empty(block_rows, block_cols, dtype=weight.dtype)
                nn.init.orthogonal_(block, gain=gain)
                weight[r : r + block_rows, c : c + block_cols] = block


class ProjectedLstmLayer(nn.Module):
    """One LSTM layer with projection (``LstmCellWithProjection`` of spec 1.1).

    Parameters: ``input_linearity`` ``(4*cell, input)`` without bias,
    ``state_linearity`` ``(4*cell, projection)`` with bias (gate order i, f, g, o),
    ``state_projection`` ``(projection, cell)`` without bias and, with ``layer_norm``,
    ``LayerNorm(projection)`` applied to the clipped projection inside the recurrence.
    """

    def __init__(
        self,
        input_size: int,
        cell_size: int,
        projection_size: int,
        cell_clip: float | None,
        proj_clip: float | None,
        layer_norm: bool,
        fused_cell: str | None = None,
    ):
        super().__init__()
        self.fused_cell = fused_cell  # a value of fused_lstm.FUSED_CELL: None, "loops" or "layer"
        self.input_size = input_size
        self.cell_size = cell_size
        self.projection_size = projection_size
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.input_linearity = nn.Linear(input_size, 4 * cell_size, bias=False)
        self.state_linearity = nn.Linear(projection_size, 4 * cell_size, bias=True)
        self.state_projection = nn.Linear(cell_size, projection_size, bias=False)
        self.layer_norm = nn.LayerNorm(projection_size) if layer_norm else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Block-orthogonal gate weights, zero bias with forget bias 1 (spec 1.1)."""
        block_orthogonal_(self.input_linearity.weight, self.cell_size, self.input_size)
        block_orthogonal_(self.state_linearity.weight, self.cell_size, self.projection_size)
        if self.state_linearity.bias.is_meta:
            return
        with torch.no_grad():
            self.state_linearity.bias.zero_()
            self.state_linearity.bias[self.cell_size : 2 * self.cell_size] = 1.0

    def forward(
        self,
        inputs: torch.Tensor,
        mask: torch.Tensor,
        state: LayerState | None,
        dropout_mask: torch.Tensor | None,
        all_valid: bool | None = None,
    ) -> tuple[torch.Tensor, LayerState]:
        """Run the layer over a window.

        Shape:
            inputs: (batch, time, input_size); mask: (batch, time) bool;
            state: (h (batch, projection), c (batch, cell)) or None for zeros;
            dropout_mask: (batch, projection) scaled keep mask, or None.
            all_valid: ``mask.all()`` decided by the caller on the host (None: read from
            ``mask``, a host sync on a GPU).
            returns: outputs (batch, time, projection), zero where mask is False,
            and the final (h, c).  Masked steps leave (h, c) unchanged.
        """
        batch = inputs.shape[0]
        if state is None:
            h0 = inputs.new_zeros(batch, self.projection_size)
            c0 = inputs.new_zeros(batch, self.cell_size)
        else:
            h0, c0 = state
        ln_weight = self.layer_norm.weight if self.layer_norm is not None else None
        ln_bias = self.layer_norm.bias if self.layer_norm is not None else None
        return projected_lstm_layer(
            inputs,
            mask,
            h0,
            c0,
            self.input_linearity.weight,
            self.state_linearity.weight,
            self.state_linearity.bias,
            self.state_projection.weight,
            ln_weight,
            ln_bias,
            dropout_mask,
            self.cell_clip,
            self.proj_clip,
            all_valid,
            self.fused_cell or False,
        )

    def extra_repr(self) -> str:
        return (
            f"input={self.input_size}, cell={self.cell_size}, projection={self.projection_size}, "
            f"cell_clip={self.cell_clip}, proj_clip={self.proj_clip}"
        )


@register("encoder", "elmo_lstm")
class ElmoLstmEncoder(Encoder):
    """Unidirectional ELMo LSTM stack (one direction of the bi-LM).

    Args:
        input_dim: size of the token vectors (from the input layer; set by the builder).
        num_layers: number of LSTM layers (2 in ELMo and ELMo-C).
        cell_size: LSTM memory size (4096).
        projection_size: hidden-state / output size (512).
        cell_clip: clamp of the memory cell to +-value; None disables (3.0).
        proj_clip: clamp of the projected state to +-value; None disables (3.0).
        layer_norm: LayerNorm on the projected input and on h inside the recurrence
            (ELMo-C: True; original ELMo: False).
        recurrent_dropout: probability of the variational dropout on each layer's
            output and carried state, drawn once per forward per layer (0.1).
        input_projection: add ``Linear(input_dim -> projection_size)`` (+ LayerNorm);
            None means "exactly when input_dim != projection_size" (the paper).
        residual: add each layer's input to its output from layer 1 upward.
        fused_cell: ``true``: run each layer's time loops compiled by ``torch.compile`` (issue 44:
            one generated kernel for the pointwise part of a step, forward and backward; on
            CUDA, CUDA graphs over the window) inside the hand-written autograd function;
            ``layer``: compile each layer whole (input product and time loop) with the backward
            autograd derives, which on CUDA keeps the graphs' saved tensors and the next layer's
            input in the graph pool instead of copying them (``encoders/fused_lstm.py``).
            ``false`` by default: the first window of each shape compiles (tens of seconds), and
            it needs a C++ compiler (CPU) or Triton (CUDA).

    Shape:
        inputs: (batch, time, input_dim); mask: (batch, time) bool, True = real token.
        output: (batch, time, projection_size); layers: ``num_layers + 1`` tensors of
        (batch, time, projection_size): [token view, layer 1, ..., top layer], zero
        where mask is False.  state: list of per-layer (h (batch, projection),
        c (batch, cell)).
    """

    OPTION_RANGES = {"num_layers": "int > 0", "cell_size": "int > 0", "projection_size": "int > 0",
                     "cell_clip": "> 0 or null", "proj_clip": "> 0 or null", "recurrent_dropout": "[0, 1)"}

    def __init__(
        self,
        input_dim: int,
        num_layers: int = 2,
        cell_size: int = 4096,
        projection_size: int = 512,
        cell_clip: float | None = 3.0,
        proj_clip: float | None = 3.0,
        layer_norm: bool = True,
        recurrent_dropout: float = 0.1,
        input_projection: bool | None = None,
        residual: bool = True,
        fused_cell: bool | str = False,
    ):
        super().__init__()
        for name, value in (("input_dim", input_dim), ("num_layers", num_layers), ("cell_size", cell_size),
                            ("projection_size", projection_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"encoder 'elmo_lstm': {name} must be a positive integer, got {value!r}")
        for name, value in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ConfigError(
                    f"encoder 'elmo_lstm': {name} must be a positive number or null (no clipping), got {value!r}"
                )
        # YAML's true/false as the names FUSED_CELL lists them; anything else (a typo, 1, "yes") refused in one line
        choice = str(fused_cell).lower() if isinstance(fused_cell, bool) else fused_cell
        check_choice(choice, FUSED_CELL, "encoder 'elmo_lstm' fused_cell")
        fused_cell = FUSED_CELL[choice]
        if not isinstance(recurrent_dropout, (int, float)) or not 0.0 <= recurrent_dropout < 1.0:
            raise ConfigError(
                f"encoder 'elmo_lstm': recurrent_dropout must be in [0, 1), got {recurrent_dropout!r}"
            )
        if input_projection is None:
            input_projection = input_dim != projection_size
        if not input_projection and input_dim != projection_size:
            raise ConfigError(
                f"encoder 'elmo_lstm': input_dim {input_dim} != projection_size {projection_size} needs the "
                "input projection; set input_projection: true (or null), or make the sizes equal"
            )
        self.input_dim = input_dim
        self.cell_size = cell_size
        self.projection_size = projection_size
        self.recurrent_dropout = float(recurrent_dropout)
        self.residual = residual
        self.output_dim = projection_size
        self.num_layers = num_layers + 1
        self.input_projection = nn.Linear(input_dim, projection_size) if input_projection else None
        self.input_norm = nn.LayerNorm(projection_size) if (input_projection and layer_norm) else None
        self.lstm_layers = nn.ModuleList(
            ProjectedLstmLayer(
                projection_size,
                cell_size,
                projection_size,
                None if cell_clip is None else float(cell_clip),
                None if proj_clip is None else float(proj_clip),
                layer_norm,
                fused_cell,
            )
            for _ in range(num_layers)
        )

    def _dropout_mask(self, batch: int, like: torch.Tensor) -> torch.Tensor | None:
        """Variational keep mask (batch, projection) scaled by 1/keep; None when not training."""
        if not self.training or self.recurrent_dropout == 0.0:
            return None
        keep = 1.0 - self.recurrent_dropout
        # at least float32: a bf16 layer output (bf16 autocast) must not round the 1/keep scale
        dtype = like.dtype if like.dtype.itemsize >= 4 else torch.float32
        mask = torch.empty(batch, self.projection_size, dtype=dtype, device=like.device).bernoulli_(keep)
        return mask.div_(keep)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, state: Any = None) -> EncoderOutput:
        if inputs.dim() != 3 or inputs.shape[-1] != self.input_dim:
            raise ValueError(f"elmo_lstm expects (batch, time, {self.input_dim}) inputs, got {tuple(inputs.shape)}")
        if mask.shape != inputs.shape[:2] or mask.dtype != torch.bool:
            raise ValueError(f"mask must be bool (batch, time) = {tuple(inputs.shape[:2])}, got "
                             f"{mask.dtype} {tuple(mask.shape)}")
        if state is not None and len(state) != len(self.lstm_layers):
            raise ValueError(f"state has {len(state)} layers, the encoder {len(self.lstm_layers)}")
        x = inputs
        if self.input_projection is not None:
            x = self.input_projection(x)
        if self.input_norm is not None:
            x = self.input_norm(x)
        x = x * mask.unsqueeze(-1).to(x.dtype)  # (B, T, P), zero at masked positions
        layers = [x]
        new_state: list[LayerState] = []
        # padding or not, decided once per window on the mask's CPU original (to_device keeps
        # one), not per layer on the device, where reading it makes the host wait every step
        all_valid = bool(to_host(mask).all())
        for index, layer in enumerate(self.lstm_layers):
            out, layer_state = layer(x, mask, None if state is None else state[index],
                                     self._dropout_mask(x.shape[0], x), all_valid)
            if self.residual and index >= 1:
                out = out + x
            layers.append(out)
            new_state.append(layer_state)
            x = out
        return EncoderOutput(output=x, layers=layers, state=new_state)

    def extra_repr(self) -> str:
        return f"recurrent_dropout={self.recurrent_dropout}, residual={self.residual}"
