"""Alternating highway LSTM: padding never leaks, directions alternate, options are checked."""
from __future__ import annotations

import pytest
import torch

from elmoc.errors import ConfigError
from elmoc.nn.alternating_lstm import AlternatingHighwayLstm


def test_padding_does_not_change_real_positions():
    torch.manual_seed(0)
    lstm = AlternatingHighwayLstm(5, 7, num_layers=3, recurrent_dropout=0.0).eval()
    x = torch.randn(1, 4, 5)
    alone = lstm(x, torch.ones(1, 4, dtype=torch.bool))
    padded_x = torch.cat([x, torch.randn(1, 3, 5)], dim=1)
    mask = torch.tensor([[True] * 4 + [False] * 3])
    padded = lstm(padded_x, mask)
    assert torch.allclose(padded[:, :4], alone, atol=1e-6)
    assert padded[:, 4:].abs().sum() == 0


def test_second_layer_reads_right_to_left():
    torch.manual_seed(0)
    one = AlternatingHighwayLstm(3, 4, num_layers=1, recurrent_dropout=0.0).eval()
    two = AlternatingHighwayLstm(3, 4, num_layers=2, recurrent_dropout=0.0).eval()
    x = torch.randn(1, 5, 3)
    mask = torch.ones(1, 5, dtype=torch.bool)
    changed = x.clone()
    changed[0, 4] += 1.0  # change the last token only
    # layer 0 is left-to-right: earlier outputs do not see the last token
    assert torch.allclose(one(x, mask)[:, :4], one(changed, mask)[:, :4])
    # with a backward layer on top, the first output does see it
    assert not torch.allclose(two(x, mask)[:, 0], two(changed, mask)[:, 0])


def test_recurrent_dropout_only_in_training_and_gradients_flow():
    torch.manual_seed(0)
    lstm = AlternatingHighwayLstm(3, 4, num_layers=2, recurrent_dropout=0.5)
    x = torch.randn(2, 6, 3, requires_grad=True)
    mask = torch.ones(2, 6, dtype=torch.bool)
    lstm.train()
    a, b = lstm(x, mask), lstm(x, mask)
    assert not torch.allclose(a, b)
    lstm.eval()
    assert torch.allclose(lstm(x, mask), lstm(x, mask))
    lstm(x, mask).sum().backward()
    assert x.grad.abs().sum() > 0


def test_bad_options():
    with pytest.raises(ConfigError, match="recurrent_dropout"):
        AlternatingHighwayLstm(3, 4, recurrent_dropout=1.0)
    with pytest.raises(ConfigError, match="positive"):
        AlternatingHighwayLstm(3, 0)


# -- the time loops of the autograd function against the reference autograd loop ---------------
from elmoc.nn import alternating_lstm  # noqa: E402
from elmoc.nn.alternating_lstm import PythonLoops, _HighwayLstmFunction  # noqa: E402


def _require_native():
    if alternating_lstm.native_ops() is None:
        pytest.fail(f"native highway LSTM kernel did not build: {alternating_lstm.native_status()} "
                    "(set ELMOC_NATIVE_LSTM=0 only on machines without a C++ compiler)")


def _case(dtype, masked, dropout, layers=3, seed=0):
    """A stack in training mode, an input, a mask and output weights for the loss."""
    torch.manual_seed(seed)
    lstm = AlternatingHighwayLstm(5, 6, num_layers=layers, recurrent_dropout=0.3 if dropout else 0.0).to(dtype)
    with torch.no_grad():  # non-zero biases, so that their gradients are tested too
        for layer in lstm.layers:
            layer.state_linear.bias.normal_()
    x = torch.randn(4, 7, 5, dtype=dtype, requires_grad=True)
    mask = torch.ones(4, 7, dtype=torch.bool)
    if masked:
        mask[1, 5:] = False
        mask[2, 1:] = False
        mask[3, 3:] = False
    return lstm.train(), x, mask, torch.randn(4, 7, 6, dtype=dtype)


def _run(lstm, x, mask, weights, forward):
    """Output, gradients of the input and of every parameter, and the RNG state afterwards."""
    torch.manual_seed(11)  # the dropout masks
    out = forward(x, mask)
    grads = torch.autograd.grad((out * weights).sum(), [x] + list(lstm.parameters()))
    return [out, *grads], torch.get_rng_state()


