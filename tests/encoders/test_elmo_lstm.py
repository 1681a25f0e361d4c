"""ELMo LSTM encoder: spec 1.1 math against a per-step reference, masks, state, config errors."""
from __future__ import annotations

import pytest
import torch

from elmoc.bench.reference_lstm import reference_forward
from elmoc.encoders.base import Encoder
from elmoc.encoders import native
from elmoc.encoders.elmo_lstm import ElmoLstmEncoder
from elmoc.encoders.projected_lstm import _ProjectedLstmFunction
from elmoc.errors import ConfigError
from elmoc.registry import build


@pytest.fixture(params=["native", "python"])
def time_loop(request, monkeypatch):
    """Run a test with the C++ time loop and again with the Python one."""
    if request.param == "python":
        monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    elif native.native_ops() is None:
        pytest.fail(f"native LSTM kernel did not build: {native.native_status()}")
    return request.param


def make(input_dim=6, **kw):
    cfg = {"type": "elmo_lstm", "num_layers": 2, "cell_size": 12, "projection_size": 5,
           "cell_clip": 0.6, "proj_clip": 0.8, "recurrent_dropout": 0.3}
    cfg.update(kw)
    return build("encoder", cfg, input_dim=input_dim)


def ragged_mask():
    return torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1, 1, 0, 1, 1, 1, 0], [0] * 7]).bool()


def drawn_dropout_masks(encoder, batch, seed):
    """The masks the encoder draws in training mode after ``manual_seed(seed)``."""
    torch.manual_seed(seed)
    like = next(encoder.parameters())
    return [encoder._dropout_mask(batch, like) for _ in encoder.lstm_layers]


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("layer_norm", [True, False])
def test_matches_per_step_reference_outputs_and_gradients(layer_norm, dtype, tol, time_loop):
    """Float32 differences are rounding only (float64 agrees to 1e-10); 1e-5 is relative
    to each gradient's largest entry, since LayerNorm's backward cancels terms."""
    torch.manual_seed(0)
    enc = make(layer_norm=layer_norm).to(dtype)
    enc.train()
    x = torch.randn(4, 7, 6, dtype=dtype, requires_grad=True)
    mask = ragged_mask()
    state = [(torch.randn(4, 5, dtype=dtype) * 0.5, torch.randn(4, 12, dtype=dtype) * 0.5) for _ in range(2)]
    torch.manual_seed(11)
    fast = enc(x, mask, state)
    masks = drawn_dropout_masks(enc, 4, 11)
    assert all(m is not None for m in masks)
    ref = reference_forward(enc, x, mask, state, masks)
    assert len(fast.layers) == enc.num_layers == 3
    for a, b in zip(fast.layers, ref.layers):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    for (h1, c1), (h2, c2) in zip(fast.state, ref.state):
        torch.testing.assert_close(h1, h2, atol=tol, rtol=tol)
        torch.testing.assert_close(c1, c2, atol=tol, rtol=tol)
    torch.manual_seed(12)
    weights = [torch.randn_like(t) for t in fast.layers]
    params = [x] + list(enc.parameters())

    def objective(out):
        total = sum((layer * w).sum() for layer, w in zip(out.layers, weights))
        return total + out.state[0][1].sum() + 0.5 * out.state[1][0].sum()

    g_fast = torch.autograd.grad(objective(fast), params)
    g_ref = torch.autograd.grad(objective(ref), params)
    for a, b in zip(g_fast, g_ref):
        assert (a - b).abs().max() <= tol * b.abs().max()
        assert a.abs().sum() > 0


def test_clipping_is_active_in_the_comparison(time_loop):
    """The reference test is only meaningful if the clips actually bind somewhere."""
    torch.manual_seed(0)
    enc = make(cell_clip=0.05, proj_clip=0.05, layer_norm=False, recurrent_dropout=0.0)
    x = torch.randn(4, 7, 6) * 3
    out = enc(x, ragged_mask())
    assert out.layers[1].abs().max().item() == pytest.approx(0.05)
    ref = reference_forward(enc, x, ragged_mask())
    torch.testing.assert_close(out.output, ref.output, atol=1e-6, rtol=1e-6)


