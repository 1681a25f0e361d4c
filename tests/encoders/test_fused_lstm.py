"""The fused cell (issue 44.2): the LSTM's time loops compiled by torch.compile (encoders/fused_lstm.py).

On the CPU, Inductor generates C++ for the same traced loops that Triton runs on CUDA.  Against
the Python loop in float32: outputs, states and every gradient within 1e-5; the recurrent dropout
masks are the encoder's own (the random stream is consumed the same); two runs are bit-equal
(what an exact resume needs).  Compiling takes tens of seconds per shape, so these are slow.
"""
from __future__ import annotations

import pytest
import torch
from benchmark_scripts import load_benchmark

from elmoc.registry import build

pytestmark = pytest.mark.slow


def make(fused, layer_norm=True):
    cfg = {"type": "elmo_lstm", "num_layers": 2, "cell_size": 12, "projection_size": 5, "cell_clip": 0.6,
           "proj_clip": 0.8, "recurrent_dropout": 0.3, "layer_norm": layer_norm, "fused_cell": fused}
    torch.manual_seed(0)
    return build("encoder", cfg, input_dim=6).train()


def run(enc, x, mask, state, bf16=False):
    torch.manual_seed(11)
    xi = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = enc(xi, mask, state)
    loss = sum((layer.float() * (k + 1)).pow(2).sum() for k, layer in enumerate(out.layers[1:]))
    loss = loss + sum(h.sum() - 0.5 * c.sum() for h, c in out.state)
    grads = torch.autograd.grad(loss, [xi] + list(enc.parameters()))
    return [*out.layers, *(t for s in out.state for t in s), *grads], torch.get_rng_state()


@pytest.mark.parametrize("ragged", [False, True])
def test_fused_cell_equals_the_python_loop(monkeypatch, ragged):
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 6, generator=g)
    mask = torch.ones(3, 4, dtype=torch.bool)
    if ragged:
        mask[1, 2:] = False
        mask[2, 0] = False
    state = [(torch.randn(3, 5, generator=g) * 0.3, torch.randn(3, 12, generator=g) * 0.3) for _ in range(2)]
    ref, ref_rng = run(make(False), x, mask, state)
    fused_enc = make(True)
    got, rng = run(fused_enc, x, mask, state)
    assert torch.equal(rng, ref_rng)  # the dropout masks drew the same random numbers
    for a, b in zip(got, ref):
        assert a.dtype == b.dtype and (a - b).abs().max() <= 1e-5 * max(1.0, float(b.detach().abs().max()))
    again, _ = run(fused_enc, x, mask, state)  # compiled once: a rerun (a resumed run's step) is bit-equal
    assert all(torch.equal(a, b) for a, b in zip(again, got))


def test_fused_cell_under_bf16_matches_the_mixed_python_loop(monkeypatch):
    """bf16 autocast: the compiled loop takes the same bf16 products as the Python loop's mixed path."""
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    x, mask = torch.randn(3, 4, 6), torch.ones(3, 4, dtype=torch.bool)
    ref, _ = run(make(False), x, mask, None, bf16=True)
    got, _ = run(make(True), x, mask, None, bf16=True)
    assert got[1].dtype == torch.bfloat16
    for a, b in zip(got, ref):  # both round to bf16, at different points (the fused loop keeps tanh exact)
        assert (a.float() - b.float()).abs().max() <= 3e-2 * max(1.0, float(b.detach().float().abs().max()))


