"""Table 5 encoders: plain LSTM stack and causal pre-LN Transformer follow the encoder contract."""
from __future__ import annotations

import pytest
import torch

from elmoc.encoders.transformer import sinusoidal_positions
from elmoc.errors import ConfigError
from elmoc.registry import build, list_available


def test_registered():
    assert {"elmo_lstm", "lstm", "transformer"} <= set(list_available("encoder"))


def lstm(**kw):
    cfg = {"type": "lstm", "hidden_size": 6, "num_layers": 2}
    cfg.update(kw)
    return build("encoder", cfg, input_dim=4)


def transformer(**kw):
    cfg = {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 16, "num_layers": 2, "dropout": 0.0}
    cfg.update(kw)
    return build("encoder", cfg, input_dim=4)


@pytest.mark.parametrize("factory", [lstm, transformer])
def test_padded_batch_equals_per_sentence_runs(factory):
    torch.manual_seed(0)
    enc = factory().eval()
    lengths = [5, 3, 1]
    x = torch.randn(3, 5, 4)
    mask = torch.arange(5)[None, :] < torch.tensor(lengths)[:, None]
    out = enc(x, mask)
    assert len(out.layers) == enc.num_layers == 3
    assert out.output.shape == (3, 5, enc.output_dim)
    assert out.output is out.layers[-1]
    for b, n in enumerate(lengths):
        single = enc(x[b : b + 1, :n], torch.ones(1, n, dtype=torch.bool))
        for lb, ls in zip(out.layers, single.layers):
            assert lb.shape[-1] == enc.output_dim
            torch.testing.assert_close(lb[b, :n], ls[0], atol=1e-5, rtol=1e-5)
            assert torch.all(lb[b, n:] == 0)


@pytest.mark.parametrize("factory", [lstm, transformer])
def test_causal_future_does_not_change_past(factory):
    torch.manual_seed(1)
    enc = factory().eval()
    x = torch.randn(2, 6, 4)
    ones = torch.ones(2, 6, dtype=torch.bool)
    a = enc(x, ones).output
    x2 = x.clone()
    x2[:, 4:] = torch.randn(2, 2, 4)
    b = enc(x2, ones).output
    torch.testing.assert_close(a[:, :4], b[:, :4], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_lstm_state_carry_equals_long_window():
    torch.manual_seed(2)
    enc = lstm().eval()
    x = torch.randn(2, 7, 4)
    ones = torch.ones(2, 7, dtype=torch.bool)
    whole = enc(x, ones).output
    first = enc(x[:, :3], ones[:, :3])
    second = enc(x[:, 3:], ones[:, 3:], first.state)
    torch.testing.assert_close(torch.cat([first.output, second.output], 1), whole, atol=1e-5, rtol=1e-5)
    assert len(first.state) == 2 and first.state[0][0].shape == (2, 6)


def test_lstm_rejects_holes_in_mask():
    enc = lstm()
    mask = torch.tensor([[True, False, True]])
    with pytest.raises(ValueError, match="right-padded"):
        enc(torch.randn(1, 3, 4), mask)


def test_transformer_gradients_reach_all_blocks():
    torch.manual_seed(3)
    enc = transformer()
    x = torch.randn(2, 5, 4, requires_grad=True)
    enc(x, torch.ones(2, 5, dtype=torch.bool)).output.sum().backward()
    assert x.grad.abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.blocks[0].parameters())


def test_sinusoidal_positions_values():
    table = sinusoidal_positions(3, 4)
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert table[1, 0].item() == pytest.approx(torch.sin(torch.tensor(1.0)).item())
    assert table[1, 3].item() == pytest.approx(torch.cos(torch.tensor(0.01)).item())


@pytest.mark.parametrize("kw", [{"heads": 3}, {"d_model": 0}, {"dropout": 1.5}])
def test_transformer_config_errors(kw):
    with pytest.raises(ConfigError, match="transformer"):
        transformer(**kw)


@pytest.mark.parametrize("kw", [{"hidden_size": 0}, {"num_layers": "2"}, {"dropout": -0.1}])
def test_lstm_config_errors(kw):
    with pytest.raises(ConfigError, match="lstm"):
        lstm(**kw)
