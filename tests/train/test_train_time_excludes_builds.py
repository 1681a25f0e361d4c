"""Pretraining times leave out native kernel builds (issue 52): a slow build, faked by delaying
the kernel's load, shows as ``native_build_s`` and never in ``seconds`` (heldout.json, the train
log). The task runner's twin: tests/tasks/test_task_time_excludes_builds.py."""
from __future__ import annotations

import json
import time

import pytest

from elmoc.nn import native_build
from elmoc.train.loop import train

SLOW = 4.0  # seconds of a faked build; a tiny run's own time is well under it


def test_a_kernel_build_during_pretraining_is_not_training_time(tmp_path, tiny_lm, monkeypatch):
    from elmoc.encoders import native

    if native.native_ops() is None:
        pytest.skip(f"no native kernel here: {native.native_status()}")
    vocab, spec, make_batches, make_heldout = tiny_lm
    train(spec, vocab, tmp_path / "warm", make_batches, make_heldout)  # the same run, its kernel loaded already
    warm = json.loads((tmp_path / "warm/heldout.json").read_text())["seconds"]
    real = native_build._library

    def slow(*args, **kwargs):  # a first build: SLOW seconds, then the (cached) library
        time.sleep(SLOW)
        return real(*args, **kwargs)

    monkeypatch.setattr(native_build, "_library", slow)
    monkeypatch.setattr(native, "_state", native_build.new_state())  # loaded again, inside the run
    before = native_build.build_seconds_since(0.0)
    train(spec, vocab, tmp_path / "run", make_batches, make_heldout)
    assert native._state["ops"] is not None  # the run used the kernel it "built"
    heldout = json.loads((tmp_path / "run/heldout.json").read_text())
    assert heldout["native_build_s"] - before >= SLOW - 0.1
    assert heldout["seconds"] < warm + SLOW / 2, (heldout["seconds"], warm)
    log = [json.loads(line) for line in (tmp_path / "run/train_log.jsonl").read_text().splitlines()]
    steps = [r for r in log if r["event"] == "train"]
    assert steps and all(r["seconds"] < warm + SLOW / 2 for r in steps)
