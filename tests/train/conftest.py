"""Fixtures of the trainer tests: a tiny synthetic LM (``tiny_lm``)."""
from collections import Counter

import numpy as np
import pytest
import torch

from elmoc.data.batches import LMBatch
from elmoc.data.vocab.vocabulary import Vocabulary

V, DIM, B, T = 40, 12, 4, 6


@pytest.fixture
def tiny_lm(tmp_path):
    """(vocab, spec, make_batches, make_heldout) of a 2-layer cosine LM with recurrent
    dropout and carried state on a deterministic periodic stream; its vectors table is
    ``tmp_path / "vec.npy"`` (named by the spec's input and output)."""
    vocab = Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))
    rng = np.random.default_rng(0)
    np.save(tmp_path / "vec.npy", rng.standard_normal((len(vocab), DIM)).astype("float32"))
    # a deterministic periodic stream: the next token is predictable
    stream = torch.tensor([4 + (i * 7) % (V - 4) for i in range(2000)])

    def make_batches(position, rank, world):
        window = 0 if position is None else position["window"]
        rows = B // world
        while True:
            start = window * T
            data = torch.stack([stream[start + r * 300 : start + r * 300 + T + 1] for r in range(B)])
            data = data[rank * rows : (rank + 1) * rows]
            window += 1
            yield LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0), {"epoch": 0, "window": window}

    def make_heldout():
        data = stream[1000:1000 + 2 * T + 1]
        yield LMBatch(data[None, :T], data[None, 1:T + 1], torch.ones(1, T, dtype=torch.bool))
        yield LMBatch(data[None, T:2 * T], data[None, T + 1:2 * T + 1], torch.ones(1, T, dtype=torch.bool))

    spec = {
        "input": {"type": "fasttext", "vectors": str(tmp_path / "vec.npy")},
        "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 16, "projection_size": 8,
                    "recurrent_dropout": 0.1},
        "output": {"type": "cosine", "vectors": str(tmp_path / "vec.npy")},
        "optimizer": {"type": "adam", "lr": 0.01},
        "train": {"batch_size": B, "bptt": T, "max_steps": 30, "log_every": 10, "checkpoint_every": 10,
                  "reset_state": False, "seed": 3},
    }
    return vocab, spec, make_batches, make_heldout
