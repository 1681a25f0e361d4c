"""Precision / transfer helpers (CPU-testable parts)."""
from __future__ import annotations

import pytest
import torch

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.errors import ConfigError
from elmoc.inputs.vector_table import lookup
from elmoc.train.precision import autocast_context, to_device


def test_autocast_bf16_changes_matmul_dtype_and_fp32_does_not():
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    with autocast_context("cpu", "bf16"):
        assert (a @ b).dtype == torch.bfloat16
    with autocast_context("cpu", "fp32"):
        assert (a @ b).dtype == torch.float32


def test_bad_precision_names_choices():
    with pytest.raises(ConfigError, match="fp32, bf16"):
        autocast_context("cpu", "fp16")


def test_host_resident_lookup_returns_only_needed_rows():
    table = torch.arange(20.0).view(10, 2)
    ids = torch.tensor([[3, 1], [9, 3]])
    rows = lookup(table, ids, host_resident=True)
    assert rows.shape == (2, 2, 2)
    assert rows[0, 0].tolist() == [6.0, 7.0] and rows[1, 0].tolist() == [18.0, 19.0]


def test_to_device_cpu_keeps_batch():
    batch = LMBatch(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long),
                    torch.ones(2, 3, dtype=torch.bool))
    moved = to_device(batch, "cpu")
    assert torch.equal(moved.inputs, batch.inputs) and moved.mask.dtype == torch.bool


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned non-blocking copies need CUDA")
def test_to_device_cuda_pins_and_copies():
    batch = LMBatch(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long),
                    torch.ones(2, 3, dtype=torch.bool))
    moved = to_device(batch, "cuda")
    assert moved.inputs.is_cuda
    both = to_device(BiLMBatch(batch, batch), "cuda")  # a joint bi-LM's window pair
    assert both.forward.inputs.is_cuda and both.backward.mask.is_cuda
    rows = lookup(torch.randn(5, 2), torch.tensor([1, 2], device="cuda"), host_resident=True)
    assert rows.is_cuda


def test_retain_freed_host_memory_applies_on_glibc():
    import platform

    from elmoc.train.precision import retain_freed_host_memory

    ok = retain_freed_host_memory()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert ok is True
    x = torch.ones(1024, 1024)  # allocations still work afterwards
    assert float(x.sum()) == 1024 * 1024