def _assert_close(fast, slow, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        assert a.dtype == dtype and a.shape == b.shape
        assert (a - b).abs().max() <= tol * max(1.0, float(b.detach().abs().max()))
    assert all(t.abs().sum() > 0 for t in fast)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("masked, dropout", [(True, True), (False, False), (True, False), (False, True)])
def test_native_loop_equals_the_reference_loop(dtype, masked, dropout):
    _require_native()
    lstm, x, mask, weights = _case(dtype, masked, dropout)
    fast, rng_fast = _run(lstm, x, mask, weights, lstm.forward)
    slow, rng_slow = _run(lstm, x, mask, weights, lstm.reference_forward)
    _assert_close(fast, slow, dtype)
    assert torch.equal(rng_fast, rng_slow)  # the same dropout masks, drawn from the same stream
    assert fast[0][~mask].abs().sum() == 0


@pytest.mark.parametrize("masked, dropout", [(True, True), (False, False)])
def test_python_loops_of_the_cuda_path_equal_the_reference_loop(monkeypatch, masked, dropout):
    """The CUDA path's loops (here eager, on the CPU) against the reference."""
    lstm, x, mask, weights = _case(torch.float64, masked, dropout)
    monkeypatch.setattr(alternating_lstm, "time_loops", lambda t: PythonLoops(compiled=False))
    fast, rng_fast = _run(lstm, x, mask, weights, lstm.forward)
    slow, rng_slow = _run(lstm, x, mask, weights, lstm.reference_forward)
    _assert_close(fast, slow, torch.float64)
    assert torch.equal(rng_fast, rng_slow)


def _function_inputs(masked, seed=0, steps=5, batch=3, hidden=4):
    g = torch.Generator().manual_seed(seed)
    projected = torch.randn(steps, batch, 6 * hidden, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(5 * hidden, hidden, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5 * hidden, generator=g, dtype=torch.float64, requires_grad=True)
    drop = (torch.rand(batch, hidden, generator=g) > 0.3).double() / 0.7
    mask = torch.ones(steps, batch, dtype=torch.bool)
    if masked:
        mask[3:, 1] = False
        mask[1:, 2] = False
    return projected, mask, drop, weight, bias


@pytest.mark.parametrize("masked", [True, False])
def test_hand_written_backwards_pass_gradcheck(masked):
    _require_native()
    projected, mask, drop, weight, bias = _function_inputs(masked)
    for loops in (alternating_lstm.native_ops(), PythonLoops(compiled=False)):
        assert torch.autograd.gradcheck(
            lambda p, w, b, loops=loops: _HighwayLstmFunction.apply(p, mask, drop, w, b, loops),
            (projected, weight, bias))


def test_under_autocast_the_recurrence_stays_in_float32():
    _require_native()
    lstm, x, mask, weights = _case(torch.float32, True, True, layers=2)
    plain, _ = _run(lstm, x, mask, weights, lstm.forward)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cast, _ = _run(lstm, x, mask, weights, lstm.forward)
    assert cast[0].dtype == torch.float32
    # only the input products ran in bfloat16 (8 bits of mantissa)
    assert all((a.float() - b).abs().max() <= 0.05 * max(1.0, float(b.detach().abs().max())) for a, b in zip(cast, plain))


def test_native_path_is_taken_on_cpu_and_can_be_disabled(monkeypatch):
    _require_native()
    lstm, x, mask, weights = _case(torch.float32, True, True, layers=2)
    ops, calls = alternating_lstm.native_ops(), []

    class Spy:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(ops, name)

    monkeypatch.setattr(alternating_lstm, "native_ops", lambda: Spy())
    _run(lstm, x, mask, weights, lstm.forward)
    assert calls == ["highway_forward"] * 2 + ["highway_backward"] * 2
    monkeypatch.undo()
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    assert alternating_lstm.time_loops(x) is None  # the reference loop
    assert "disabled" in alternating_lstm.native_status()


def test_a_failing_compile_falls_back_to_the_eager_cell_with_a_warning(monkeypatch, caplog):
    import logging

    def broken_compile(fn, **kwargs):
        def call(*args):
            raise RuntimeError("no backend here")
        return call

    monkeypatch.setattr(torch, "compile", broken_compile)
    lstm, x, mask, weights = _case(torch.float64, True, True, layers=2)
    monkeypatch.setattr(alternating_lstm, "time_loops", lambda t, loops=PythonLoops(compiled=True): loops)
    with caplog.at_level(logging.WARNING, logger="elmoc.nn.alternating_lstm"):
        fast, _ = _run(lstm, x, mask, weights, lstm.forward)
    assert sum("torch.compile of the highway LSTM cell failed" in r.getMessage() for r in caplog.records) == 2
    slow, _ = _run(lstm, x, mask, weights, lstm.reference_forward)
    _assert_close(fast, slow, torch.float64)


@pytest.mark.slow  # inductor compiles the two cells for the CPU: 1-2 minutes on the 2-core box
def test_the_cells_compile_and_the_compiled_loops_equal_the_reference_loop(monkeypatch, caplog):
    """The CUDA path's ``torch.compile`` of the cells, here on the CPU: no graph break that fails,
    no fallback to the eager cells, the same outputs and gradients."""
    import logging

    lstm, x, mask, weights = _case(torch.float64, True, True, layers=2)
    loops = PythonLoops(compiled=True)
    monkeypatch.setattr(alternating_lstm, "time_loops", lambda t: loops)
    with caplog.at_level(logging.WARNING, logger="elmoc.nn.alternating_lstm"):
        fast, _ = _run(lstm, x, mask, weights, lstm.forward)
    assert not caplog.records  # compiled, not fallen back
    slow, _ = _run(lstm, x, mask, weights, lstm.reference_forward)
    _assert_close(fast, slow, torch.float64)


@pytest.mark.gpu
def test_cuda_path_with_compiled_cells_equals_the_cpu_reference():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    lstm, x, mask, weights = _case(torch.float32, True, False)
    slow, _ = _run(lstm, x, mask, weights, lstm.reference_forward)
    lstm = lstm.cuda()
    assert isinstance(alternating_lstm.time_loops(x.cuda()), PythonLoops)
    xc = x.detach().cuda().requires_grad_()
    fast, _ = _run(lstm, xc, mask.cuda(), weights.cuda(), lstm.forward)
    _assert_close([t.cpu() for t in fast], slow, torch.float32)
