"""Load bilm-tf ``weights.hdf5`` into :class:`CharCnnInput` and the ``elmo_lstm`` encoder.

Conversions (spec 5.2, P23):

* ``char_embed`` [261, d] gets a zero row prepended (id 0 = no token, ids are +1);
* ``CNN/W_cnn_i`` [1, width, d, count] -> Conv1d weight (count, d, width);
* ``CNN_high_k``: TF computes ``g = sigmoid(x W_carry + b_carry)``,
  ``y = g * relu(x W_transform + b_transform) + (1 - g) * x``; our highway gates the
  identity path, so its gate is ``-W_carry, -b_carry`` (the sign flip);
* ``CNN_proj/W_proj`` [filters, proj] -> Linear weight (proj, filters);
* ``RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0`` [in + proj, 4 cell] stacks the
  input and recurrent kernels; TF's gate order (i, j, f, o) becomes ours
  (i, f, g=j, o) and 1.0 is added to the forget-gate bias (TF adds it at run time);
  ``W_P_0`` [cell, proj] is the projection.

Every dataset's shape is checked against the module; a mismatch is an
:class:`InputFileError` naming the dataset.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from elmoc.errors import InputFileError


def _open(path: str | Path):
    import h5py

    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "bilm-tf weight file not found")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise InputFileError(path, f"not a readable HDF5 file ({e})") from None


def _read(handle, path: Path, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name not in handle:
        raise InputFileError(path, f"dataset {name!r} is missing")
    data = np.asarray(handle[name][...], dtype=np.float32)
    if tuple(data.shape) != tuple(shape):
        raise InputFileError(
            path, f"dataset {name!r} has shape {list(data.shape)}, the model (from options.json) needs {list(shape)}"
        )
    return data


def _copy(param: torch.Tensor, value: np.ndarray) -> None:
    with torch.no_grad():
        param.copy_(torch.from_numpy(np.ascontiguousarray(value)))


def load_char_cnn(layer: nn.Module, weights: str | Path) -> None:
    """Copy the char-CNN, highway and projection weights into a ``CharCnnInput``."""
    path = Path(weights)
    with _open(path) as h5:
        emb = layer.char_embedding.weight
        chars = _read(h5, path, "char_embed", (emb.shape[0] - 1, emb.shape[1]))
        _copy(emb, np.concatenate([np.zeros((1, emb.shape[1]), np.float32), chars], axis=0))
        for i, conv in enumerate(layer.convolutions):
            count, dim, width = conv.weight.shape
            w = _read(h5, path, f"CNN/W_cnn_{i}", (1, width, dim, count))
            _copy(conv.weight, w[0].transpose(2, 1, 0))
            _copy(conv.bias, _read(h5, path, f"CNN/b_cnn_{i}", (count,)))
        n = layer.num_filters
        for k, highway in enumerate(layer.highways):
            _copy(highway.nonlinear.weight, _read(h5, path, f"CNN_high_{k}/W_transform", (n, n)).T)
            _copy(highway.nonlinear.bias, _read(h5, path, f"CNN_high_{k}/b_transform", (n,)))
            _copy(highway.gate.weight, -_read(h5, path, f"CNN_high_{k}/W_carry", (n, n)).T)
            _copy(highway.gate.bias, -_read(h5, path, f"CNN_high_{k}/b_carry", (n,)))
        out = layer.projection.weight.shape[0]
        _copy(layer.projection.weight, _read(h5, path, "CNN_proj/W_proj", (n, out)).T)
        _copy(layer.projection.bias, _read(h5, path, "CNN_proj/b_proj", (out,)))


def _reorder_gates(block: np.ndarray, cell: int) -> np.ndarray:
    """TF (i, j, f, o) -> (i, f, j, o) along the last axis (4 * cell wide)."""
    i, j, f, o = (block[..., k * cell : (k + 1) * cell] for k in range(4))
    return np.concatenate([i, f, j, o], axis=-1)


def load_elmo_lstm(encoder: nn.Module, weights: str | Path, direction: int) -> None:
    """Copy bilm-tf LSTM weights of ``direction`` (0 forward, 1 backward) into an
    ``elmo_lstm`` encoder built with the same sizes (``layer_norm: false``)."""
    path = Path(weights)
    if direction not in (0, 1):
        raise ValueError(f"direction must be 0 (forward) or 1 (backward), got {direction}")
    with _open(path) as h5:
        for l, layer in enumerate(encoder.lstm_layers):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{l}/LSTMCell"
            cell, proj, inp = layer.cell_size, layer.projection_size, layer.input_size
            kernel = _reorder_gates(_read(h5, path, f"{prefix}/W_0", (inp + proj, 4 * cell)), cell)
            bias = _reorder_gates(_read(h5, path, f"{prefix}/B", (4 * cell,)), cell).copy()
            bias[cell : 2 * cell] += 1.0  # TF's forget_bias=1.0 is added at run time
            _copy(layer.input_linearity.weight, kernel[:inp].T)
            _copy(layer.state_linearity.weight, kernel[inp:].T)
            _copy(layer.state_linearity.bias, bias)
            _copy(layer.state_projection.weight, _read(h5, path, f"{prefix}/W_P_0", (cell, proj)).T)


# --------------------------------------------------------------------------- the other way


def _array(param: torch.Tensor) -> np.ndarray:
    return param.detach().cpu().float().numpy()


def char_cnn_datasets(layer: nn.Module) -> dict[str, np.ndarray]:
    """The bilm-tf datasets of a ``CharCnnInput`` (the inverse of :func:`load_char_cnn`)."""
    out = {"char_embed": _array(layer.char_embedding.weight)[1:]}  # the zero row 0 is not stored
    for i, conv in enumerate(layer.convolutions):
        out[f"CNN/W_cnn_{i}"] = _array(conv.weight).transpose(2, 1, 0)[None]
        out[f"CNN/b_cnn_{i}"] = _array(conv.bias)
    for k, highway in enumerate(layer.highways):
        out[f"CNN_high_{k}/W_transform"] = _array(highway.nonlinear.weight).T
        out[f"CNN_high_{k}/b_transform"] = _array(highway.nonlinear.bias)
        out[f"CNN_high_{k}/W_carry"] = -_array(highway.gate.weight).T
        out[f"CNN_high_{k}/b_carry"] = -_array(highway.gate.bias)
    out["CNN_proj/W_proj"] = _array(layer.projection.weight).T
    out["CNN_proj/b_proj"] = _array(layer.projection.bias)
    return out


def _tf_gates(block: np.ndarray, cell: int) -> np.ndarray:
    """Ours (i, f, g, o) -> TF's (i, j=g, f, o) along the last axis."""
    i, f, g, o = (block[..., k * cell : (k + 1) * cell] for k in range(4))
    return np.concatenate([i, g, f, o], axis=-1)


def elmo_lstm_datasets(encoder: nn.Module, direction: int) -> dict[str, np.ndarray]:
    """The bilm-tf datasets of an ``elmo_lstm`` encoder as direction ``direction`` (0
    forward, 1 backward): the inverse of :func:`load_elmo_lstm`."""
    out = {}
    for l, layer in enumerate(encoder.lstm_layers):
        prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{l}/LSTMCell"
        cell = layer.cell_size
        kernel = np.concatenate([_array(layer.input_linearity.weight).T, _array(layer.state_linearity.weight).T])
        bias = _array(layer.state_linearity.bias).copy()
        bias[cell : 2 * cell] -= 1.0  # TF adds forget_bias=1.0 at run time
        out[f"{prefix}/W_0"] = _tf_gates(kernel, cell)
        out[f"{prefix}/B"] = _tf_gates(bias, cell)
        out[f"{prefix}/W_P_0"] = _array(layer.state_projection.weight).T
    return out
