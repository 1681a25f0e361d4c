"""Storage formats of a model directory's weights (issue 24.3): how ``elmoc compress``
narrows them and how the loader widens them back.

========  ==========================================  ==========================================
format    stored (``forward.pt`` / ``backward.pt``)     computed (CPU)
========  ==========================================  ==========================================
float32   as exported                                 float32
float16   every float tensor in float16               float32: widened on load
bfloat16  every float tensor in bfloat16              float32: widened on load
int8      every ``Linear`` weight (the LSTM's input,    int8 products (torch's dynamic quantization,
          recurrent and projection matrices, the       activations quantized per call); the rest
          encoder's input projection, the char-CNN's   float32
          highway and projection, the Transformer's
          feed-forward) as a per-output-row qint8
          tensor; biases and everything else float32
========  ==========================================  ==========================================

The keys of a stored state are those of the float model; a tensor's dtype says how it
is stored, so a weights-only load reads every format (quantized tensors are tensors).
Frozen ``.npy`` tables of a compressed copy are float16 (numpy has no bfloat16).
The format is recorded in ``elmoc-model.json`` as ``compression.format`` (absent: float32).

Each compressed format is a registered kind (``"compression"``), one file in
:mod:`elmoc.pretrained.compression` (float16, bfloat16, int8) or a plug-in: a subclass of
:class:`CompressionFormat` saying how it stores, restores and describes the weights, and which
group of rows of the compression table its copy is in.  This module holds the contract and the
helpers the formats share.
"""
from __future__ import annotations

import contextlib
import difflib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from elmoc.config import typed_options
from elmoc.encoders.elmo_lstm import ProjectedLstmLayer
from elmoc.encoders.int8_lstm import Int8ProjectedLstmLayer
from elmoc.errors import ConfigError, InputFileError
from elmoc.registry import by_name, list_available

KIND = "compression"  # the registry kind of the compressed formats
HALF = {"float16": torch.float16, "bfloat16": torch.bfloat16}
State = dict[str, torch.Tensor]


class CompressionFormat:
    """A compressed storage format of a model directory's weights (registered as kind
    ``"compression"``; ``elmoc compress --format NAME``).

    Class attributes:
        Options: its typed options (a dataclass; none here).
        compute: how a copy computes, for ``elmoc-model.json`` and the model card.
        table_group: its copy's group of rows in the compression table (``cast``, ``quantized``, ...).
        TABLE_COPY: the workflow's compression table makes this copy (rule ``compress_copy``);
            a literal, read from the source without importing it (``elmoc.config.declared_values``).
        cpu_only: None, or why a copy runs on the CPU only (a load on another device is refused).
    """

    @dataclass(frozen=True)
    class Options:
        """No options."""

    compute = ""
    table_group = "cast"
    TABLE_COPY = False
    cpu_only: str | None = None

    def __init__(self, options: Any = None):
        self.name = self.registered_name
        self.options = self.Options() if options is None else options

    def store(self, source: Path, states: dict[str, State]) -> dict[str, State]:
        """Every weights file's stored state (direction -> state) from the float ``states`` of
        the model directory ``source``."""
        raise NotImplementedError

    def store_composer(self, state: State) -> State:
        """A char-CNN table composer's stored state (default: as it is)."""
        return state

    def restore(self, states: dict[str, State]) -> dict[str, State]:
        """The float32 states to build the model from (default :func:`widen_all`)."""
        return widen_all(states)

    def finish(self, lms: dict[str, nn.Module], states: dict[str, State], where: dict[str, Path]) -> None:
        """After the float model is built: make it compute this format (default: nothing)."""
        return None

    def record(self, states: dict[str, State]) -> dict[str, Any]:
        """Entries of ``compression`` in ``elmoc-model.json`` beside the shared ones (default none)."""
        return {}

    def card_lines(self, record: dict[str, Any]) -> list[str]:
        """Lines of the model card's "Compressed copy" section after its first (default none)."""
        return []


def compressed_formats() -> list[str]:
    """The registered compressed formats (built-in and plug-ins), sorted."""
    return list_available(KIND)


