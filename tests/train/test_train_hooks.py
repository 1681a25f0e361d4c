"""The training loop's hook interface (src/elmoc/train/hooks/base.py): a hook passed to train()
starts a fresh run, runs after every step, puts its keys into checkpoint.pt (and model.pt only
when it says so) and gets them back on resume; a registered hook is asked by every run; the
weight initialisation StartFrom sets the weights and the first step."""
from __future__ import annotations

import copy

import torch

from elmoc import registry
from elmoc.model_file import load_checkpoint
from elmoc.registry import register
from elmoc.train.hooks.base import StartFrom, TrainHook
from elmoc.train.loop import train


class Counting(TrainHook):
    """Counts steps; its count is its checkpoint state."""

    def __init__(self, key: str = "counted", in_model_file: bool = False):
        self.key, self.in_model_file = key, in_model_file
        self.calls, self.count, self.loaded = [], 0, None

    def start(self, model, step=0):
        self.calls.append(("start", step))

    def after_step(self, model, step):
        self.calls.append(("after", step))
        self.count += 1

    def state_dict(self):
        return {self.key: torch.tensor(self.count)}

    def load_state_dict(self, payload):
        self.loaded = int(payload[self.key])
        self.count = self.loaded


def _spec(tiny_lm, steps=4):
    vocab, spec, make_batches, make_heldout = tiny_lm
    spec = copy.deepcopy(spec)
    spec["train"].update(max_steps=steps, checkpoint_every=2)
    return vocab, spec, make_batches, make_heldout


def test_a_hook_starts_the_run_follows_every_step_and_comes_back_on_resume(tiny_lm, tmp_path):
    vocab, spec, make_batches, make_heldout = _spec(tiny_lm)
    hook, kept = Counting(), Counting("kept", in_model_file=True)
    train(spec, vocab, tmp_path / "run", make_batches, make_heldout, hooks=[hook, kept])
    assert hook.calls == [("start", 0), ("after", 1), ("after", 2), ("after", 3), ("after", 4)]
    assert int(load_checkpoint(tmp_path / "run/checkpoint.pt")["counted"]) == 4
    final = load_checkpoint(tmp_path / "run/model.pt")
    assert "counted" not in final and int(final["kept"]) == 4  # checkpoint-only unless in_model_file
    again = Counting()
    train(spec, vocab, tmp_path / "run", make_batches, make_heldout, hooks=[again, Counting("kept")])
    assert again.loaded == 4 and again.calls == []  # resumed: no start, its state from the checkpoint


def test_start_from_sets_the_weights_and_the_first_step(tiny_lm, tmp_path):
    vocab, spec, make_batches, make_heldout = _spec(tiny_lm, steps=5)
    train(spec, vocab, tmp_path / "a", make_batches, make_heldout)
    weights = load_checkpoint(tmp_path / "a/model.pt")["model"]
    hook = Counting()
    result = train(spec, vocab, tmp_path / "b", make_batches, make_heldout, hooks=[StartFrom(weights, 3), hook])
    assert result.steps == 5 and hook.calls[0] == ("start", 3) and hook.count == 2  # steps 4 and 5 only
    first = [r for r in result.heldout if r["tag"] == "before"][0]
    assert first["step"] == 3  # evaluated on the given weights before its first step


def test_a_registered_hook_is_asked_by_every_run(tiny_lm, tmp_path):
    vocab, spec, make_batches, make_heldout = _spec(tiny_lm, steps=2)
    made = []

    @register("train_hook", "test_counting")
    class Registered(Counting):
        @classmethod
        def from_run(cls, trainer):
            made.append(cls() if trainer.spec["train"].get("seed") == 3 else None)
            return made[-1]

    try:
        train(spec, vocab, tmp_path / "r", make_batches, make_heldout)
        assert made[0] is not None and made[0].count == 2
        assert int(load_checkpoint(tmp_path / "r/checkpoint.pt")["counted"]) == 2
    finally:
        registry._REGISTRY["train_hook"].pop("test_counting")
