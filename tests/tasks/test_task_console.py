"""A task run's progress line on the workflow's console (issue 52): epoch, batch, the epoch's
mean loss and the time left at most, never negative."""
from __future__ import annotations

import os
import re

from elmoc.io.console import FD_ENV, SECONDS_ENV, console_env

CONLL = """\
#begin document (nw/x); part 000
nw/x 0 0 John  NNP (TOP(S(NP*) - - - - * (ARG0*) -
nw/x 0 1 said  VBD (VP*        say 01 - - * (V*) -
nw/x 0 2 hi    UH  *)))        - - - - * (ARG1*) -

nw/x 0 0 Mary  NNP (TOP(S(NP*) - - - - * (ARG0*) -
nw/x 0 1 slept VBD (VP*)))     sleep 01 - - * (V*) -
#end document
"""


def test_task_runs_write_epoch_batch_loss_and_eta(tmp_path, random_inputs, monkeypatch):
    from elmoc.registry import build
    from elmoc.tasks.runner import TrainerConfig, run_task

    console = tmp_path / "console.txt"
    fd = os.open(console, os.O_WRONLY | os.O_CREAT)
    monkeypatch.setenv(FD_ENV, console_env(fd))
    monkeypatch.setenv(SECONDS_ENV, "0")  # a line after every step
    path = tmp_path / "tiny.gold_conll"
    path.write_text(CONLL, encoding="utf-8")
    model = {"hidden_dim": 8, "num_layers": 1, "recurrent_dropout": 0.0, "predicate_dim": 4, "feature_dropout": 0.0}
    task = build("task", {"type": "srl", "train": str(path), "dev": str(path), "test": str(path), "model": model})
    trainer = TrainerConfig.from_dict({"epochs": 2, "patience": 5, "batch_size": 1}, task.default_trainer)
    run_task(task, random_inputs(task, task.read("train")), seed=1, trainer=trainer)
    os.close(fd)
    lines = console.read_text().splitlines()
    pattern = re.compile(r"^\[task srl\] epoch ([12])/2, batch ([12])/2, loss \d+\.\d{4}, ETA \d+ s at most$")
    assert [pattern.match(line) is not None for line in lines] == [True] * 4, lines
    assert [(m[1], m[2]) for m in map(pattern.match, lines)] == [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]
