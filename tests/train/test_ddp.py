"""Data parallelism with the gloo backend: 2 processes == 1 process on the same global batch."""
import os
import socket
from collections import Counter

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from elmoc.data.vocab import Vocabulary
from elmoc.lm import LMBatch
from elmoc.train.checkpoint import load_checkpoint
from elmoc.train.loop import train

B, T, V, DIM = 4, 5, 30, 8


def _setup(tmp):
    vocab = Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))
    np.save(os.path.join(tmp, "vec.npy"), np.random.default_rng(0).standard_normal((len(vocab), DIM)).astype("float32"))
    stream = torch.tensor([4 + (i * 5) % (V - 4) for i in range(600)])

    def make_batches(position, rank, world):
        window = 0 if position is None else position["window"]
        rows = B // world
        for w in range(window, 8):
            data = torch.stack([stream[w * T + r * 100: w * T + r * 100 + T + 1] for r in range(B)])
            data = data[rank * rows:(rank + 1) * rows]
            yield LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0), {"epoch": 0, "window": w + 1}

    spec = {
        "input": {"type": "fasttext", "vectors": os.path.join(tmp, "vec.npy")},
        "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 12, "projection_size": 6,
                    "recurrent_dropout": 0.0},
        "output": {"type": "cosine", "vectors": os.path.join(tmp, "vec.npy")},
        "optimizer": {"type": "adam", "lr": 0.01},
        "train": {"batch_size": B, "bptt": T, "log_every": 100, "checkpoint_every": 0, "seed": 5},
    }
    return vocab, spec, make_batches


def _worker(rank, world, port, tmp):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    vocab, spec, make_batches = _setup(tmp)
    train(spec, vocab, os.path.join(tmp, "ddp"), make_batches, None)
    torch.distributed.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_gloo_processes_match_one(tmp_path):
    tmp = str(tmp_path)
    vocab, spec, make_batches = _setup(tmp)
    train(spec, vocab, tmp_path / "single", make_batches, None)
    mp.spawn(_worker, args=(2, _free_port(), tmp), nprocs=2, join=True)
    single = load_checkpoint(tmp_path / "single/checkpoint.pt")
    ddp = load_checkpoint(tmp_path / "ddp/checkpoint.pt")
    assert ddp["step"] == single["step"] == 8
    assert ddp["tokens"] == single["tokens"]
    for name, value in single["model"].items():
        torch.testing.assert_close(ddp["model"][name], value, rtol=1e-4, atol=1e-5, msg=name)
