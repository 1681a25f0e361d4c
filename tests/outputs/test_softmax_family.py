"""sampled / fixed / adaptive / subword against brute-force references."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from elmoc.errors import ConfigError
from elmoc.outputs.log_uniform import LogUniformSampler
from elmoc.registry import build

V, H = 30, 6


def batch(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 4, H, generator=g, dtype=dtype)
    targets = torch.randint(0, V, (3, 4), generator=g)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[2, 2:] = False
    return hidden, targets, mask


def sampled_layer(k, **kw):
    torch.manual_seed(0)
    return build("output", {"type": "sampled", "num_samples": k, **kw}, hidden_dim=H, vocab=range(V)).double()


def test_sampler_unique_counts_and_distribution():
    s = LogUniformSampler(1000, seed=3)
    ids, tries = s.sample(50)
    assert ids.numel() == 50 and ids.unique().numel() == 50 and tries >= 50
    assert ids.min() >= 0 and ids.max() < 1000
    p = s.probability(torch.arange(1000))
    assert p.sum().item() == pytest.approx(1.0, abs=1e-12)
    # empirical frequency of the draws (with replacement) matches P(k)
    u = torch.rand(200_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    draws = (torch.exp(u * s.log_range).floor().long() - 1).clamp(0, 999)
    freq = torch.bincount(draws, minlength=1000).double() / draws.numel()
    np.testing.assert_allclose(freq[:5].numpy(), p[:5].numpy(), rtol=0.03)
    e = s.expected_count(torch.tensor([0, 999]), tries)
    assert 0 < e[1] < e[0] <= 1
    # determinism per seed
    a, ta = LogUniformSampler(1000, seed=7).sample(40)
    b, tb = LogUniformSampler(1000, seed=7).sample(40)
    assert torch.equal(a, b) and ta == tb


def test_sampled_loss_and_sparse_gradient_match_brute_force():
    layer = sampled_layer(8)
    hidden, targets, mask = batch()
    sampled, tries = layer.sampler.sample(8)
    layer.sampler.sample = lambda n: (sampled, tries)  # fix the negatives for the reference
    out = layer(hidden, targets, mask)
    out.loss_sum.backward()
    assert layer.weight.weight.grad.is_sparse and layer.bias.weight.grad.is_sparse
    assert layer.sparse_parameters() == [layer.weight.weight, layer.bias.weight]
    w = layer.weight.weight.detach().clone().requires_grad_(True)
    b = layer.bias.weight.detach().clone().squeeze(1).requires_grad_(True)
    s = LogUniformSampler(V)
    total = 0.0
    for i in range(3):
        for t in range(4):
            if not mask[i, t]:
                continue
            y = int(targets[i, t])
            h = hidden[i, t]
            logits = [h @ w[y] + b[y] - torch.log(s.expected_count(torch.tensor(y), tries))]
            for j in sampled.tolist():
                if j != y:
                    logits.append(h @ w[j] + b[j] - torch.log(s.expected_count(torch.tensor(j), tries)))
            logits = torch.stack(logits)
            total = total - torch.log_softmax(logits, 0)[0]
    total.backward()
    torch.testing.assert_close(out.loss_sum.detach(), total.detach())
    torch.testing.assert_close(layer.weight.weight.grad.to_dense(), w.grad)
    torch.testing.assert_close(layer.bias.weight.grad.to_dense().squeeze(1), b.grad)
    assert out.num_tokens.item() == 10


def full_nll(layer, hidden, targets, mask):
    w, b = layer.full_table()
    logp = torch.log_softmax(layer.project(hidden) @ w.t() + b, -1)
    return -(logp.gather(-1, targets[..., None]).squeeze(-1)[mask]).sum()


def test_sampled_approaches_full_softmax():
    hidden, targets, mask = batch(1)
    layer = sampled_layer(V)
    full = full_nll(layer, hidden, targets, mask)
    torch.testing.assert_close(layer(hidden, targets, mask).loss_sum, full)  # all ids: exact
    torch.testing.assert_close(layer.evaluate(hidden, targets, mask).loss_sum, full)
    errors = []
    for k in (4, 12, 24):
        layer = sampled_layer(k)
        errs = [abs(layer(hidden, targets, mask).loss_sum.item() - full.item()) for _ in range(30)]
        errors.append(np.mean(errs))
    assert errors[0] > errors[1] > errors[2], errors


def test_eval_mode_forward_is_full_softmax_and_metric():
    layer = sampled_layer(5)
    hidden, targets, mask = batch(2)
    layer.eval()
    torch.testing.assert_close(layer(hidden, targets, mask).loss_sum, full_nll(layer, hidden, targets, mask))
    assert layer.heldout_metric == "perplexity"


def test_sampler_state_in_checkpoint():
    a = sampled_layer(5)
    hidden, targets, mask = batch()
    a(hidden, targets, mask)
    state = a.state_dict()
    b = sampled_layer(5)
    b.load_state_dict(state)
    assert torch.equal(a.sampler.sample(5)[0], b.sampler.sample(5)[0])


def test_sampler_streams_per_rank_and_step_survive_resume():
    """Negatives are a function of (seed, rank, step): ranks differ, a resumed process
    (draw counter from the checkpoint, rank from the trainer) continues its own stream."""
    a = sampled_layer(8)
    a.set_process_rank(1)
    hidden, targets, mask = batch()
    for _ in range(3):
        a(hidden, targets, mask)
    assert a.sampler.draws == 3
    resumed = sampled_layer(8)
    resumed.load_state_dict(a.state_dict())
    resumed.set_process_rank(1)
    rank0 = sampled_layer(8)
    rank0.load_state_dict(a.state_dict())
    expected = a.sampler.sample(8)[0]
    assert torch.equal(resumed.sampler.sample(8)[0], expected)
    assert not torch.equal(rank0.sampler.sample(8)[0], expected)
    fresh = LogUniformSampler(V, seed=1111)
    fresh.rank, fresh.draws = 1, 3
    assert torch.equal(fresh.sample(8)[0], expected)


def test_fixed_uses_frozen_table(tmp_path):
    table = np.random.default_rng(0).normal(size=(V, 4)).astype(np.float32)
    np.save(tmp_path / "t.npy", table)
    layer = build("output", {"type": "fixed", "vectors": str(tmp_path / "t.npy"), "num_samples": V},
                  hidden_dim=H, vocab=range(V)).double()
    assert [n for n, p in layer.named_parameters()] == ["projection.weight", "projection.bias"]
    hidden, targets, mask = batch()
    logits = layer.projection(hidden) @ torch.tensor(table, dtype=torch.float64).t()
    ref = -(torch.log_softmax(logits, -1).gather(-1, targets[..., None]).squeeze(-1)[mask]).sum()
    torch.testing.assert_close(layer.evaluate(hidden, targets, mask).loss_sum, ref)
    torch.testing.assert_close(layer(hidden, targets, mask).loss_sum, ref)  # num_samples = V: exact
    layer(hidden, targets, mask).loss_sum.backward()
    assert layer.projection.weight.grad is not None and layer.sparse_parameters() == []


def test_adaptive_single_cluster_equals_full_softmax():
    torch.manual_seed(0)
    layer = build("output", {"type": "adaptive", "cutoffs": []}, hidden_dim=H, vocab=range(V)).double()
    hidden, targets, mask = batch()
    ref = -(F.log_softmax(layer.head(hidden), -1).gather(-1, targets[..., None]).squeeze(-1)[mask]).sum()
    torch.testing.assert_close(layer(hidden, targets, mask).loss_sum, ref)


def test_adaptive_two_clusters_brute_force_and_normalized():
    torch.manual_seed(0)
    layer = build("output", {"type": "adaptive", "cutoffs": [10, 20], "div_value": 2.0}, hidden_dim=H, vocab=range(V)).double()
    hidden, targets, mask = batch()
    asm = layer.softmax
    head = F.log_softmax(asm.head(hidden), -1)  # (B, T, 10 + 2)
    parts = [head[..., :10]]
    for i, tail in enumerate(asm.tail):
        parts.append(head[..., 10 + i : 11 + i] + F.log_softmax(tail(hidden), -1))
    logp = torch.cat(parts, -1)  # (B, T, V)
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(3, 4, dtype=torch.float64))
    ref = -(logp.gather(-1, targets[..., None]).squeeze(-1)[mask]).sum()
    torch.testing.assert_close(layer(hidden, targets, mask).loss_sum, ref)
    torch.testing.assert_close(layer.evaluate(hidden, targets, mask).loss_sum, ref)


@pytest.mark.parametrize("cutoffs", [[10, 30], [40], [20, 10], [0]])
def test_adaptive_bad_cutoffs(cutoffs):
    with pytest.raises(ConfigError, match="cutoffs"):
        build("output", {"type": "adaptive", "cutoffs": cutoffs}, hidden_dim=H, vocab=range(V))


def test_subword_tied_full_softmax():
    torch.manual_seed(0)
    inp = build("input", {"type": "subword", "dim": H}, vocab=range(V)).double()
    out = build("output", {"type": "subword"}, hidden_dim=H, vocab=range(V), input_layer=inp).double()
    assert out.table() is inp.weight
    assert [n for n, _ in out.named_parameters()] == ["bias"]
    hidden, targets, mask = batch()
    ref = -(F.log_softmax(hidden @ inp.weight.t() + out.bias, -1).gather(-1, targets[..., None]).squeeze(-1)[mask]).sum()
    loss = out(hidden, targets, mask).loss_sum
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(out.evaluate(hidden, targets, mask).loss_sum, ref.detach())
    loss.backward()
    assert inp.weight.grad is not None and inp.weight.grad.abs().sum() > 0
    with pytest.raises(ConfigError, match="tie"):
        build("output", {"type": "subword"}, hidden_dim=H, vocab=range(V), input_layer=None)


def test_adaptive_gives_every_parameter_a_gradient():
    """A batch without a target in the last tail cluster: its weights get a zero gradient
    (DDP needs one from every rank), the others their real one."""
    layer = build("output", {"type": "adaptive", "cutoffs": [10, 20], "div_value": 2.0},
                  hidden_dim=H, vocab=range(V)).double()
    hidden, _, mask = batch()
    targets = torch.randint(0, 20, (3, 4), generator=torch.Generator().manual_seed(1))
    out = layer(hidden, targets, mask)
    out.loss_sum.backward()
    grads = {n: p.grad for n, p in layer.named_parameters()}
    assert all(g is not None for g in grads.values()), [n for n, g in grads.items() if g is None]
    unused = [n for n in grads if n.startswith("softmax.tail.1.")]
    assert unused and all(float(grads[n].abs().max()) == 0.0 for n in unused)
    assert float(grads["softmax.head.weight"].abs().max()) > 0
    # the value is unchanged by the zero term
    reference = -layer.softmax.log_prob(hidden[mask]).gather(1, targets[mask][:, None]).sum()
    torch.testing.assert_close(out.loss_sum, reference)
    # a window without any valid token: still a (zero) gradient for every weight
    layer.zero_grad()
    layer(hidden, targets, torch.zeros_like(mask)).loss_sum.backward()
    assert all(p.grad is not None and float(p.grad.abs().max()) == 0.0 for p in layer.parameters())


@pytest.mark.parametrize("hidden_dtype", [torch.float32, torch.bfloat16])
def test_adaptive_trains_under_bf16_autocast(hidden_dtype):
    """`train.precision: bf16` with an ADAPTIVE output (ELMo-A): PyTorch's adaptive softmax copies each
    tail cluster's log-probabilities into a tensor of the hidden state's dtype, and CPU autocast keeps
    log_softmax in bfloat16, so without care the step stops with an index_copy_ dtype error (found by the
    GPU check's CPU rehearsal).  The loss stays near the float32 one and every weight gets a gradient."""
    torch.manual_seed(0)
    layer = build("output", {"type": "adaptive", "cutoffs": [10, 20], "div_value": 2.0}, hidden_dim=H, vocab=range(V))
    hidden, targets, mask = batch(dtype=torch.float32)
    reference = layer(hidden, targets, mask).loss_sum
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        out = layer(hidden.to(hidden_dtype).requires_grad_(), targets, mask)
    out.loss_sum.backward()
    assert out.loss_sum.dtype == torch.float32
    torch.testing.assert_close(out.loss_sum, reference, rtol=0.05, atol=0.05)
    assert all(p.grad is not None for p in layer.parameters())
