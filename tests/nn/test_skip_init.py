"""skip_weight_init: the initialisers do nothing inside, everything is restored after."""
import pytest
import torch

from elmoc.encoders.elmo_lstm import ElmoLstmEncoder
from elmoc.nn.skip_init import skip_weight_init


def test_initialisers_skipped_inside_and_restored_after():
    before = torch.nn.init.orthogonal_
    x = torch.full((4, 4), 7.0)
    with skip_weight_init():
        assert torch.nn.init.orthogonal_(x) is x and torch.equal(x, torch.full((4, 4), 7.0))
        torch.nn.init.kaiming_uniform_(x)
        torch.nn.init.zeros_(x)
        assert torch.equal(x, torch.full((4, 4), 7.0))
    assert torch.nn.init.orthogonal_ is before
    torch.nn.init.zeros_(x)
    assert not x.any()


def test_restored_after_an_error():
    before = torch.nn.init.xavier_uniform_
    with pytest.raises(RuntimeError), skip_weight_init():
        raise RuntimeError("boom")
    assert torch.nn.init.xavier_uniform_ is before


def test_a_module_built_inside_takes_loaded_weights_exactly():
    torch.manual_seed(0)
    trained = ElmoLstmEncoder(input_dim=5, num_layers=2, cell_size=8, projection_size=4).eval()
    with skip_weight_init():
        fresh = ElmoLstmEncoder(input_dim=5, num_layers=2, cell_size=8, projection_size=4).eval()
    fresh.load_state_dict(trained.state_dict())
    x, mask = torch.randn(2, 3, 5), torch.ones(2, 3, dtype=torch.bool)
    assert torch.equal(fresh(x, mask).output, trained(x, mask).output)
