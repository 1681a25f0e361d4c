"""The training loop on a tiny synthetic LM: loss falls, resume is exact, files appear."""
import json

import pytest
import torch

from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train
from elmoc.train.settings import TrainSettings
from elmoc.errors import ConfigError

V, DIM, B, T = 40, 12, 4, 6


@pytest.fixture
def setup(tiny_lm):  # conftest.py
    return tiny_lm


def test_loss_falls_and_outputs_written(tmp_path, setup):
    vocab, spec, make_batches, make_heldout = setup
    result = train(spec, vocab, tmp_path / "run", make_batches, make_heldout)
    assert result.steps == 30
    heldout = json.loads((tmp_path / "run/heldout.json").read_text())
    assert heldout["metric"] == "cosine"
    assert heldout["after"] > heldout["before"] + 0.05
    assert 0 < heldout["constant_baseline"] < 1
    log = [json.loads(line) for line in (tmp_path / "run/train_log.jsonl").read_text().splitlines()]
    assert any(r["event"] == "train" and "tokens_per_s" in r for r in log)
    ckpt = load_checkpoint(tmp_path / "run/checkpoint.pt")
    assert ckpt["step"] == 30 and not ckpt["final"] and ckpt["direction"] == "forward" and ckpt["optimizers"]
    final = load_checkpoint(tmp_path / "run/model.pt")
    assert final["step"] == 30 and final["final"] and "optimizers" not in final and "rng" not in final
    assert final["threads"] == heldout["threads"] == torch.get_num_threads()


def test_resume_is_exact(tmp_path, setup):
    vocab, spec, make_batches, make_heldout = setup
    train(spec, vocab, tmp_path / "straight", make_batches, None)
    half = {**spec, "train": {**spec["train"], "max_steps": 20}}
    train(half, vocab, tmp_path / "resumed", make_batches, None)
    train(spec, vocab, tmp_path / "resumed", make_batches, None)  # continues from step 20
    a = load_checkpoint(tmp_path / "straight/model.pt")
    b = load_checkpoint(tmp_path / "resumed/model.pt")
    assert b["step"] == 30
    for name, value in a["model"].items():
        assert torch.equal(value, b["model"][name]), name


def test_same_seed_same_numbers(tmp_path, setup):
    vocab, spec, make_batches, make_heldout = setup
    r1 = train(spec, vocab, tmp_path / "a", make_batches, make_heldout)
    r2 = train(spec, vocab, tmp_path / "b", make_batches, make_heldout)
    assert r1.heldout[-1]["value"] == r2.heldout[-1]["value"]


def test_train_settings_reject_unknown_keys():
    with pytest.raises(ConfigError, match="bach_size"):
        TrainSettings.from_config({"bach_size": 3})


def test_a_non_finite_loss_stops_the_run_before_the_next_save(tmp_path, setup, monkeypatch):
    """The loss is checked on the device each step and read back at log steps and before
    every save: a NaN at step 12 stops the run at the save of step 15, which is not written."""
    import elmoc.train.loop as loop

    vocab, spec, make_batches, make_heldout = setup
    real_step, calls = loop.train_step, []

    def step_with_nan_from_12(*args, **kwargs):
        loss, out, state, norm = real_step(*args, **kwargs)
        calls.append(1)
        return (loss * float("nan") if len(calls) >= 12 else loss), out, state, norm

    monkeypatch.setattr(loop, "train_step", step_with_nan_from_12)
    spec = {**spec, "train": {**spec["train"], "checkpoint_every": 5}}
    with pytest.raises(FloatingPointError, match="between steps 11 and 15"):
        train(spec, vocab, tmp_path / "run", make_batches, None)
    assert load_checkpoint(tmp_path / "run/checkpoint.pt")["step"] == 10
    assert not (tmp_path / "run/model.pt").exists()
