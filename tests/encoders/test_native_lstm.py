"""The C++ time loop (csrc/projected_lstm.cpp) against the Python loop of the same math."""
from __future__ import annotations

import pytest
import torch

from elmoc.encoders import native
from elmoc.encoders.projected_lstm import _ProjectedLstmFunction


@pytest.fixture(autouse=True)
def require_native():
    if native.native_ops() is None:
        pytest.fail(f"native LSTM kernel did not build: {native.native_status()} "
                    "(set ELMOC_NATIVE_LSTM=0 only on machines without a C++ compiler)")


def case(dtype, layer_norm, dropout, masked, seed=0, steps=6, batch=5, cell=8, proj=4):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, dtype=dtype) * scale).requires_grad_()

    mask = torch.ones(steps, batch, dtype=torch.bool)
    if masked:
        mask[3:, 1] = False
        mask[:2, 2] = False
        mask[:, 4] = False
        mask[2, 0] = False
    args = [rand(steps, batch, 4 * cell, scale=2.0), rand(batch, proj, scale=0.5), rand(batch, cell, scale=0.3),
            rand(4 * cell, proj), rand(proj, cell)]
    ln = [rand(proj), rand(proj)] if layer_norm else [None, None]
    drop = (torch.rand(batch, proj, generator=g) > 0.3).to(dtype) / 0.7 if dropout else None
    return args, mask, ln, drop


def run(args, mask, ln, drop, cell_clip, proj_clip, mm_dtype=None):
    out, h, c = _ProjectedLstmFunction.apply(args[0], mask, *args[1:], *ln, drop, cell_clip, proj_clip, None,
                                             mm_dtype)
    g = torch.Generator().manual_seed(5)
    loss = (out * torch.randn(out.shape, generator=g, dtype=args[0].dtype)).sum() + 0.7 * h.sum() - 0.3 * c.sum()
    leaves = [a for a in args + ln if a is not None]
    return [out, h, c] + list(torch.autograd.grad(loss, leaves))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layer_norm, dropout, masked", [(True, True, True), (False, False, False),
                                                         (True, False, False), (False, True, True)])
def test_native_equals_python_loop(monkeypatch, dtype, layer_norm, dropout, masked):
    args, mask, ln, drop = case(dtype, layer_norm, dropout, masked)
    # clips that bind: |c| and |p| both exceed these somewhere in the case
    clips = (0.4, 0.9)
    fast = run(args, mask, ln, drop, *clips)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    slow = run(args, mask, ln, drop, *clips)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for a, b in zip(fast, slow):
        assert a.dtype == dtype
        assert (a - b).abs().max() <= tol * max(1.0, b.abs().max())
    assert fast[0].abs().max() > 0 and all(t.abs().sum() > 0 for t in fast[3:])


def test_native_path_is_taken_on_cpu_and_can_be_disabled(monkeypatch):
    args, mask, ln, drop = case(torch.float32, True, False, False)
    calls = []
    ops = native.native_ops()

    class Spy:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(ops, name)

    monkeypatch.setattr(native, "native_ops", lambda: Spy())
    run(args, mask, ln, drop, 3.0, 3.0)
    assert calls == ["lstm_forward", "lstm_backward"]
    monkeypatch.undo()
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    assert native.native_ops() is None
    assert "disabled" in native.native_status()


def test_failed_build_falls_back_to_the_python_loop_with_a_warning(monkeypatch, tmp_path, caplog):
    import logging

    broken = tmp_path / "broken.cpp"
    broken.write_text("this is not C++\n")
    monkeypatch.setattr(native, "_state", {"tried": False, "ops": None, "reason": "not loaded yet"})
    monkeypatch.setattr(native, "SOURCE", broken)
    monkeypatch.setattr(native, "_build_flavour", lambda: ("elmoc_native_lstm_broken_test", ["-O0"]))
    monkeypatch.setenv("ELMOC_NATIVE_CACHE", str(tmp_path / "ext"))
    with caplog.at_level(logging.WARNING, logger="elmoc.encoders.native"):
        assert native.native_ops() is None
    assert "build failed" in native.native_status()
    assert any("slower Python time loop" in r.getMessage() for r in caplog.records)
    args, mask, ln, drop = case(torch.float32, True, True, True)
    out = run(args, mask, ln, drop, 0.4, 0.9)  # still trains, on the Python loop
    assert all(torch.isfinite(t).all() for t in out)
