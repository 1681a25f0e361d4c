"""A masked LM under data parallelism (gloo): 2 processes == 1 process on the same global
batch, for CONT and SAMPLED.  The windows come from the real batcher
(:class:`elmoc.data.batches.ShardBatches`, direction "masked"): each rank draws the masks of
the global window and keeps its rows, so its batch is exactly the one-process window's rows.

The reference is :func:`ddp_compare.reference_sampled`: the loss of a data-parallel step is
the mean of the ranks' means over their masked positions (spec P11, the paper's and BERT's
per-replica mean; the ranks' masked counts differ, so it is not the token mean of one
process), and SAMPLED scores each rank's rows with that rank's negatives.
"""
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from ddp_compare import finish_worker, join_gloo, max_abs_diff, reference_sampled, spawn_runs

from elmoc.data.batches import ShardBatches, iter_heldout
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.masked_lm import MaskedLM
from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train

B, T, V, DIM, WORLD, EVAL_BATCH = 4, 6, 30, 8, 2, 3
LAYERS = ("cont", "sampled")
TOL = 1e-5


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def _write_corpus(tmp):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(V - 4)]
    for name, n in (("shard_000.txt", 40), ("heldout.txt", 8)):
        lines = [" ".join(rng.choice(words, size=int(rng.integers(3, 9)))) for _ in range(n)]
        Path(tmp, name).write_text("\n".join(lines) + "\n")


def _batches(tmp):
    def make_batches(position, rank, world):
        it = ShardBatches([os.path.join(tmp, "shard_000.txt")], _vocab(), B, T, "masked", seed=5, epochs=1,
                          rank=rank, world_size=world, position=position)
        for batch in it:
            yield batch, it.state_dict()

    def make_heldout():
        return iter_heldout(os.path.join(tmp, "heldout.txt"), _vocab(), EVAL_BATCH, T, "masked")

    return make_batches, make_heldout


def _spec(tmp, layer):
    vec = os.path.join(tmp, "vec.npy")
    outputs = {"cont": {"type": "cosine", "vectors": vec}, "sampled": {"type": "sampled", "num_samples": 6}}
    return {
        "input": {"type": "fasttext", "vectors": vec},
        "encoder": {"type": "transformer", "causal": False, "d_model": 8, "heads": 2, "d_ff": 16, "num_layers": 2,
                    "dropout": 0.0},
        "output": outputs[layer],
        # eps 1e-4, not Adam's 1e-8: the attention's key bias has a zero gradient (softmax ignores a shift
        # shared by all keys), and under eps 1e-8 Adam turns its float noise (~1e-9, different for 1 and 2
        # processes, and for 1 and 2 threads of the reference) into steps of ~lr
        "optimizer": {"type": "adam", "lr": 0.01, "eps": 1.0e-4},
        "train": {"objective": "masked_lm", "batch_size": B, "bptt": T, "log_every": 100, "checkpoint_every": 0,
                  "seed": 5, "epochs": 1},
    }


def _worker(rank, port, tmp):
    join_gloo(rank, port, WORLD)  # every train() below joins this group
    make_batches, make_heldout = _batches(tmp)
    counts = {}
    for layer in LAYERS:
        train(_spec(tmp, layer), _vocab(), os.path.join(tmp, "ddp", layer), make_batches, make_heldout,
              direction="masked")
    counts["predicted"] = [b.num_predicted for b, _ in make_batches(None, rank, WORLD)]
    finish_worker(tmp, rank, counts)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("mlm_ddp"))
    _write_corpus(tmp)
    return tmp, spawn_runs(tmp, _worker, WORLD, V, DIM)


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS)
def test_two_gloo_processes_match_one(runs, layer):
    tmp, reports = runs
    make_batches, make_heldout = _batches(tmp)
    # the ranks predict different numbers of positions: the per-replica mean is not one token mean
    assert reports[0]["predicted"] != reports[1]["predicted"]
    ddp = load_checkpoint(os.path.join(tmp, "ddp", layer, "checkpoint.pt"))
    ddp_heldout = json.load(open(os.path.join(tmp, "ddp", layer, "heldout.json")))
    model, optimizers, heldout = reference_sampled(MaskedLM, _spec(tmp, layer), _vocab(), make_batches,
                                                   make_heldout, WORLD)
    assert ddp["step"] == len(list(make_batches(None, 0, 1))) > 10 and ddp["direction"] == "masked"
    assert ddp["tokens"] == sum(b.num_tokens for b, _ in make_batches(None, 0, 1))
    param_diff = max_abs_diff(ddp["model"], model, "model")
    optim_diff = max_abs_diff(ddp["optimizers"], optimizers, "optimizers")
    print(f"\nDDP masked {layer}: max |param diff| {param_diff:.2e}, max |optimizer state diff| {optim_diff:.2e}")
    assert param_diff <= TOL and optim_diff <= TOL
    after = ddp_heldout["history"][-1]
    assert after["eval_tokens"] == heldout["eval_tokens"] == sum(b.num_predicted for b in make_heldout())
    assert after["value"] == pytest.approx(heldout["value"], rel=1e-5)
