"""Stopping before the SLURM job's time limit without a signal, and time-based
checkpoints (#19.3).  The job's end time comes from ``SLURM_JOB_END_TIME`` or from a
fake ``squeue`` on PATH; the checkpoint clock is a fake that advances one minute per
batch."""
import logging
import os
import time
from datetime import datetime

import pytest
import torch

from elmoc.errors import ConfigError
from elmoc.model_file import load_checkpoint
from elmoc.train import loop, periodic
from elmoc.train.signals import TIME_LIMIT, Deadline
from elmoc.train.loop import train
from elmoc.train.settings import TrainSettings

SLURM_VARS = ("SLURM_JOB_END_TIME", "SLURM_JOB_ID")


@pytest.fixture(autouse=True)
def no_slurm(monkeypatch):
    for name in SLURM_VARS:
        monkeypatch.delenv(name, raising=False)


def _same_model(a, b):
    x, y = load_checkpoint(a), load_checkpoint(b)
    assert x["step"] == y["step"]
    for name, value in x["model"].items():
        assert torch.equal(value, y["model"][name]), name


def test_job_end_time_near_stops_saves_and_resumes_exactly(tmp_path, tiny_lm, monkeypatch):
    vocab, spec, make_batches, _ = tiny_lm
    train(spec, vocab, tmp_path / "straight", make_batches, None)
    monkeypatch.setenv("SLURM_JOB_END_TIME", str(int(time.time()) + 120))  # < the default 300 s margin
    result = train(spec, vocab, tmp_path / "run", make_batches, None)
    assert result.interrupted == TIME_LIMIT == "time-limit" and result.steps == 1
    assert load_checkpoint(tmp_path / "run/checkpoint.pt")["step"] == 1
    assert not (tmp_path / "run/model.pt").exists()
    # a margin of 60 s leaves time to train: the limit is not reached
    assert train(spec, vocab, tmp_path / "run", make_batches, None, stop_margin_s=60).interrupted is None
    _same_model(tmp_path / "straight/model.pt", tmp_path / "run/model.pt")


def _fake_squeue(tmp_path, monkeypatch, body):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "squeue"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/squeue.args\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")


def test_end_time_from_squeue_in_local_time(tmp_path, tiny_lm, monkeypatch):
    end = datetime.fromtimestamp(int(time.time()) + 200).strftime("%Y-%m-%dT%H:%M:%S")
    _fake_squeue(tmp_path, monkeypatch, f"echo {end}")
    deadline = Deadline.from_slurm()
    assert (tmp_path / "squeue.args").read_text().split() == ["-h", "-j", "4242", "-o", "%e"]
    assert deadline.end_time == datetime.strptime(end, "%Y-%m-%dT%H:%M:%S").timestamp()
    assert deadline.reached(time.time()) and not Deadline.from_slurm(margin_s=10).reached(time.time())
    vocab, spec, make_batches, _ = tiny_lm
    result = train(spec, vocab, tmp_path / "run", make_batches, None)
    assert result.interrupted == "time-limit" and result.steps == 1


@pytest.mark.parametrize("body", ["echo N/A", "echo 'slurm_load_jobs error' >&2; exit 1"])
def test_unreadable_end_time_means_no_deadline_and_one_warning(tmp_path, monkeypatch, caplog, body):
    _fake_squeue(tmp_path, monkeypatch, body)
    with caplog.at_level(logging.WARNING, logger="elmoc.train.signals"):
        deadline = Deadline.from_slurm()
    assert deadline.end_time is None and not deadline.reached(time.time())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "squeue -j 4242" in warnings[0].getMessage()


def test_default_margin_grows_with_the_checkpoint_write():
    deadline = Deadline(end_time=10_000.0)
    assert deadline.margin() == 300.0
    assert deadline.margin(longest_save_s=400.0, step_s=5.0) == 805.0
    assert not deadline.reached(9_000.0, longest_save_s=400.0) and deadline.reached(9_300.0, longest_save_s=400.0)
    assert Deadline(end_time=10_000.0, margin_s=0).reached(10_000.0)


def test_time_based_checkpoints_with_a_fake_clock(tmp_path, tiny_lm, monkeypatch):
    """checkpoint_minutes 2.5, one fake minute per batch, steps never: saves after steps
    3, 6, 9 (then the final one at 10); the training is unchanged by them."""
    vocab, spec, make_batches, _ = tiny_lm
    now = [0.0]
    monkeypatch.setattr(periodic, "monotonic", lambda: now[0])

    def one_minute_per_batch(position, rank, world):
        for item in make_batches(position, rank, world):
            now[0] += 60.0
            yield item

    saved = []
    real_save = loop.save_checkpoint
    monkeypatch.setattr(loop, "save_checkpoint", lambda path, payload: (saved.append((path.name, payload["step"])),
                                                                       real_save(path, payload)))
    timed = {**spec, "train": {**spec["train"], "max_steps": 10, "checkpoint_every": 0, "checkpoint_minutes": 2.5}}
    train(timed, vocab, tmp_path / "timed", one_minute_per_batch, None)
    assert saved == [("checkpoint.pt", 3), ("checkpoint.pt", 6), ("checkpoint.pt", 9), ("checkpoint.pt", 10),
                     ("model.pt", 10)]
    plain = {**timed, "train": {**timed["train"], "checkpoint_minutes": None}}
    train(plain, vocab, tmp_path / "plain", make_batches, None)
    _same_model(tmp_path / "plain/model.pt", tmp_path / "timed/model.pt")


def test_checkpoint_minutes_is_a_resume_mutable_setting():
    from elmoc.train.checkpoint import config_hash

    spec = {"train": {"batch_size": 4}}
    assert config_hash(spec) == config_hash({"train": {"batch_size": 4, "checkpoint_minutes": 30}})
    assert TrainSettings.from_config({"checkpoint_minutes": 30}).checkpoint_minutes == 30
    with pytest.raises(ConfigError, match="checkpoint_minutes"):
        TrainSettings.from_config({"checkpoint_minutes": -1})
