"""A joint bi-LM under data parallelism (gloo): 2 processes == 1 process on the same
global batch, for the two joint output layers (SAMPLED: sparse table gradients from
both directions exchanged by hand; ADAPTIVE: rank 1 never has a target in the last
tail cluster, in either direction).  One spawn trains both; the carried state is the
pair of the directions' states, checkpointed for the whole global batch.
"""
import json
import os
from collections import Counter

import pytest
import torch
from ddp_compare import finish_worker, join_gloo, max_abs_diff, reference_sampled, spawn_runs

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import BidirectionalLM
from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train

B, T, V, DIM, WORLD, STEPS = 4, 5, 30, 8, 2, 4
LAYERS = ("sampled", "adaptive")
TOL = 1e-5


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def _rows(window, stride):
    """(B, T + 1) ids of one direction's window: rows 0-1 (rank 0) use every id, rows 2-3
    (rank 1) only ids < 20 (never ADAPTIVE's last tail cluster [20, 30))."""
    rows = []
    for r in range(B):
        start = window * T + 37 * r
        if r < B // 2:
            rows.append([4 + (i * stride) % (V - 4) for i in range(start, start + T + 1)])
        else:
            rows.append([4 + (i * (stride - 2)) % 16 for i in range(start, start + T + 1)])
    return torch.tensor(rows)


def _window(data):
    return LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0)


def make_batches(position, rank, world):
    window = 0 if position is None else position["window"]
    per = B // world
    for w in range(window, STEPS):
        fwd, bwd = _rows(w, 7)[rank * per:(rank + 1) * per], _rows(w, 11)[rank * per:(rank + 1) * per]
        yield BiLMBatch(_window(fwd), _window(bwd)), {"epoch": 0, "window": w + 1}


def make_heldout():
    """Two windows of 3 rows: uneven shards (2 + 1 rows) with carried state."""
    streams = [torch.tensor([4 + (i * s) % (V - 4) for i in range(3 * (2 * T + 1))]).view(3, 2 * T + 1)
               for s in (11, 5)]
    for w in range(2):
        parts = [_window(stream[:, w * T:w * T + T + 1]) for stream in streams]
        yield BiLMBatch(*parts)


def _spec(tmp, layer):
    vec = os.path.join(tmp, "vec.npy")
    outputs = {
        "sampled": {"type": "sampled", "num_samples": 6},
        "adaptive": {"type": "adaptive", "cutoffs": [10, 20], "div_value": 2.0},
    }
    return {
        "input": {"type": "fasttext", "vectors": vec},
        "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 12, "projection_size": 6,
                    "recurrent_dropout": 0.0},
        "output": outputs[layer],
        "optimizer": {"type": "adam", "lr": 0.01},
        "train": {"batch_size": B, "bptt": T, "log_every": 100, "checkpoint_every": 0, "seed": 5,
                  "reset_state": False, "directions": "joint"},
    }


def _worker(rank, port, tmp):
    join_gloo(rank, port, WORLD)  # every train() below joins this group
    import elmoc.train.loop as loop

    wrapped, report = {}, {}
    wrap_model = loop.wrap_model

    def recording_wrap(model, device):
        wrapped["ddp"] = wrap_model(model, device)
        return wrapped["ddp"]

    loop.wrap_model = recording_wrap
    for layer in LAYERS:
        train(_spec(tmp, layer), _vocab(), os.path.join(tmp, "ddp", layer), make_batches, make_heldout,
              direction="joint")
        ddp = wrapped.pop("ddp")
        sparse = {id(p) for p in ddp.module.output_layer.sparse_parameters()}
        report[layer] = {
            "ignored": sorted(ddp.parameters_to_ignore),
            "buffers": [n for n, _ in ddp.module.named_buffers()],
            "ddp_sees_sparse": any(id(p) in sparse for p in ddp._module_parameters),
        }
    finish_worker(tmp, rank, report)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("joint_ddp"))
    return tmp, spawn_runs(tmp, _worker, WORLD, V, DIM)


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS)
def test_joint_two_gloo_processes_match_one(runs, layer):
    tmp, reports = runs
    vocab, spec = _vocab(), _spec(tmp, layer)
    ddp = load_checkpoint(os.path.join(tmp, "ddp", layer, "checkpoint.pt"))
    ddp_heldout = json.load(open(os.path.join(tmp, "ddp", layer, "heldout.json")))
    if layer == "sampled":
        model, optimizers, heldout = reference_sampled(BidirectionalLM, spec, vocab, make_batches, make_heldout,
                                                        WORLD, draws_per_step=2)
    else:
        train(spec, vocab, os.path.join(tmp, "single", layer), make_batches, make_heldout, direction="joint")
        single = load_checkpoint(os.path.join(tmp, "single", layer, "checkpoint.pt"))
        assert ddp["tokens"] == single["tokens"] == STEPS * 2 * B * T  # both directions' tokens
        model, optimizers = single["model"], single["optimizers"]
        heldout = json.load(open(os.path.join(tmp, "single", layer, "heldout.json")))["history"][-1]
        # the carried pair, for the whole global batch
        assert max_abs_diff(ddp["state"], single["state"], "state") <= TOL
    assert ddp["step"] == STEPS and ddp["direction"] == "joint"
    fwd_state, bwd_state = ddp["state"]
    assert all(h.shape[0] == B and c.shape[0] == B for h, c in list(fwd_state) + list(bwd_state))
    param_diff = max_abs_diff(ddp["model"], model, "model")
    optim_diff = max_abs_diff(ddp["optimizers"], optimizers, "optimizers")
    print(f"\njoint DDP {layer}: max |param diff| {param_diff:.2e}, max |optimizer state diff| {optim_diff:.2e}")
    assert param_diff <= TOL and optim_diff <= TOL
    # the sharded heldout evaluation (2 + 1 rows per direction) gives the 1-process sums
    after = ddp_heldout["history"][-1]
    for part in ("forward", "backward"):
        assert after[part]["eval_tokens"] == heldout[part]["eval_tokens"] == 2 * 3 * T
        assert after[part]["value"] == pytest.approx(heldout[part]["value"], rel=1e-5)
    assert after["value"] == pytest.approx(heldout["value"], rel=1e-5)
    for report in reports:  # sparse tables and frozen buffers of the shared layers stay out of DDP
        r = report[layer]
        assert not r["ddp_sees_sparse"] and set(r["buffers"]) <= set(r["ignored"])
        expected = ["output_layer.bias.weight", "output_layer.weight.weight"] if layer == "sampled" else []
        assert sorted(set(r["ignored"]) - set(r["buffers"])) == expected
