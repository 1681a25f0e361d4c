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
