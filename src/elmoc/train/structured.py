"""Structured pruning: whole units removed, so the matrices (and the spec's sizes) shrink.

Removable units, by encoder class (asked of the built encoder, never of a preset's name):

- :class:`~elmoc.encoders.elmo_lstm.ElmoLstmEncoder`: LSTM memory cells.  Cell ``j`` of a
  layer is row ``j`` of each of the four gate blocks of ``input_linearity`` ``(4*cell,
  input)`` and ``state_linearity`` ``(4*cell, projection)`` (and its bias), and column ``j``
  of ``state_projection`` ``(projection, cell)``; ``encoder.cell_size`` becomes the number
  kept.  The projection (the layer's output, residual and feature width) stays, so the
  features keep their width and every consumer reads the smaller model unchanged.
- :class:`~elmoc.encoders.transformer.TransformerEncoder`: feed-forward units (row ``j`` of
  ``linear1`` and its bias, column ``j`` of ``linear2``); ``encoder.d_ff`` becomes the number
  kept.  Attention heads stay: ``nn.MultiheadAttention`` ties the head count to ``d_model``
  (heads x head width), so a head cannot leave without a different attention block.

A unit's score is the norm of the weights into it times the norm of the weights out of it
(a unit with either near zero contributes little); each layer keeps its ``keep`` best, in
their original order.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch import nn

from elmoc.encoders.base import Encoder
from elmoc.encoders.elmo_lstm import ElmoLstmEncoder
from elmoc.encoders.transformer import TransformerEncoder
from elmoc.errors import ConfigError

State = dict[str, torch.Tensor]


def best_units(incoming: torch.Tensor, outgoing: torch.Tensor, keep: int) -> torch.Tensor:
    """Indices (ascending) of the ``keep`` units with the largest ``incoming * outgoing``.

    Shape: incoming, outgoing (units,) norms; returns long (keep,).
    """
    return torch.topk(incoming * outgoing, keep).indices.sort().values


def _lstm_cells(prefix: str, encoder: ElmoLstmEncoder, keep: int, state: State) -> None:
    cells = encoder.cell_size
    for i in range(len(encoder.lstm_layers)):
        base = f"{prefix}lstm_layers.{i}."
        w_in, w_st = state[base + "input_linearity.weight"], state[base + "state_linearity.weight"]
        w_proj = state[base + "state_projection.weight"]  # (projection, cell)
        into = (w_in.view(4, cells, -1).square().sum((0, 2)) + w_st.view(4, cells, -1).square().sum((0, 2))).sqrt()
        kept = best_units(into, w_proj.norm(dim=0), keep)
        rows = torch.cat([gate * cells + kept for gate in range(4)])  # the kept cells in each gate block
        for name in ("input_linearity.weight", "state_linearity.weight", "state_linearity.bias"):
            state[base + name] = state[base + name][rows].clone()
        state[base + "state_projection.weight"] = w_proj[:, kept].clone()


def _ffn_units(prefix: str, encoder: TransformerEncoder, keep: int, state: State) -> None:
    for i in range(len(encoder.blocks)):
        base = f"{prefix}blocks.{i}."
        w1, w2 = state[base + "linear1.weight"], state[base + "linear2.weight"]  # (d_ff, d_model), (d_model, d_ff)
        kept = best_units(w1.norm(dim=1), w2.norm(dim=0), keep)
        state[base + "linear1.weight"] = w1[kept].clone()
        state[base + "linear1.bias"] = state[base + "linear1.bias"][kept].clone()
        state[base + "linear2.weight"] = w2[:, kept].clone()


# encoder class -> (the spec key its units count, its size, the function removing them)
UNITS: dict[type, tuple[str, Callable[[Encoder], int], Callable[[str, Any, int, State], None]]] = {
    ElmoLstmEncoder: ("cell_size", lambda e: e.cell_size, _lstm_cells),
    TransformerEncoder: ("d_ff", lambda e: e.blocks[0].linear1.out_features, _ffn_units),
}


def _units_of(encoder: Encoder) -> tuple[str, Callable[[Encoder], int], Callable[[str, Any, int, State], None]]:
    for cls, units in UNITS.items():
        if isinstance(encoder, cls):
            return units
    raise ConfigError(f"structured pruning removes units of {', '.join(c.__name__ for c in UNITS)} encoders; "
                      f"this model's is a {type(encoder).__name__}: use prune.method: magnitude")


def unit_count(model: nn.Module) -> tuple[str, int]:
    """(spec key, size) of the removable units of ``model``'s encoder(s) (``cell_size`` of an
    ELMo LSTM, ``d_ff`` of a Transformer); every encoder of a model has the same spec."""
    encoder = next(m for m in model.modules() if isinstance(m, Encoder))
    key, size, _ = _units_of(encoder)
    return key, size(encoder)


def shrink(model: nn.Module, spec: dict[str, Any], keep: int) -> tuple[dict[str, Any], State]:
    """The spec and state dict of ``model`` with each encoder layer cut to its ``keep`` best
    units (:func:`unit_count` says which units); ``model`` itself is left as it is.

    Returns ``(spec, state)``: a copy of ``spec`` whose ``encoder`` names the smaller size,
    and a state dict that ``LanguageModel.from_spec(spec)`` (or the joint / masked model)
    loads as is.
    """
    key, size = unit_count(model)
    if not 1 <= keep <= size:
        raise ValueError(f"keep must be in [1, {size}], got {keep}")
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for prefix, module in model.named_modules():
        if isinstance(module, Encoder):
            _units_of(module)[2](f"{prefix}." if prefix else "", module, keep, state)
    spec = copy.deepcopy(spec)
    spec["encoder"][key] = keep
    return spec, state