def format_of(name: str, options: dict[str, Any] | None = None) -> CompressionFormat:
    """The compressed format ``name`` (with its ``options``), else one :class:`ConfigError` line
    naming the closest one."""
    if name not in compressed_formats():
        close = difflib.get_close_matches(str(name), compressed_formats(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown compressed format {name!r}{hint}; choose one of {', '.join(compressed_formats())}")
    cls = by_name(KIND, name)
    return cls(typed_options(cls.Options, options, f"compression {name!r}"))


def check_format(name: str) -> str:
    """``name`` if it is a compressed format, else one :class:`ConfigError` line."""
    format_of(name)
    return name


def stored_format(meta: dict[str, Any], path: str | Path) -> str:
    """The storage format recorded in a directory's ``elmoc-model.json`` (``path``, for errors)."""
    compression = meta.get("compression")
    if compression is None:
        return "float32"
    found = compression.get("format") if isinstance(compression, dict) else None
    if found not in compressed_formats():
        raise InputFileError(path, f"compression format {found!r} is not one of {', '.join(compressed_formats())}; "
                             "compress the model again with this elmoc version")
    return found


def narrow(state: dict[str, torch.Tensor], fmt: str) -> dict[str, torch.Tensor]:
    """A float32 state in ``float16`` or ``bfloat16`` (non-float tensors as they are)."""
    dtype = HALF[fmt]
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}


def widen(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A stored state of any format as float32 tensors to build the float model from
    (int8 weights dequantized: their exact values come back with :func:`load_int8`)."""
    out = {}
    for k, v in state.items():
        if v.is_quantized:
            v = v.dequantize()
        out[k] = v.float() if v.is_floating_point() else v
    return out


def widen_all(states: dict[str, State]) -> dict[str, State]:
    """:func:`widen` of every weights file's state (direction -> state)."""
    return {d: widen(s) for d, s in states.items()}


def quantize_int8(module: nn.Module) -> nn.Module:
    """Make ``module`` (a float ``FeatureLM``, in eval mode) int8 in place and return it:
    every :class:`ProjectedLstmLayer` becomes an :class:`Int8ProjectedLstmLayer`, then
    every ``nn.Linear`` a dynamically quantized one with per-output-row int8 weights
    (torch's ``quantize_dynamic``; ``nn.MultiheadAttention``'s own projections are
    left float32, as torch does)."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    for name, child in list(module.named_modules()):
        for attr, sub in list(child.named_children()):
            if isinstance(sub, ProjectedLstmLayer):
                setattr(child, attr, Int8ProjectedLstmLayer.from_float(sub))
    with quiet_quantization():
        quantize_dynamic(module, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)
    for sub in module.modules():
        if isinstance(sub, nn.TransformerEncoderLayer):
            # torch's fused inference path reads linear1.weight etc. as tensors, which a quantized
            # Linear does not have; a forward pre-hook is one of the conditions that turn it off
            sub.register_forward_pre_hook(_unfused)
    return module


def _unfused(module: nn.Module, args: tuple) -> None:
    """A no-op forward pre-hook: its presence keeps ``nn.TransformerEncoderLayer`` off its fused path."""
    return None


def int8_modules(module: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """``(name, module)`` of every dynamically quantized ``Linear`` in ``module``."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    for name, sub in module.named_modules():
        if isinstance(sub, DynamicLinear):
            yield name, sub


def int8_state(module: nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The stored state of a module made int8 by :func:`quantize_int8`: ``state`` (its
    float32 state dict) with each quantized ``Linear``'s ``.weight`` replaced by the qint8
    tensor its kernel uses."""
    out = dict(state)
    for name, sub in int8_modules(module):
        key = f"{name}.weight"
        if key not in out:
            raise KeyError(f"{key} is not in the state being compressed")
        out[key] = sub.weight().detach().clone()
    return out


def load_int8(module: nn.Module, state: dict[str, torch.Tensor], where: str | Path) -> None:
    """Give each quantized ``Linear`` of ``module`` (made by :func:`quantize_int8`) its stored
    qint8 weight exactly; ``where`` names the file in errors."""
    for name, sub in int8_modules(module):
        weight = state.get(f"{name}.weight")
        if weight is None or not weight.is_quantized or weight.dtype != torch.qint8:
            found = "missing" if weight is None else str(weight.dtype)
            raise InputFileError(where, f"{name}.weight is {found}, expected a qint8 tensor in an int8 model; "
                                 "compress the model again")
        if tuple(weight.shape) != (sub.out_features, sub.in_features):
            raise InputFileError(where, f"{name}.weight has shape {list(weight.shape)}, expected "
                                 f"{[sub.out_features, sub.in_features]}; compress the model again")
        with quiet_quantization():
            sub.set_weight_bias(weight, sub.bias())


@contextlib.contextmanager
def quiet_quantization() -> Iterator[None]:
    """torch >= 2.10 warns that eager-mode quantization and quantized tensors are deprecated
    (still present and working in 2.13); elmoc's int8 path is exactly those, so the docs say
    it once instead of a warning on every load."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*deprecated.*", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*deprecated.*", category=UserWarning)
        yield
