import pytest
import torch

from elmoc.errors import ConfigError
from elmoc.features.scalar_mix import ScalarMix


def test_initial_mix_is_mean_of_layers():
    torch.manual_seed(0)
    layers = torch.randn(3, 2, 4, 5)
    mask = torch.ones(2, 4, dtype=torch.bool)
    out = ScalarMix(3)(layers, mask)
    assert torch.allclose(out, layers.mean(dim=0), atol=1e-6)


def test_hand_computed_weights_and_gamma():
    mix = ScalarMix(2, initial_weights=[0.0, torch.log(torch.tensor(3.0)).item()])
    with torch.no_grad():
        mix.gamma.fill_(2.0)
    a = torch.full((1, 1, 1, 2), 1.0)
    b = torch.full((1, 1, 1, 2), 5.0)
    out = mix(torch.cat([a, b]), torch.ones(1, 1, dtype=torch.bool))
    # softmax([0, log 3]) = [1/4, 3/4]; 2 * (1/4 * 1 + 3/4 * 5) = 8
    assert torch.allclose(out, torch.full((1, 1, 2), 8.0))


def test_padding_is_zero_and_ignored_by_layer_norm():
    torch.manual_seed(0)
    layers = torch.randn(2, 2, 3, 4)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    out = ScalarMix(2, layer_norm=True)(layers, mask)
    assert torch.all(out[~mask] == 0)
    changed = layers.clone()
    changed[:, ~mask] = 1000.0  # padding values must not move the statistics
    out2 = ScalarMix(2, layer_norm=True)(changed, mask)
    assert torch.allclose(out[mask], out2[mask], atol=1e-6)
    # each normalised layer has mean 0 / var 1 over unmasked elements: the equal mix's mean is 0
    assert abs(float(out[mask].mean().detach())) < 1e-5


def test_layer_norm_matches_hand_computation():
    layers = torch.tensor([[[[1.0, 3.0], [100.0, 100.0]]]])  # (1 layer, 1 batch, 2 time, 2 dim)
    mask = torch.tensor([[True, False]])
    out = ScalarMix(1, layer_norm=True)(layers, mask)
    # unmasked elements 1, 3: mean 2, var 1 -> -1, +1
    assert torch.allclose(out[0, 0], torch.tensor([-1.0, 1.0]), atol=1e-5)


def test_gradients_reach_weights_and_gamma():
    mix = ScalarMix(3)
    layers = torch.randn(3, 2, 2, 4)
    out = mix(layers, torch.ones(2, 2, dtype=torch.bool))
    (out * torch.randn_like(out)).sum().backward()
    assert mix.weights.grad is not None and mix.weights.grad.abs().sum() > 0
    assert mix.gamma.grad is not None


def test_errors():
    with pytest.raises(ConfigError, match="num_layers"):
        ScalarMix(0)
    with pytest.raises(ConfigError, match="initial weights"):
        ScalarMix(3, initial_weights=[0.0, 1.0])
    with pytest.raises(ValueError, match="num_layers=3"):
        ScalarMix(3)(torch.randn(2, 1, 1, 4), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool"):
        ScalarMix(2)(torch.randn(2, 1, 1, 4), torch.ones(1, 1))
