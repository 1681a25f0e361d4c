"""Kill-safe training through the real `elmoc train` command (CPU, 1 thread).

The second shard of the corpus is a FIFO in the interrupted runs: the trainer blocks
reading it after the first shard's windows, which pins the moment of the kill or the
signal to a known step without any timing assumption.  A resumed run must then end
with the same model.pt, heldout results and log (timing fields aside) as a run that
was never interrupted.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from tiny_corpus import WORDS, elmoc_train, sentences, tiny_spec, write_workdir
import torch
import yaml

from elmoc.io.atomic import atomic_path
from elmoc.data.batches import num_windows, shard_order
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import ConfigError, InputFileError
from elmoc.model_file import load_checkpoint
from elmoc.train.checkpoint import check_resumable, config_hash, remove_stale_temps
from elmoc.train.optim import build_optimizer
from elmoc.train.signals import EXIT_INTERRUPTED

BATCH, BPTT, EVERY = 2, 5, 4
TIMING = ("seconds", "tokens_per_s", "eta_s")


def make_workdir(root: Path) -> dict:
    """Corpus (2 shards + stats.json), heldout, vocab, vectors and spec, all relative to ``root``."""
    rng = np.random.default_rng(0)
    shards = [sentences(rng, 25), sentences(rng, 25)]
    heldout = sentences(np.random.default_rng(1), 12)
    spec = tiny_spec("tiny", {"type": "cosine", "vectors": "vec.npy"}, batch_size=BATCH, bptt=BPTT,
                     checkpoint_every=EVERY, eval_every=10)
    _, train_dir = write_workdir(root, shards, heldout, spec, rng)
    # steps of the first shard read in pass 0 (with <s> </s> around every sentence)
    first = shard_order(2, 1, 0)[0]
    tokens = sum(len(s.split()) + 2 for s in shards[first])
    return {"root": root, "spec": spec, "second": train_dir / f"shard_{shard_order(2, 1, 0)[1]:03d}.txt",
            "first_steps": num_windows((tokens - 1) // BATCH, BPTT), "heldout": heldout, "shards": shards}


def block_on_second_shard(work: dict) -> str:
    """Turn the second shard into a FIFO; returns its content."""
    content = work["second"].read_text()
    work["second"].unlink()
    os.mkfifo(work["second"])
    return content


def wait_for_reader(fifo: Path, proc: subprocess.Popen, timeout: float = 240.0) -> int:
    """Open ``fifo`` for writing once the trainer is reading it (it has finished shard 1)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
        if proc.poll() is not None:
            raise AssertionError(f"trainer exited ({proc.returncode}) before reading the second shard: "
                                 f"{proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("trainer never reached the second shard")
        time.sleep(0.05)


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_timing(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def assert_same_model(a: Path, b: Path) -> None:
    x, y = load_checkpoint(a), load_checkpoint(b)
    assert x["final"] and y["final"] and x["step"] == y["step"] and x["tokens"] == y["tokens"]
    assert "optimizers" not in y and "rng" not in y
    assert x["model"].keys() == y["model"].keys()
    for name, value in x["model"].items():
        assert torch.equal(value, y["model"][name]), name
    assert [(h["tag"], h["value"], h["loss"]) for h in x["history"]] == \
        [(h["tag"], h["value"], h["loss"]) for h in y["history"]]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted run: the reference."""
    work = make_workdir(tmp_path_factory.mktemp("straight"))
    r = elmoc_train(work["root"])
    assert r.returncode == 0, r.stderr
    return work


@pytest.mark.slow
def test_uninterrupted_run_outputs(straight):
    out = straight["root"] / "out"
    final, ckpt = load_checkpoint(out / "model.pt"), load_checkpoint(out / "checkpoint.pt")
    steps = num_windows(
        (sum(len(s.split()) + 2 for s in straight["shards"][0]) - 1) // BATCH, BPTT) + num_windows(
        (sum(len(s.split()) + 2 for s in straight["shards"][1]) - 1) // BATCH, BPTT)
    assert final["step"] == ckpt["step"] == steps
    assert final["threads"] == 1 and final["config_hash"] == config_hash(straight["spec"])
    assert ckpt["optimizers"] and not ckpt["final"]
    heldout = json.loads((out / "heldout.json").read_text())
    assert heldout["threads"] == 1 and heldout["steps"] == steps
    # heldout is evaluated on its own file, never trained on: its token count, none of its lines in a shard
    heldout_tokens = sum(len(s.split()) + 2 for s in straight["heldout"])
    assert heldout["history"][-1]["eval_tokens"] == (heldout_tokens - 1) // BATCH * BATCH
    train_lines = set(straight["shards"][0] + straight["shards"][1])
    assert not train_lines & set(straight["heldout"])
    assert [h["tag"] for h in heldout["history"]][0] == "before" and heldout["history"][-1]["tag"] == "after"


@pytest.mark.slow
def test_sigkill_after_checkpoint_then_rerun_is_bit_exact(straight, tmp_path):
    work = make_workdir(tmp_path)
    content = block_on_second_shard(work)
    proc = elmoc_train(tmp_path, wait=False)
    fd = wait_for_reader(work["second"], proc)
    proc.kill()
    proc.wait(timeout=60)
    os.close(fd)
    work["second"].unlink()
    work["second"].write_text(content)
    out = tmp_path / "out"
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["step"] == work["first_steps"] // EVERY * EVERY > 0
    assert not (out / "model.pt").exists() and not (out / "heldout.json").exists()
    logged = [r["step"] for r in read_log(out / "train_log.jsonl") if r["event"] == "train"]
    assert logged[-1] == work["first_steps"] > ckpt["step"]  # records after the checkpoint, to be dropped
    stale = out / ".checkpoint.k1ll3d.tmp.pt"  # what a kill during torch.save leaves
    stale.write_bytes(b"")

    r = elmoc_train(tmp_path)
    assert r.returncode == 0, r.stderr
    assert not stale.exists()
    assert_same_model(straight["root"] / "out/model.pt", out / "model.pt")
    a = json.loads((straight["root"] / "out/heldout.json").read_text())
    b = json.loads((out / "heldout.json").read_text())
    assert (a["before"], a["after"], a["steps"], a["tokens"]) == (b["before"], b["after"], b["steps"], b["tokens"])
    # the log reads as one uninterrupted run: no repeated record, the same records, time never goes back
    log_a, log_b = read_log(straight["root"] / "out/train_log.jsonl"), read_log(out / "train_log.jsonl")
    assert without_timing(log_b) == without_timing(log_a)
    seconds = [r["seconds"] for r in log_b if r["event"] == "train"]
    assert seconds == sorted(seconds)
    assert b["seconds"] >= ckpt["seconds"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])  # SIGINT: Ctrl-C
def test_stop_signal_finishes_the_step_saves_and_exits_75(straight, tmp_path, sig):
    work = make_workdir(tmp_path)
    content = block_on_second_shard(work)
    proc = elmoc_train(tmp_path, wait=False)
    fd = wait_for_reader(work["second"], proc)
    proc.send_signal(sig)  # arrives while the next step's batch is being read
    os.write(fd, content.encode())
    os.close(fd)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert sig.name in err and "Traceback" not in err and "KeyboardInterrupt" not in err
    out = tmp_path / "out"
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["step"] == work["first_steps"] + 1  # the step in progress was finished, not lost
    assert not (out / "model.pt").exists()
    assert not list(out.glob(".*tmp*"))
    work["second"].unlink()
    work["second"].write_text(content)

    r = elmoc_train(tmp_path)
    assert r.returncode == 0, r.stderr
    assert_same_model(straight["root"] / "out/model.pt", out / "model.pt")
    assert without_timing(read_log(out / "train_log.jsonl")) == \
        without_timing(read_log(straight["root"] / "out/train_log.jsonl"))


def _copy_checkpoint(straight, tmp_path) -> Path:
    work = make_workdir(tmp_path)
    (tmp_path / "out").mkdir()
    shutil.copy(straight["root"] / "out/checkpoint.pt", tmp_path / "out/checkpoint.pt")
    return work["root"]


def _one_line_error(r) -> str:
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.slow
def test_resume_refuses_other_direction(straight, tmp_path):
    root = _copy_checkpoint(straight, tmp_path)
    r = elmoc_train(root, "out", "--direction", "backward")  # argparse: the last --direction wins
    line = _one_line_error(r)
    assert "out/checkpoint.pt" in line and "'forward'" in line and "'backward'" in line and "--no-resume" in line
    r = elmoc_train(root, "out", "--direction", "backward", "--no-resume", "--max-steps", "2")
    assert r.returncode == 0, r.stderr
    assert load_checkpoint(root / "out/model.pt")["direction"] == "backward"


@pytest.mark.slow
def test_resume_refuses_other_spec(straight, tmp_path):
    root = _copy_checkpoint(straight, tmp_path)
    spec = yaml.safe_load((root / "spec.yaml").read_text())
    spec["encoder"]["cell_size"] = 12
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    line = _one_line_error(elmoc_train(root))
    assert "checkpoint.pt" in line and "encoder.cell_size" in line and "8" in line and "12" in line
    assert "spec.yaml" in line and "--output-dir" in line


@pytest.mark.slow
def test_stale_checkpoint_set_aside_starts_afresh(straight, tmp_path):
    """The workflow's mode: a changed spec reruns the job, which keeps the old checkpoint
    under its config hash and trains the new spec from step 0 (equal to a fresh run)."""
    root = _copy_checkpoint(straight, tmp_path)
    old = load_checkpoint(root / "out/checkpoint.pt")
    spec = yaml.safe_load((root / "spec.yaml").read_text())
    spec["encoder"]["cell_size"] = 12
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    r = elmoc_train(root, "out", "--stale-checkpoint", "set-aside", "--max-steps", "2")
    assert r.returncode == 0, r.stderr
    kept = root / "out" / f"checkpoint.{old['config_hash']}.pt"
    assert kept.is_file() and load_checkpoint(kept)["step"] == old["step"]
    new = load_checkpoint(root / "out/model.pt")
    assert new["step"] == 2 and new["spec"]["encoder"]["cell_size"] == 12
    fresh = elmoc_train(root, "fresh", "--max-steps", "2")
    assert fresh.returncode == 0, fresh.stderr
    ref = load_checkpoint(root / "fresh/model.pt")["model"]
    assert all(torch.equal(ref[k], new["model"][k]) for k in ref)


@pytest.mark.slow
def test_string_where_a_number_belongs_is_one_line(tmp_path):
    work = make_workdir(tmp_path)
    spec = dict(work["spec"], train={**work["spec"]["train"], "batch_size": "two"})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    line = _one_line_error(elmoc_train(tmp_path))
    assert "train.batch_size must be an integer" in line and "'two'" in line


@pytest.mark.parametrize("config, key", [
    ({"type": "adam", "lr": "fast"}, "optimizer.lr must be a number"),
    ({"type": "scheduled_adam", "warmup": "10k"}, "optimizer.warmup must be an integer"),
    ({"type": "adam", "betas": "0.9"}, "optimizer.betas must be a list of two numbers"),
])
def test_optimizer_type_errors(config, key):
    with pytest.raises(ConfigError, match=key):
        build_optimizer(config, torch.nn.Linear(2, 2), batch_size=4)


def test_resume_rules_unit(tmp_path):
    vocab = Vocabulary.from_counts(Counter(WORDS))
    spec = {"encoder": {"cell_size": 8}, "train": {"batch_size": 2, "max_steps": 5, "log_every": 1}}
    payload = {"spec": spec, "config_hash": config_hash(spec), "direction": "forward", "optimizers": [{}],
               "vocab": {"size": len(vocab), "sha256": "0"}}
    longer = {**spec, "train": {"batch_size": 2, "max_steps": 50, "log_every": 10, "checkpoint_every": 7,
                                   "epochs": 3}}
    check_resumable({**payload, "vocab": None}, tmp_path / "c.pt", spec=longer, direction="forward", vocab=vocab)
    with pytest.raises(InputFileError, match=r"train.batch_size is 2 there but 4 in s.yaml"):
        check_resumable(payload, "c.pt", spec={**spec, "train": {"batch_size": 4}}, direction="forward",
                        spec_path="s.yaml")
    with pytest.raises(InputFileError, match="another vocabulary"):
        check_resumable(payload, "c.pt", spec=spec, direction="forward", vocab=vocab)
    with pytest.raises(InputFileError, match="final model without optimizer state"):
        check_resumable({**payload, "final": True, "optimizers": None}, "c.pt", spec=spec, direction="forward")
    (tmp_path / ".model.x1.tmp.pt").write_bytes(b"")
    (tmp_path / ".heldout.x2.tmp.json").write_bytes(b"")
    (tmp_path / ".other.x3.tmp.pt").write_bytes(b"")
    assert sorted(p.name for p in remove_stale_temps(tmp_path)) == [".heldout.x2.tmp.json", ".model.x1.tmp.pt"]
    assert (tmp_path / ".other.x3.tmp.pt").exists()
    with atomic_path(tmp_path / "checkpoint.pt") as tmp:  # the naming the cleanup relies on
        tmp.write_bytes(b"")
        assert remove_stale_temps(tmp_path) == [] and tmp.exists()  # a live writer holds its temporary
        tmp.write_bytes(b"x")
    assert (tmp_path / "checkpoint.pt").read_bytes() == b"x"
    tmp.write_bytes(b"")  # the same name, left by a killed writer (nobody holds it): removed
    assert remove_stale_temps(tmp_path) == [tmp] and not tmp.exists()
