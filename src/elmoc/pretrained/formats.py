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
"""
from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from elmoc.encoders.elmo_lstm import ProjectedLstmLayer
from elmoc.encoders.int8_lstm import Int8ProjectedLstmLayer
from elmoc.errors import ConfigError, InputFileError

FORMATS = ("float32", "float16", "bfloat16", "int8")
COMPRESSED = ("float16", "bfloat16", "int8")
HALF = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def check_format(name: str) -> str:
    """``name`` if it is a compressed format, else one :class:`ConfigError` line."""
    if name not in COMPRESSED:
        raise ConfigError(f"unknown compressed format {name!r}; choose one of {', '.join(COMPRESSED)}")
    return name


def stored_format(meta: dict[str, Any], path: str | Path) -> str:
    """The storage format recorded in a directory's ``elmoc-model.json`` (``path``, for errors)."""
    compression = meta.get("compression")
    if compression is None:
        return "float32"
    found = compression.get("format") if isinstance(compression, dict) else None
    if found not in COMPRESSED:
        raise InputFileError(path, f"compression format {found!r} is not one of {', '.join(COMPRESSED)}; "
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
