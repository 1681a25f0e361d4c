"""Precision and host-to-device transfer helpers for the training step.

* :func:`autocast_context`: bf16 autocast (CPU or CUDA) or a no-op for fp32 and tf32;
  tf32 switches CUDA's float32 matmuls and cuDNN to TensorFloat-32 (:func:`apply_tf32`).
* :func:`to_device`: moves a batch to the model's device; on CUDA the host tensors
  are pinned first and copied with ``non_blocking=True`` so the copy overlaps compute.
  Each copy keeps its CPU original (:mod:`elmoc.nn.host_copy`), so the step reads
  lengths, padding and ids from the host instead of syncing with the device.
* The paper's host-resident tables (spec 2.2, 3.4) are served by
  :func:`elmoc.inputs.vector_table.lookup`: only the rows a batch needs cross the bus.
* :func:`retain_freed_host_memory`: keep freed CPU buffers mapped (glibc ``mallopt``),
  so a training step's large activation buffers do not page-fault on every step.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging

import torch

from elmoc.errors import ConfigError
from elmoc.nn.host_copy import copy_to_device

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16", "tf32")
_M_TRIM_THRESHOLD = -1  # glibc malloc.h
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's cap on 64-bit systems


def retain_freed_host_memory() -> bool:
    """Serve CPU tensors up to 32 MB from the heap and never trim it back to the OS.

    By default glibc maps every allocation above 128 KB freshly (``mmap``) and unmaps
    it on free, so each step's activation buffers (e.g. the ELMo LSTM's gate buffers)
    page-fault anew; on a virtual machine that cost ~40% of a demo-size LSTM step.
    After this call freed blocks are reused without faults.  The process keeps its
    peak heap (as every training process does anyway).  Returns False (and changes
    nothing) where glibc's ``mallopt`` is unavailable.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.debug("mallopt unavailable; host memory is left to the default allocator")
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) == 1
    ok = (mallopt(_M_TRIM_THRESHOLD, 2**31 - 1) == 1) and ok
    return ok


def apply_tf32(device: torch.device | str, precision: str) -> bool:
    """With ``precision == "tf32"`` on a CUDA device, let float32 matmuls (cuBLAS) and
    cuDNN convolutions and RNNs use TensorFloat-32 tensor cores (10-bit mantissa inputs,
    float32 accumulation; Ampere and later).  Process-wide and idempotent: it stays on for
    the backward pass and heldout evaluation too.  Returns True when it set the flags;
    anything else (fp32, bf16, a CPU device) changes nothing and returns False.
    """
    if precision != "tf32" or torch.device(device).type != "cuda":
        return False
    # the fp32_precision API (not the legacy allow_tf32 flags: PyTorch refuses to mix them)
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    torch.backends.cudnn.fp32_precision = "tf32"
    return True


def autocast_context(device: torch.device | str, precision: str):
    """Context manager for the forward pass: bf16 autocast, or plain float32 for fp32 and
    tf32 (tf32 also calls :func:`apply_tf32`, which only acts on CUDA)."""
    device = torch.device(device)
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    apply_tf32(device, precision)
    return contextlib.nullcontext()


def to_device(tensor_or_batch, device: torch.device | str):
    """Copy a tensor (or a dataclass of tensors, e.g. ``LMBatch``, ``BiLMBatch``, nested) to ``device``.

    On CUDA, CPU tensors are pinned and copied asynchronously.  On any device other than
    the CPU each copied tensor keeps its CPU original (:func:`elmoc.nn.host_copy.host_copy`).
    On the CPU nothing is copied.  Other objects with ``.to`` are moved with it.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return tensor_or_batch.to(device)
    if isinstance(tensor_or_batch, torch.Tensor):
        return copy_to_device(tensor_or_batch, device)
    fields = getattr(tensor_or_batch, "__dataclass_fields__", None)
    if fields is not None:
        values = {name: getattr(tensor_or_batch, name) for name in fields}
        moved = {k: to_device(v, device) if isinstance(v, torch.Tensor) or hasattr(v, "__dataclass_fields__")
                 else v for k, v in values.items()}  # nested batches too (a joint bi-LM's BiLMBatch)
        return type(tensor_or_batch)(**moved)
    return tensor_or_batch.to(device, non_blocking=True)