def test_gradcheck_float64(time_loop):
    torch.manual_seed(1)
    steps, batch, cell, proj = 4, 3, 3, 2
    gates = torch.randn(steps, batch, 4 * cell, dtype=torch.double, requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 1]]).bool()
    h0 = torch.randn(batch, proj, dtype=torch.double, requires_grad=True)
    c0 = torch.randn(batch, cell, dtype=torch.double, requires_grad=True)
    ws = torch.randn(4 * cell, proj, dtype=torch.double, requires_grad=True)
    wp = torch.randn(proj, cell, dtype=torch.double, requires_grad=True)
    ln_w = torch.randn(proj, dtype=torch.double, requires_grad=True)
    ln_b = torch.randn(proj, dtype=torch.double, requires_grad=True)
    drop = torch.tensor([[2.0, 0.0], [2.0, 2.0], [0.0, 2.0]], dtype=torch.double)
    # Clip values far from the data so gradcheck's finite differences never straddle one.
    fn = lambda *a: _ProjectedLstmFunction.apply(a[0], mask, *a[1:], drop, 50.0, 50.0)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (gates, h0, c0, ws, wp, ln_w, ln_b), eps=1e-6, atol=1e-6)
    fn_all = lambda *a: _ProjectedLstmFunction.apply(a[0], torch.ones(steps, batch, dtype=torch.bool),  # noqa: E731
                                                     *a[1:], None, None, None)
    assert torch.autograd.gradcheck(fn_all, (gates, h0, c0, ws, wp, None, None), eps=1e-6, atol=1e-6)