@pytest.mark.gpu
def test_fused_cell_on_cuda_equals_the_python_loop_over_replayed_steps():
    """On a GPU (CUDA graphs through mode="reduce-overhead"): three training steps of the fused encoder,
    state carried, equal the Python loop's within 1e-5 in float32 (TF32 off): the later steps replay the
    recorded graphs, so this also checks that a replay does not overwrite what the backward still needs.
    Run by gpu_check.sh's fused step (it compiles), not by its tests step."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    before = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    try:
        g = torch.Generator().manual_seed(1)
        x = torch.randn(3, 4, 6, generator=g).cuda()
        mask = torch.ones(3, 4, dtype=torch.bool)
        results = []
        for fused in (False, True):
            enc, state, got = make(fused).cuda(), None, []
            for _ in range(3):
                values, _ = run(enc, x, mask.cuda(), state)
                state = [(values[3 + 2 * k].detach(), values[4 + 2 * k].detach()) for k in range(2)]
                got.append([v.detach().clone() for v in values])
            results.append(got)
        for ref_step, fused_step in zip(*results):
            for a, b in zip(fused_step, ref_step):
                assert (a - b).abs().max() <= 1e-5 * max(1.0, float(b.detach().abs().max()))
    finally:
        torch.backends.cuda.matmul.fp32_precision = before


@pytest.mark.gpu
def test_fused_training_step_on_cuda_replays_graphs_and_launches_do_not_grow_with_bptt(tmp_path):
    """On a GPU, after lstm_profile's warm-up (FUSED_WARMUP steps: CUDA graph trees warm a function up eagerly,
    then record one graph per layer's static inputs): a fused training step of the tiny ELMo-C in float32
    launches the same kernels and CUDA graphs at bptt 10 and 20 (the time loops replay as one graph launch per
    call), records no graph and skips none.  The first GPU check counted a step that still recorded (its launches
    grew ~15 per time step).  Run by gpu_check.sh's fused step, whose counts compiled these shapes just before."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    lstm_profile = load_benchmark("lstm_profile")
    rows = [lstm_profile.profile_steps("ELMo-C", "fp32", bptt, steps=1, device="cuda", scratch=tmp_path, fused=True)
            for bptt in (10, 20)]
    why = [r["cudagraph_log"] for r in rows]  # the trees' log: recordings, re-recordings and their reasons, skips
    for r in rows:
        assert r["cudagraph_skips"] == 0 and r["graph_records"] == 0, why
        assert r["graph_launches"] == r["regions"] == 4, why  # 2 layers x (forward, reverse): every call replayed
    assert rows[0]["host"] == rows[1]["host"]
    assert (rows[0]["kernel_launches"] + rows[0]["graph_launches"]
            == rows[1]["kernel_launches"] + rows[1]["graph_launches"]), rows


def test_cuda_wrapper_copies_outputs_out_of_the_graphs_memory(monkeypatch):
    """CPU stand-in for CUDA graphs' output reuse: a fake ``torch.compile`` whose function writes every
    call's results into the same buffers, as a replayed graph does.  The CUDA wrapper must hand back
    copies (the first GPU check failed on this) and mark each call as a new graph step."""
    from elmoc.encoders import fused_lstm

    buffers = (torch.zeros(3), torch.zeros(2))
    marks = []

    def fake_compile(fn, **kwargs):
        assert kwargs["mode"] == "reduce-overhead"

        def replay(x):
            buffers[0].fill_(x)
            buffers[1].fill_(-x)
            return buffers
        return replay

    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    fused_lstm.compiled.cache_clear()
    try:
        run = fused_lstm.compiled(fused_lstm.forward_loop, "cuda")
        first = run(1.0)
        second = run(2.0)
    finally:
        fused_lstm.compiled.cache_clear()
    assert first[0].tolist() == [1.0] * 3 and first[1].tolist() == [-1.0] * 2  # not overwritten by the replay
    assert second[0].tolist() == [2.0] * 3 and len(marks) == 2


def test_compiling_raises_dynamos_recompile_limit():
    """Dynamo's default of 8 graphs per function is a hard error under fullgraph=True; the GPU check's fused
    step (three precisions at paper size, then two window lengths each) stopped at the 9th."""
    from elmoc.encoders import fused_lstm

    before = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 8
    fused_lstm.compiled.cache_clear()
    try:
        fused_lstm.compiled(fused_lstm.reverse_loop, "cpu")
        assert torch._dynamo.config.recompile_limit >= fused_lstm.RECOMPILE_LIMIT > 8
    finally:
        torch._dynamo.config.recompile_limit = before
        fused_lstm.compiled.cache_clear()
