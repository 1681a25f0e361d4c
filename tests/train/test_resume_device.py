"""Resuming on another device than the CPU (#19.1): a GPU resume loaded everything with
``map_location=device``, so the saved CPU RNG state reached ``torch.set_rng_state`` as a
CUDA tensor (TypeError) on every retry.  The ``meta`` device stands in for CUDA: any
non-CPU device makes the same call fail."""
import pytest
import torch

from elmoc.train.checkpoint import load_resume_state, rank_rng_state, set_rng_state
from elmoc.train.loop import train


def _tensors(state):
    if isinstance(state, torch.Tensor):
        return [state]
    return [t for s in state for t in _tensors(s)] if isinstance(state, (list, tuple)) else []


@pytest.mark.filterwarnings("ignore:.*meta parameter:UserWarning")
def test_trainer_resumes_on_a_non_cpu_device(tmp_path, tiny_lm):
    vocab, spec, make_batches, _ = tiny_lm
    first = {**spec, "train": {**spec["train"], "max_steps": 10}}
    train(first, vocab, tmp_path / "run", make_batches, None)
    # resume on "meta" with nothing left to train: load, check, restore RNG, write model.pt
    result = train(first, vocab, tmp_path / "run", make_batches, None, device="meta")
    assert result.steps == 10 and result.interrupted is None
    assert (tmp_path / "run/model.pt").is_file()


def test_resume_state_keeps_rng_on_cpu_and_the_carried_state_on_the_device(tmp_path, tiny_lm):
    vocab, spec, make_batches, _ = tiny_lm
    first = {**spec, "train": {**spec["train"], "max_steps": 10}}
    train(first, vocab, tmp_path / "run", make_batches, None)
    payload = load_resume_state(tmp_path / "run/checkpoint.pt", "meta")
    carried = _tensors(payload["state"])
    assert carried and all(t.device.type == "meta" for t in carried)  # what the collectives use on the GPU
    own = rank_rng_state(payload["rng"], 0, 1)
    assert own["torch"].device.type == "cpu"
    set_rng_state(own)
    assert torch.equal(torch.get_rng_state(), own["torch"])


def test_cuda_generator_states_are_saved_and_restored_from_cpu_copies(monkeypatch):
    """A fake CUDA with 2 devices (#19.2): rng_state records both generators (old code: none),
    set_rng_state gives them back as CPU uint8 tensors."""
    from elmoc.train.checkpoint import rng_state

    saved = [torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3, 4], dtype=torch.uint8)]
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in saved])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: restored.extend(states))
    state = rng_state()
    assert [s.tolist() for s in state["cuda"]] == [[1, 2], [3, 4]]
    set_rng_state(state)
    assert [(s.device.type, s.dtype, s.tolist()) for s in restored] == [
        ("cpu", torch.uint8, [1, 2]), ("cpu", torch.uint8, [3, 4])]
