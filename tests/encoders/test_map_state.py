"""encoders.base.map_state: the one walk over a carried state (detach, shard, gather, row selection)."""
import pytest
import torch

from elmoc.encoders.base import Encoder, map_state


def test_the_nesting_is_kept_and_states_are_zipped():
    state = [(torch.arange(4.0), torch.arange(4.0) * 10), (torch.ones(4), torch.zeros(4))]
    rows = map_state(lambda t: t[[2, 0]], state)
    assert isinstance(rows, list) and all(isinstance(layer, tuple) for layer in rows)
    assert rows[0][1].tolist() == [20.0, 0.0]
    summed = map_state(torch.add, state, state)  # tensors at the same places, pairwise
    assert summed[0][0].tolist() == [0.0, 2.0, 4.0, 6.0] and summed[1][0].tolist() == [2.0] * 4
    assert map_state(lambda t: t, None) is None and map_state(lambda t: t, (None, state))[0] is None


def test_a_mismatch_or_a_foreign_object_is_an_error():
    with pytest.raises(ValueError):  # zip(strict=True): not the same structure
        map_state(torch.add, [torch.ones(1)], [torch.ones(1), torch.ones(1)])
    with pytest.raises(TypeError, match="lists and tuples"):
        Encoder.detach_state({"h": torch.ones(1)})
