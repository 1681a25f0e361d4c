"""Weights as ``.safetensors`` files (issue 53.3): no pickle to load, memory-mapped, readable
from any language that reads the format (a JSON header, then the raw little-endian tensors).

A model directory's weights (``forward.safetensors``...) and its char-CNN composer are
written with :func:`save_tensors`; :func:`read_state` reads them, and the ``.pt`` files of
directories written before (through :func:`~elmoc.io.safe_load.load_weights_only`, torch's
restricted unpickler).

safetensors has no quantized dtype, so an int8 copy's per-channel ``qint8`` weight ``K`` is
stored as three plain tensors, ``K::int8`` (its integer values), ``K::scale`` (float64, one
per output row) and ``K::zero_point`` (int64), with ``{"K": "qint8_per_channel:AXIS"}`` in
the file's metadata; :func:`load_tensors` rebuilds exactly that tensor.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from elmoc.errors import InputFileError
from elmoc.io.atomic import atomic_file

SUFFIX = ".safetensors"
_QUANTIZED = "qint8_per_channel:"


def _encode(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    tensors, metadata = {}, {}
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{key} is a {type(value).__name__}, not a tensor")
        value = value.detach().cpu()
        if value.is_quantized:
            if value.qscheme() not in (torch.per_channel_affine, torch.per_channel_symmetric) or (
                    value.dtype != torch.qint8):
                raise TypeError(f"{key}: only per-channel qint8 tensors are stored, got {value.qscheme()} {value.dtype}")
            metadata[key] = f"{_QUANTIZED}{value.q_per_channel_axis()}"
            tensors[f"{key}::int8"] = value.int_repr().contiguous()
            tensors[f"{key}::scale"] = value.q_per_channel_scales().to(torch.float64).contiguous()
            tensors[f"{key}::zero_point"] = value.q_per_channel_zero_points().to(torch.int64).contiguous()
        else:
            tensors[key] = value.contiguous().clone()  # own storage: safetensors refuses shared ones
    return tensors, metadata


def save_tensors(state: dict[str, torch.Tensor], path: str | Path) -> None:
    """Write ``state`` (tensors, float or per-channel qint8) to ``path`` atomically."""
    from safetensors.torch import save

    tensors, metadata = _encode(state)
    data = save(tensors, metadata={"format": "pt", **metadata})
    with atomic_file(path, "wb", encoding=None) as f:
        f.write(data)


def load_tensors(path: str | Path, what: str = "a weights file", fix: str = "write it again with elmoc"
                 ) -> dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file (no code runs: the format has none); a missing or
    malformed file is one :class:`~elmoc.errors.InputFileError` line."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, f"not found; {fix}")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            metadata = f.metadata() or {}
            raw = {key: f.get_tensor(key) for key in f.keys()}
    except Exception as e:  # safetensors raises its own SafetensorError, OSError or ValueError
        raise InputFileError(path, f"is not {what} in the safetensors format ({e}); {fix}") from None
    state: dict[str, torch.Tensor] = {}
    for key, scheme in metadata.items():
        if not scheme.startswith(_QUANTIZED):
            continue
        try:
            state[key] = torch._make_per_channel_quantized_tensor(
                raw.pop(f"{key}::int8"), raw.pop(f"{key}::scale"), raw.pop(f"{key}::zero_point"),
                int(scheme[len(_QUANTIZED):]))
        except (KeyError, RuntimeError, ValueError) as e:
            raise InputFileError(path, f"its int8 weight {key} is incomplete ({e}); {fix}") from None
    state.update(raw)
    return state


def read_state(path: str | Path, what: str = "a weights file", fix: str = "write it again with elmoc") -> Any:
    """A weights file of either kind: ``.safetensors``, or an older ``.pt`` read weights-only."""
    if Path(path).suffix == SUFFIX:
        return load_tensors(path, what, fix)
    from elmoc.io.safe_load import load_weights_only

    return load_weights_only(path, what=what, fix=fix)


def stored_file(directory: str | Path, stem: str) -> Path:
    """``DIR/STEM.safetensors``, or ``DIR/STEM.pt`` where only that (older) file exists."""
    new = Path(directory) / f"{stem}{SUFFIX}"
    old = Path(directory) / f"{stem}.pt"
    return old if old.is_file() and not new.is_file() else new
