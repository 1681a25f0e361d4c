"""Helpers of the data-parallel tests (tests/train/test_ddp.py, tests/joint/test_joint_ddp.py):
a free TCP port for the gloo rendezvous, and the largest difference of two nested states."""
from __future__ import annotations

import socket

import torch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def max_abs_diff(a, b, where="") -> float:
    """Largest |a - b| over nested dicts/lists of tensors; other values must be equal."""
    if isinstance(a, dict):
        assert sorted(a, key=str) == sorted(b, key=str), where
        return max([max_abs_diff(a[k], b[k], f"{where}.{k}") for k in a] or [0.0])
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        return max([max_abs_diff(x, y, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b))] or [0.0])
    if isinstance(a, torch.Tensor):
        assert a.shape == b.shape, where
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    assert a == b, f"{where}: {a!r} != {b!r}"
    return 0.0
