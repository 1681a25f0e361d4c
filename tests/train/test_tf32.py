"""Opt-in TF32 (``train.precision: tf32``): set on a CUDA device, a no-op elsewhere.

The flags are process-wide settings that a CPU build of PyTorch also holds, so setting
them through the CUDA path needs no GPU; each test restores them.
"""
from __future__ import annotations

import pytest
import torch

from elmoc.errors import ConfigError
from elmoc.train.settings import TrainSettings
from elmoc.train.precision import apply_tf32, autocast_context


@pytest.fixture
def tf32_flags():
    """Yields a reader of the two flags and restores them afterwards."""
    before = (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.fp32_precision)
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.fp32_precision = "ieee"
    yield lambda: (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.fp32_precision)
    torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.fp32_precision = before


def test_tf32_on_a_cuda_device_switches_matmul_and_cudnn(tf32_flags):
    with autocast_context(torch.device("cuda", 0), "tf32"):
        assert tf32_flags() == ("tf32", "tf32")
    assert tf32_flags() == ("tf32", "tf32")  # process-wide: the backward pass runs outside the context


@pytest.mark.parametrize("device,precision", [("cpu", "tf32"), ("cuda", "fp32"), ("cuda", "bf16")])
def test_tf32_is_a_no_op_on_cpu_and_for_other_precisions(tf32_flags, device, precision):
    assert apply_tf32(device, precision) is False
    assert tf32_flags() == ("ieee", "ieee")


def test_tf32_on_cpu_computes_in_float32(tf32_flags):
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    with autocast_context("cpu", "tf32"):
        product = a @ b
    assert product.dtype == torch.float32 and torch.equal(product, a @ b)
    assert tf32_flags() == ("ieee", "ieee")


def test_train_settings_accept_tf32_and_name_the_choices():
    assert TrainSettings.from_config({"precision": "tf32"}).precision == "tf32"
    with pytest.raises(ConfigError, match="'fp32', 'bf16' or 'tf32'"):
        TrainSettings.from_config({"precision": "fp16"})


@pytest.mark.gpu
def test_tf32_on_a_real_gpu_changes_float32_products(tf32_flags):
    """On an Ampere or later GPU, `tf32` makes float32 products round their inputs to 10-bit mantissas:
    further from the float64 product than with the flags off, and the flags stay on afterwards."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8:
        pytest.skip("needs an Ampere or later CUDA GPU")
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
    exact = a.double() @ b.double()
    ieee = (a.cuda() @ b.cuda()).cpu()
    with autocast_context("cuda", "tf32"):
        tf32 = (a.cuda() @ b.cuda()).cpu()
    assert tf32_flags() == ("tf32", "tf32")
    assert (tf32.double() - exact).abs().max() > 10 * (ieee.double() - exact).abs().max()
