"""Data parallelism of TUPE: 2 gloo processes, each with half of every global batch, end with the
weights and optimizer moments of one process reading the whole batch (the position term's
projections, TUPE-R's relative bias and the theta of `<s>` included)."""
from __future__ import annotations

import json
import os
from collections import Counter

import pytest
import torch
from ddp_compare import finish_worker, join_gloo, max_abs_diff, spawn_runs

from elmoc.data.batches import LMBatch
from elmoc.data.vocab.vocabulary import BOS_ID, Vocabulary
from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train

B, T, V, DIM, WORLD, STEPS = 4, 6, 30, 8, 2, 4
CASES = {"causal-tupe-r": {"positions": "tupe_r", "causal": True},
         "bidirectional-tupe": {"positions": "tupe", "causal": False}}  # the second reads <s> (theta trains)


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def _batches(position, rank, world):
    """Rows of a stream with <s> every 5 tokens; each rank its contiguous block of rows."""
    start, per = (0 if position is None else position["window"]), B // world
    for w in range(start, STEPS):
        rows = torch.tensor([[BOS_ID if (i % 5) == 0 else 4 + (i * 7 + r) % (V - 4)
                              for i in range(w * T + 11 * r, w * T + 11 * r + T + 1)] for r in range(B)])
        rows = rows[rank * per:(rank + 1) * per]
        yield LMBatch(rows[:, :-1], rows[:, 1:], rows[:, :-1] > 0), {"epoch": 0, "window": w + 1}


def _spec(tmp, case):
    vectors = os.path.join(tmp, "vec.npy")
    return {
        "input": {"type": "fasttext", "vectors": vectors},
        "encoder": {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 16, "num_layers": 2, "dropout": 0.0,
                    **CASES[case]},
        "output": {"type": "cosine", "vectors": vectors},
        # eps 1e-4 as tests/train/test_transformer_lm.py: theta_1 and the key bias get gradients that
        # are float noise (a softmax ignores a shift of its whole row), which Adam at 1e-8 would amplify
        "optimizer": {"type": "adam", "lr": 0.01, "eps": 1.0e-4},
        "train": {"batch_size": B, "bptt": T, "log_every": 100, "checkpoint_every": 0, "seed": 5,
                  "reset_state": True},
    }


def _run(tmp, case, out):
    return train(_spec(tmp, case), _vocab(), os.path.join(tmp, out), _batches, None)


def _worker(rank, port, tmp):
    join_gloo(rank, port, WORLD)  # every train() below joins this group
    for case in CASES:
        _run(tmp, case, f"ddp/{case}")
    finish_worker(tmp, rank, {})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("tupe_ddp"))
    spawn_runs(tmp, _worker, WORLD, V, DIM)
    return tmp


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_two_gloo_processes_match_one(runs, case):
    _run(runs, case, f"single/{case}")
    ddp = load_checkpoint(os.path.join(runs, "ddp", case, "checkpoint.pt"))
    single = load_checkpoint(os.path.join(runs, "single", case, "checkpoint.pt"))
    assert ddp["step"] == single["step"] == STEPS and ddp["tokens"] == single["tokens"] == STEPS * B * T
    untied = [k for k in ddp["model"] if k.startswith("encoder.untied.")]
    assert ("encoder.untied.theta" in untied) == (case == "bidirectional-tupe")
    assert ("encoder.untied.relative_bias.weight" in untied) == (case == "causal-tupe-r")
    if case == "bidirectional-tupe":  # <s> was untied: theta_2 moved
        assert single["model"]["encoder.untied.theta"][1].abs().min() > 0
    assert max_abs_diff(ddp["model"], single["model"], "model") <= 1e-5
    assert max_abs_diff(ddp["optimizers"], single["optimizers"], "optimizers") <= 1e-5
    assert json.dumps(sorted(ddp["model"])) == json.dumps(sorted(single["model"]))
