"""Task times leave out native kernel builds (issue 52): a slow build of the highway LSTM's
kernel, faked by delaying its load, shows as the record's ``native_build_s`` and never in its
``seconds``. The pretraining twin: tests/train/test_train_time_excludes_builds.py."""
from __future__ import annotations

import time

import pytest

from elmoc.nn import native_build

SLOW = 4.0  # seconds of a faked build; the tiny run's own time is well under it
CONLL = """\
#begin document (nw/x); part 000
nw/x 0 0 John  NNP (TOP(S(NP*) - - - - * (ARG0*) -
nw/x 0 1 said  VBD (VP*        say 01 - - * (V*) -
nw/x 0 2 hi    UH  *)))        - - - - * (ARG1*) -
#end document
"""


def test_a_kernel_build_during_a_task_run_is_not_task_time(tmp_path, random_inputs, monkeypatch):
    from elmoc.nn import alternating_lstm
    from elmoc.registry import build
    from elmoc.tasks.runner import TrainerConfig, run_task

    if alternating_lstm.native_ops() is None:
        pytest.skip(f"no native kernel here: {alternating_lstm.native_status()}")
    path = tmp_path / "tiny.gold_conll"
    path.write_text(CONLL, encoding="utf-8")
    model = {"hidden_dim": 8, "num_layers": 1, "recurrent_dropout": 0.0, "predicate_dim": 4, "feature_dropout": 0.0}
    task = build("task", {"type": "srl", "train": str(path), "dev": str(path), "test": str(path), "model": model})
    trainer = TrainerConfig.from_dict({"epochs": 1, "patience": 1, "batch_size": 1}, task.default_trainer)
    warm = run_task(task, random_inputs(task, task.read("train")), seed=1, trainer=trainer)["seconds"]
    before = native_build.build_seconds_since(0.0)
    real = native_build._library

    def slow(*args, **kwargs):
        time.sleep(SLOW)
        return real(*args, **kwargs)

    monkeypatch.setattr(native_build, "_library", slow)
    monkeypatch.setattr(alternating_lstm._EXTENSION, "state", native_build.new_state())  # built again, in the run
    result = run_task(task, random_inputs(task, task.read("train")), seed=1, trainer=trainer)
    assert alternating_lstm._EXTENSION.state["ops"] is not None
    assert result["native_build_s"] - before >= SLOW - 0.1
    assert result["seconds"] < warm + SLOW / 2, (result["seconds"], warm)
