"""Frozen word-vector tables: load a ``.npy`` [V, dim] file, check it, look rows up.

Frozen tables (FastText, random N(0,1), the trained char-CNN run over the
vocabulary) serve both as input embeddings and as CONT/FIXED output targets.  This
module only loads and validates the file and does the row lookup, including the
paper's *host-resident* mode (spec 1.1, 2.2): the table stays in CPU memory and
only the rows a batch needs are gathered there and copied to the model's device.

Building a model on the meta device (``with torch.device("meta")``, used by
``elmoc params`` to count parameters without allocating them) never reads the
table's data: the shape comes from the ``.npy`` header when the file exists, else
from the vocabulary size and the declared ``dim``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sized

import numpy as np
import torch

from elmoc.errors import ConfigError, InputFileError
from elmoc.nn.host_copy import to_host


def building_on_meta() -> bool:
    """True inside ``with torch.device("meta")`` (tensors are shape-only)."""
    return torch.empty(()).device.type == "meta"


def _header_shape(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    try:
        array = np.load(path, mmap_mode="r")  # reads the header only
    except (ValueError, OSError) as e:
        raise InputFileError(path, f"not a readable .npy file ({e}); rebuild it with `elmoc vectors`") from None
    if not isinstance(array, np.ndarray):
        raise InputFileError(path, "holds an archive, not a single .npy array")
    return tuple(array.shape), array.dtype


def load_table(
    path: str | Path,
    vocab: Sized | None = None,
    dim: int | None = None,
    what: str = "vector table",
) -> torch.Tensor:
    """Load a float32 table ``(vocab, dim)`` from ``path`` and check its shape.

    Args:
        path: ``.npy`` file holding a 2-d float array aligned with the vocabulary.
        vocab: if given, the table must have ``len(vocab)`` rows.
        dim: if given, the table must have ``dim`` columns (needed on the meta
            device when the file does not exist yet).
        what: name used in error messages (e.g. "output 'cosine' vectors").

    Returns:
        float32 tensor ``(vocab, dim)`` on CPU, or an empty meta tensor of that shape
        when called on the meta device.
    """
    path = Path(path)
    if dim is not None and (not isinstance(dim, int) or dim <= 0):
        raise ConfigError(f"{what}: dim must be a positive integer, got {dim!r}")
    if building_on_meta():
        if vocab is not None and dim is not None:  # sizing only: the file is not read
            shape = (len(vocab), dim)
        elif path.is_file():
            shape, _ = _header_shape(path)
        else:
            raise ConfigError(
                f"{what}: {path} does not exist; to size the model without it set `dim:` "
                "in the layer config and pass a vocabulary (size)"
            )
        _check_shape(path, shape, vocab, dim, what)
        return torch.empty(shape, dtype=torch.float32)
    if not path.is_file():
        raise InputFileError(path, f"{what} not found; build it with `elmoc vectors` (or the workflow rule)")
    shape, dtype = _header_shape(path)
    _check_shape(path, shape, vocab, dim, what)
    if dtype.kind != "f":
        raise InputFileError(path, f"{what} has dtype {dtype}, expected a float array")
    table = torch.from_numpy(np.asarray(np.load(path), dtype=np.float32))
    if not torch.isfinite(table).all():
        bad = int((~torch.isfinite(table)).any(dim=1).nonzero()[0, 0])
        raise InputFileError(path, f"{what} row {bad} holds NaN or inf; rebuild the vectors")
    return table


def _check_shape(path: Path, shape: tuple[int, ...], vocab: Sized | None, dim: int | None, what: str) -> None:
    if len(shape) != 2:
        raise InputFileError(path, f"{what} must be 2-d [vocab, dim], got shape {list(shape)}")
    if vocab is not None and shape[0] != len(vocab):
        raise InputFileError(
            path,
            f"{what} has {shape[0]} rows but the vocabulary has {len(vocab)} entries; "
            "rebuild the vectors from this vocabulary",
        )
    if dim is not None and shape[1] != dim:
        raise InputFileError(path, f"{what} has {shape[1]} columns but the config says dim: {dim}")


def lookup(table: torch.Tensor, ids: torch.Tensor, host_resident: bool) -> torch.Tensor:
    """Rows of ``table`` for ``ids``, on ``ids``' device.

    With ``host_resident`` the table lives on CPU: the gather runs there and only the
    gathered rows ``(..., dim)`` are copied to ``ids.device`` (spec 2.2).  The ids are
    read from their CPU original (:mod:`elmoc.nn.host_copy`; a batch moved by
    ``to_device`` has one), so the step does not wait for the device; on CUDA the rows
    are gathered straight into a block of PyTorch's pinned-memory pool (reused once its
    copy has finished) and copied asynchronously.

    Shape:
        table: (vocab, dim); ids: any shape of long ids; returns ``ids.shape + (dim,)``.
    """
    if host_resident and table.device != ids.device:
        host_ids = to_host(ids).reshape(-1)  # without a CPU original: a device read (host sync)
        if ids.device.type == "cuda":
            rows = torch.empty((host_ids.numel(), table.shape[1]), dtype=table.dtype, pin_memory=True)
            torch.index_select(table, 0, host_ids, out=rows)
        else:
            rows = table.index_select(0, host_ids)
        return rows.to(ids.device, non_blocking=True).view(*ids.shape, table.shape[1])
    return table.index_select(0, ids.reshape(-1)).view(*ids.shape, table.shape[1])


def table_for_output(vectors: str, host_resident: bool, input_layer, vocab, dim: int | None, what: str) -> torch.Tensor:
    """The frozen target table of an output layer.

    When the input layer holds the same file with the same placement, its tensor is
    reused instead of loading a second copy (as the paper's code does, spec 2.2).
    """
    if (
        input_layer is not None
        and getattr(input_layer, "vectors_path", None) == str(vectors)
        and getattr(input_layer, "host_resident", None) == bool(host_resident)
    ):
        table = input_layer.weight
        if dim is not None and table.shape[1] != dim:
            raise ConfigError(f"{what}: {vectors} has {table.shape[1]} columns, config says dim: {dim}")
        return table
    return load_table(vectors, vocab, dim, what=what)


def store_table(module: torch.nn.Module, table: torch.Tensor, host_resident: bool) -> None:
    """Attach a frozen table to ``module``: a non-persistent buffer that follows
    ``.to(device)``, or, when ``host_resident``, a plain attribute that stays in CPU
    memory (rows then reach the device through :func:`lookup`).  Read it back with
    :func:`stored_table`.  Not persistent either way: it is rebuilt from its file."""
    module.host_resident = bool(host_resident)
    if module.host_resident:
        module.host_table = table
    else:
        module.register_buffer("table", table, persistent=False)


def stored_table(module: torch.nn.Module) -> torch.Tensor:
    """The table attached by :func:`store_table`."""
    return module.host_table if module.host_resident else module.table
