"""A device tensor that remembers the CPU tensor it was copied from.

Training batches are built on the CPU and copied to the GPU once
(:func:`elmoc.train.precision.to_device`).  A few decisions of the training step
need their *values* on the host: whether a window has padding (the encoders'
fast path), the row lengths ``pack_padded_sequence`` wants on the CPU, the ids a
host-resident table gathers, the token count the trainer logs.  Reading them back
from the GPU (``.item()``, ``bool(...)``, ``.cpu()``) is a host sync: the CPU waits
for every kernel queued so far, every step.  So the copy keeps a reference to its
CPU original, and those decisions read the original instead.

Only the tensor object that the copy returned carries its original: a view,
reshape or arithmetic result of it does not (:func:`host_copy` then returns None).
Batches are read-only in the step; a device tensor changed in place after the copy
would no longer match its original.
"""
from __future__ import annotations

import torch

_ATTRIBUTE = "_elmoc_host_copy"


def attach_host_copy(device_tensor: torch.Tensor, host_tensor: torch.Tensor) -> torch.Tensor:
    """Record ``host_tensor`` (CPU, same values) as the original of ``device_tensor``; returns ``device_tensor``."""
    if host_tensor.device.type != "cpu" or host_tensor.shape != device_tensor.shape:
        raise ValueError(f"host copy must be a CPU tensor of shape {tuple(device_tensor.shape)}, got "
                         f"{host_tensor.device} {tuple(host_tensor.shape)}")
    setattr(device_tensor, _ATTRIBUTE, host_tensor)
    return device_tensor


def host_copy(tensor: torch.Tensor) -> torch.Tensor | None:
    """The CPU values of ``tensor`` without a device read: itself on the CPU, its recorded
    original elsewhere, else None."""
    if tensor.device.type == "cpu":
        return tensor
    return getattr(tensor, _ATTRIBUTE, None)


def to_host(tensor: torch.Tensor) -> torch.Tensor:
    """:func:`host_copy`, falling back to ``tensor.cpu()`` (a host sync) when there is none."""
    host = host_copy(tensor)
    return tensor.cpu() if host is None else host


def copy_to_device(tensor: torch.Tensor, device: torch.device | str, non_blocking: bool = True) -> torch.Tensor:
    """Copy a CPU tensor to ``device``, keeping its CPU original (:func:`host_copy`).

    With ``non_blocking`` on CUDA the source is staged in pinned memory (PyTorch's
    pinned-memory pool, whose blocks are reused once their copy has finished) and the
    copy does not make the host wait; a blocking copy synchronizes the stream.  A tensor
    already off the CPU is moved as ``tensor.to`` does; on the CPU it is returned as is.
    """
    device = torch.device(device)
    if device.type == "cpu" or tensor.device.type != "cpu":
        return tensor.to(device, non_blocking=non_blocking)
    pin = non_blocking and device.type == "cuda" and not tensor.is_pinned()
    source = tensor.pin_memory() if pin else tensor
    return attach_host_copy(source.to(device, non_blocking=non_blocking), tensor)