def test_padded_batch_equals_per_sentence_runs_and_masked_positions_are_zero(time_loop):
    torch.manual_seed(2)
    enc = make().eval()
    lengths = [7, 4, 2]
    x = torch.randn(3, 7, 6)
    mask = torch.arange(7)[None, :] < torch.tensor(lengths)[:, None]
    batched = enc(x, mask)
    for b, n in enumerate(lengths):
        single = enc(x[b : b + 1, :n], torch.ones(1, n, dtype=torch.bool))
        for layer_b, layer_s in zip(batched.layers, single.layers):
            torch.testing.assert_close(layer_b[b, :n], layer_s[0], atol=1e-6, rtol=1e-6)
            assert torch.all(layer_b[b, n:] == 0)
        for (hb, cb), (hs, cs) in zip(batched.state, single.state):
            torch.testing.assert_close(hb[b], hs[0], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(cb[b], cs[0], atol=1e-6, rtol=1e-6)


def test_state_carried_across_windows_equals_one_long_window():
    # float64, so that matmul blocking differences (16 vs 10 rows) stay far below the tolerance
    torch.manual_seed(3)
    enc = make().double().eval()
    x = torch.randn(2, 8, 6, dtype=torch.float64)
    ones = torch.ones(2, 8, dtype=torch.bool)
    whole = enc(x, ones)
    first = enc(x[:, :5], ones[:, :5])
    second = enc(x[:, 5:], ones[:, 5:], Encoder.detach_state(first.state))
    torch.testing.assert_close(torch.cat([first.output, second.output], 1), whole.output, atol=1e-10, rtol=1e-10)


def test_dropout_only_in_training_and_seeded_determinism():
    torch.manual_seed(4)
    enc = make(recurrent_dropout=0.5)
    x = torch.randn(2, 5, 6)
    ones = torch.ones(2, 5, dtype=torch.bool)
    enc.eval()
    a, b = enc(x, ones).output, enc(x, ones).output
    assert torch.equal(a, b)
    enc.train()
    torch.manual_seed(9)
    t1 = enc(x, ones).output
    torch.manual_seed(9)
    t2 = enc(x, ones).output
    assert torch.equal(t1, t2)
    assert not torch.allclose(t1, a)
    # The variational mask is shared by all time steps: a dropped unit of layer 1 is
    # exactly zero at every step (layer 1 has no residual).
    torch.manual_seed(9)
    layer1 = enc(x, ones).layers[1]
    dropped = (layer1 == 0).all(dim=1)  # (batch, proj)
    assert dropped.any()


def test_initialization_forget_bias_and_block_orthogonal():
    enc = make(input_dim=5, cell_size=8, projection_size=5)
    layer = enc.lstm_layers[0]
    bias = layer.state_linearity.bias.detach()
    assert torch.all(bias[8:16] == 1) and torch.all(bias[:8] == 0) and torch.all(bias[16:] == 0)
    for block in layer.state_linearity.weight.detach().split(8, dim=0):  # (8, 5) blocks
        torch.testing.assert_close(block.t() @ block, torch.eye(5), atol=1e-5, rtol=0)


def test_projection_and_layer_norm_structure():
    with_proj = make(input_dim=6)
    assert with_proj.input_projection is not None and with_proj.input_norm is not None
    plain = make(input_dim=6, layer_norm=False)
    assert plain.input_norm is None and all(layer.layer_norm is None for layer in plain.lstm_layers)
    same = make(input_dim=5).eval()  # 5 == projection_size: no projection, layer 0 = raw input
    assert same.input_projection is None and same.input_norm is None
    x = torch.randn(2, 3, 5)
    out = same(x, torch.ones(2, 3, dtype=torch.bool))
    assert torch.equal(out.layers[0], x)
    forced = make(input_dim=5, input_projection=True)
    assert forced.input_projection is not None


def test_paper_size_parameter_count():
    """Spec 1.3 / P27: ELMo-C is 38,092,588 per direction = encoder + Linear(512->300)."""
    enc = ElmoLstmEncoder(input_dim=300)
    n = sum(p.numel() for p in enc.parameters())
    assert n + 512 * 300 + 300 == 38_092_588
    assert enc.output_dim == 512 and enc.num_layers == 3


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"num_layers": 0}, "num_layers"),
        ({"cell_size": -1}, "cell_size"),
        ({"cell_clip": 0}, "cell_clip"),
        ({"recurrent_dropout": 1.0}, "recurrent_dropout"),
        ({"input_projection": False}, "input_projection"),
    ],
)
def test_config_errors_name_the_fix(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        make(**kw)


def test_forward_rejects_bad_mask():
    enc = make()
    with pytest.raises(ValueError, match="bool"):
        enc(torch.randn(2, 3, 6), torch.ones(2, 3))


def test_autocast_bf16_runs_and_keeps_recurrence_in_float32():
    torch.manual_seed(5)
    enc = make().eval()
    x = torch.randn(2, 4, 6)
    ones = torch.ones(2, 4, dtype=torch.bool)
    ref = enc(x, ones).output
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = enc(x, ones)
    assert out.state[0][1].dtype == torch.float32
    torch.testing.assert_close(out.output.float(), ref, atol=5e-2, rtol=5e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("layer_norm", [True, False])
def test_cuda_time_loop_equals_the_cpu_one(layer_norm):
    """On CUDA tensors the encoder takes the Python time loop (projected_lstm.py; the C++ loop is
    CPU-only): outputs, carried state and gradients equal the CPU's within 1e-5 in float32 (TF32 off)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    before = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    try:
        torch.manual_seed(0)
        cpu = make(layer_norm=layer_norm, recurrent_dropout=0.0)
        gpu = make(layer_norm=layer_norm, recurrent_dropout=0.0)
        gpu.load_state_dict(cpu.state_dict())
        gpu = gpu.cuda()
        x = torch.randn(4, 7, 6)
        mask = ragged_mask()
        results = []
        for enc, device in ((cpu, "cpu"), (gpu, "cuda")):
            xi = x.to(device).requires_grad_()
            out = enc(xi, mask.to(device))
            loss = sum(layer.pow(2).sum() for layer in out.layers)
            grads = torch.autograd.grad(loss, [xi] + list(enc.parameters()))
            results.append([out.output, *out.layers, *grads])
        for a, b in zip(*results):
            assert (a - b.cpu()).abs().max() <= 1e-5 * max(1.0, float(a.abs().max()))
    finally:
        torch.backends.cuda.matmul.fp32_precision = before
