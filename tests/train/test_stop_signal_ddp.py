"""A stop signal that reaches one of two gloo processes: both stop after the same step,
rank 0 saves it, nobody hangs; the rerun resumes and ends where an uninterrupted run does.
The process group train() created is gone when it returns (stopped, finished or failed)."""
import json
import os
import signal
import socket
from collections import Counter

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from elmoc.data.batches import LMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import ConfigError
from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train

B, T, V, DIM, WINDOWS, SIGNAL_AT = 4, 5, 30, 8, 8, 3


def _setup(tmp):
    vocab = Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))
    np.save(os.path.join(tmp, "vec.npy"), np.random.default_rng(0).standard_normal((len(vocab), DIM)).astype("float32"))
    spec = {
        "input": {"type": "fasttext", "vectors": os.path.join(tmp, "vec.npy")},
        "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 12, "projection_size": 6,
                    "recurrent_dropout": 0.0},
        "output": {"type": "cosine", "vectors": os.path.join(tmp, "vec.npy")},
        "optimizer": {"type": "adam", "lr": 0.01},
        "train": {"batch_size": B, "bptt": T, "log_every": 1, "checkpoint_every": 0, "seed": 5},
    }
    return vocab, spec


def _batches(signal_rank=None):
    stream = torch.tensor([4 + (i * 5) % (V - 4) for i in range(600)])

    def make_batches(position, rank, world):
        rows = B // world
        for w in range(0 if position is None else position["window"], WINDOWS):
            if rank == signal_rank and w == SIGNAL_AT:
                os.kill(os.getpid(), signal.SIGUSR1)  # arrives while step w+1's batch is made
            data = torch.stack([stream[w * T + r * 100: w * T + r * 100 + T + 1] for r in range(B)])
            data = data[rank * rows:(rank + 1) * rows]
            yield LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0), {"window": w + 1}

    return make_batches


def _worker(rank, world, port, tmp, signal_rank, error_port=None):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1")
    torch.set_num_threads(1)
    vocab, spec = _setup(tmp)
    left_after_error = None
    if error_port is not None:  # a run that fails after joining: its group is destroyed too
        os.environ["MASTER_PORT"] = str(error_port)
        bad = {**spec, "train": {**spec["train"], "batch_size": 3}}  # not divisible by 2 processes
        try:
            train(bad, vocab, os.path.join(tmp, "bad"), _batches(), None)
        except ConfigError:
            left_after_error = torch.distributed.is_initialized()
    os.environ["MASTER_PORT"] = str(port)
    result = train(spec, vocab, os.path.join(tmp, "ddp"), _batches(signal_rank), None)
    with open(os.path.join(tmp, f"rank{rank}.json"), "w") as f:
        json.dump({"steps": result.steps, "interrupted": result.interrupted,
                   "group_left": torch.distributed.is_initialized(), "group_left_after_error": left_after_error}, f)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _results(tmp):
    return [json.load(open(os.path.join(tmp, f"rank{r}.json"))) for r in range(2)]


@pytest.mark.slow
@pytest.mark.serial  # two spawned gloo ranks and a signal, with a hang time-out: alone, after the parallel pass
def test_signal_on_one_rank_stops_both_after_the_same_step(tmp_path):
    tmp = str(tmp_path)
    mp.spawn(_worker, args=(2, _free_port(), tmp, 1, _free_port()), nprocs=2, join=True)  # a hang: time-out
    assert _results(tmp) == [
        {"steps": SIGNAL_AT + 1, "interrupted": "peer", "group_left": False, "group_left_after_error": False},
        {"steps": SIGNAL_AT + 1, "interrupted": "SIGUSR1", "group_left": False, "group_left_after_error": False}]
    ckpt = load_checkpoint(tmp_path / "ddp/checkpoint.pt")
    assert ckpt["step"] == SIGNAL_AT + 1 and not (tmp_path / "ddp/model.pt").exists()

    mp.spawn(_worker, args=(2, _free_port(), tmp, None), nprocs=2, join=True)
    assert [(r["steps"], r["group_left"]) for r in _results(tmp)] == [(WINDOWS, False), (WINDOWS, False)]
    vocab, spec = _setup(tmp)
    train(spec, vocab, tmp_path / "single", _batches(), None)
    single, ddp = load_checkpoint(tmp_path / "single/model.pt"), load_checkpoint(tmp_path / "ddp/model.pt")
    assert ddp["step"] == single["step"] == WINDOWS
    for name, value in single["model"].items():
        torch.testing.assert_close(ddp["model"][name], value, rtol=1e-4, atol=1e-5, msg=name)
    log = [json.loads(line) for line in (tmp_path / "ddp/train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, WINDOWS + 1))
