"""cosine / l2 / vmf against brute-force references (values and gradients)."""
import math

import pytest
import torch

from elmoc.errors import ConfigError
from elmoc.registry import build


def make(kind, path, hidden=4, **kw):
    torch.manual_seed(0)
    return build("output", {"type": kind, "vectors": str(path), **kw}, hidden_dim=hidden, vocab=range(12))


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    targets = torch.tensor([[1, 5, 11], [0, 7, 3]])
    mask = torch.tensor([[True, True, True], [True, False, True]])
    return hidden, targets, mask


def reference(kind, layer, hidden, targets, mask, table):
    w = layer.projection.weight.detach().double().clone().requires_grad_(True)
    b = layer.projection.bias.detach().double().clone().requires_grad_(True)
    total = 0.0
    for i in range(hidden.shape[0]):
        for t in range(hidden.shape[1]):
            if not mask[i, t]:
                continue
            c = w @ hidden[i, t] + b
            e = torch.tensor(table[targets[i, t]], dtype=torch.float64)
            if kind == "cosine":
                total = total - (c @ e) / (c.norm() * e.norm())
            elif kind == "l2":
                total = total + ((c - e) ** 2).sum()
            else:
                m = c.shape[0]
                v = m / 2 - 1
                kappa = c.norm()
                from scipy.special import iv
                log_c = v * torch.log(kappa) - m / 2 * math.log(2 * math.pi) - math.log(iv(v, kappa.item()))
                # d/dkappa log I_v = I_{v+1}/I_v + v/kappa, attached by hand to the float value
                ratio = iv(v + 1, kappa.item()) / iv(v, kappa.item()) + v / kappa.item()
                log_iv_term = kappa * ratio - (kappa * ratio).detach()
                total = total - c @ (e / e.norm()) - log_c + log_iv_term
    total.backward()
    return total.detach(), w.grad, b.grad


@pytest.mark.parametrize("kind", ["cosine", "l2", "vmf"])
def test_loss_and_gradient_match_brute_force(kind, target_table):
    path, table = target_table
    layer = make(kind, path).double()
    hidden, targets, mask = batch()
    out = layer(hidden, targets, mask)
    out.loss_sum.backward()
    ref_loss, ref_gw, ref_gb = reference(kind, layer, hidden, targets, mask, table)
    assert out.num_tokens.item() == 5
    torch.testing.assert_close(out.loss_sum.detach(), ref_loss, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(layer.projection.weight.grad, ref_gw, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(layer.projection.bias.grad, ref_gb, rtol=1e-7, atol=1e-9)
    assert layer.heldout_metric == "cosine"


@pytest.mark.parametrize("kind", ["cosine", "l2", "vmf"])
def test_evaluate_is_negative_cosine_sum(kind, target_table):
    path, table = target_table
    layer = make(kind, path).double()
    hidden, targets, mask = batch(3)
    ev = layer.evaluate(hidden, targets, mask)
    cos_ref = reference("cosine", layer, hidden, targets, mask, table)[0]
    torch.testing.assert_close(ev.loss_sum, cos_ref)
    torch.testing.assert_close(torch.as_tensor(ev.logs["cosine"]), -cos_ref / 5)
    train = layer(hidden, targets, mask)
    torch.testing.assert_close(torch.as_tensor(train.logs["cosine"]), -cos_ref / 5)
    if kind == "cosine":
        torch.testing.assert_close(train.loss_sum.detach(), ev.loss_sum)


def test_target_is_unnormalized_and_masked_positions_ignored(target_table):
    path, table = target_table
    layer = make("l2", path).double()
    hidden, targets, mask = batch()
    a = layer(hidden, targets, mask).loss_sum
    hidden2 = hidden.clone()
    hidden2[1, 1] += 100.0  # masked position
    assert layer(hidden2, targets, mask).loss_sum.item() == pytest.approx(a.item())


def test_shares_table_with_same_input_layer(target_table):
    path, _ = target_table
    inp = build("input", {"type": "fasttext", "vectors": str(path)}, vocab=range(12))
    out = build("output", {"type": "cosine", "vectors": str(path)}, hidden_dim=4, vocab=range(12), input_layer=inp)
    assert out.target_table.data_ptr() == inp.weight.data_ptr()
    assert [n for n, _ in out.named_parameters()] == ["projection.weight", "projection.bias"]


def test_host_resident_target_table(target_table):
    path, _ = target_table
    a = make("cosine", path)
    b = make("cosine", path, host_resident=True)
    hidden, targets, mask = batch()
    assert list(b.buffers()) == []
    torch.testing.assert_close(a(hidden.float(), targets, mask).loss_sum, b(hidden.float(), targets, mask).loss_sum)


def test_bad_options(target_table):
    path, _ = target_table
    with pytest.raises(ConfigError, match="lambda_dot"):
        make("vmf", path, lambda_dot=0)
    with pytest.raises(ConfigError, match="unknown key"):
        make("cosine", path, per_dim=True)
