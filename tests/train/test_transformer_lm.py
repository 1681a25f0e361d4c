"""Causal Transformer bi-LMs (issue 25) in the one training loop: a resumed run is bit-exact
(dropout on, through the real `elmoc train`), and 2 gloo processes == 1 process for the
Transformer with CONT (one direction) and with SAMPLED (a joint bi-LM, as trans-*-sampled).

The Transformer carries no state between windows (``EncoderOutput.state`` is None), so the
checkpoint's carried state is None and only weights, optimizer moments, data position and
every rank's generators make a resume exact (dropout draws from the CPU generator).
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from ddp_compare import finish_worker, join_gloo, max_abs_diff, reference_sampled, spawn_runs
from tiny_corpus import elmoc_train, sentences, tiny_spec, write_workdir

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import BidirectionalLM
from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train

TRANSFORMER = {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 16, "num_layers": 2}
TIMING = ("seconds", "tokens_per_s", "eta_s")


# --- a resume through `elmoc train` -------------------------------------------------------------

def _workdir(root: Path, output: dict, **train) -> Path:
    rng = np.random.default_rng(3)
    spec = tiny_spec("trans", output, batch_size=2, bptt=6, checkpoint_every=3, eval_every=4, **train)
    spec["encoder"] = {**TRANSFORMER, "dropout": 0.1}
    write_workdir(root, [sentences(rng, 12), sentences(rng, 12)], sentences(np.random.default_rng(4), 6), spec, rng)
    return root


def _records(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING}
            for line in path.read_text().splitlines()]


def _same_run(a: Path, b: Path) -> None:
    """model.pt weights bit for bit, heldout history and train log equal (timings aside)."""
    ma, mb = load_checkpoint(a / "model.pt"), load_checkpoint(b / "model.pt")
    assert ma["step"] == mb["step"] and ma["tokens"] == mb["tokens"]
    assert max_abs_diff(ma["model"], mb["model"], "model") == 0.0
    ha, hb = json.loads((a / "heldout.json").read_text()), json.loads((b / "heldout.json").read_text())
    strip = lambda h: [{k: v for k, v in r.items() if k not in TIMING} for r in h["history"]]  # noqa: E731
    assert strip(ha) == strip(hb)
    assert _records(a / "train_log.jsonl") == _records(b / "train_log.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize("output, direction", [
    ({"type": "cosine", "vectors": "vec.npy"}, "backward"),  # CONT, the backward LM (reversed stream)
    ({"type": "sampled", "num_samples": 5}, "joint"),  # SAMPLED as trans-*-sampled: one joint bi-LM
])
def test_resumed_transformer_run_is_bit_exact(tmp_path, output, direction):
    extra = {"directions": "joint"} if direction == "joint" else {}
    straight = _workdir(tmp_path / "straight", output, **extra)
    r = elmoc_train(straight, direction=direction)
    assert r.returncode == 0, r.stderr[-2000:]
    resumed = _workdir(tmp_path / "resumed", output, **extra)
    r = elmoc_train(resumed, "out", "--max-steps", "5", direction=direction)  # a checkpoint at step 3, the end at 5
    assert r.returncode == 0, r.stderr[-2000:]
    first = load_checkpoint(resumed / "out" / "checkpoint.pt")
    # a Transformer carries nothing between windows (a joint bi-LM: nothing per direction)
    assert first["step"] == 5 and first["state"] in (None, (None, None))
    r = elmoc_train(resumed, direction=direction)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "resumed" in r.stderr
    total = load_checkpoint(straight / "out" / "model.pt")["step"]
    assert total > 5
    _same_run(straight / "out", resumed / "out")


# --- data parallelism -----------------------------------------------------------------------

B, T, V, DIM, WORLD, STEPS = 4, 5, 30, 8, 2, 4


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def _rows(window, stride):
    """(B, T + 1) ids of one window; row r starts 37 * r tokens into a stride-`stride` stream."""
    return torch.tensor([[4 + (i * stride) % (V - 4) for i in range(window * T + 37 * r, window * T + 37 * r + T + 1)]
                         for r in range(B)])


def _window(data):
    return LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0)


def _batches(joint):
    def make_batches(position, rank, world):
        start, per = (0 if position is None else position["window"]), B // world
        for w in range(start, STEPS):
            fwd = _window(_rows(w, 7)[rank * per:(rank + 1) * per])
            batch = BiLMBatch(fwd, _window(_rows(w, 11)[rank * per:(rank + 1) * per])) if joint else fwd
            yield batch, {"epoch": 0, "window": w + 1}
    return make_batches


def _heldout(joint):
    def make_heldout():
        """Two windows of 3 rows: uneven shards (2 + 1 rows) under 2 processes."""
        streams = [torch.tensor([4 + (i * s) % (V - 4) for i in range(3 * (2 * T + 1))]).view(3, 2 * T + 1)
                   for s in (11, 5)]
        for w in range(2):
            parts = [_window(stream[:, w * T:w * T + T + 1]) for stream in streams]
            yield BiLMBatch(*parts) if joint else parts[0]
    return make_heldout


def _spec(tmp, layer, dropout=0.0, **train):
    joint = layer == "sampled"
    output = ({"type": "sampled", "num_samples": 6} if joint
              else {"type": "cosine", "vectors": os.path.join(tmp, "vec.npy")})
    return {
        "input": {"type": "fasttext", "vectors": os.path.join(tmp, "vec.npy")},
        "encoder": {**TRANSFORMER, "dropout": dropout},
        "output": output,
        # eps 1e-4, not Adam's 1e-8: the attention's key bias has a zero gradient (softmax ignores
        # a shift shared by all keys), and Adam (g / (sqrt(v) + eps)) would turn its float noise
        # (~1e-9, different for 1 and 2 processes) into steps of ~lr under eps 1e-8
        "optimizer": {"type": "adam", "lr": 0.01, "eps": 1.0e-4},
        "train": {"batch_size": B, "bptt": T, "log_every": 100, "checkpoint_every": 0, "seed": 5,
                  "reset_state": True, **({"directions": "joint"} if joint else {}), **train},
    }


def _run(tmp, layer, out, **kw):
    joint = layer == "sampled"
    return train(_spec(tmp, layer, **kw), _vocab(), os.path.join(tmp, out), _batches(joint), _heldout(joint),
                 direction="joint" if joint else "forward")


def _worker(rank, port, tmp):
    join_gloo(rank, port, WORLD)  # every train() below joins this group
    for layer in ("cont", "sampled"):
        _run(tmp, layer, f"ddp/{layer}")
    # dropout on, 2 steps then a resume to the end == straight (both ranks' generators restored)
    _run(tmp, "sampled", "dropout/straight", dropout=0.1)
    _run(tmp, "sampled", "dropout/resumed", dropout=0.1, max_steps=2)
    _run(tmp, "sampled", "dropout/resumed", dropout=0.1)
    finish_worker(tmp, rank, {})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("transformer_ddp"))
    spawn_runs(tmp, _worker, WORLD, V, DIM)
    return tmp


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["cont", "sampled"])
def test_transformer_two_gloo_processes_match_one(runs, layer):
    tmp = runs
    ddp = load_checkpoint(os.path.join(tmp, "ddp", layer, "checkpoint.pt"))
    ddp_heldout = json.load(open(os.path.join(tmp, "ddp", layer, "heldout.json")))["history"][-1]
    if layer == "sampled":  # each half of the batch scored with its rank's negatives, in one process
        model, optimizers, heldout = reference_sampled(BidirectionalLM, _spec(tmp, layer), _vocab(), _batches(True),
                                                        _heldout(True), WORLD, draws_per_step=2)
    else:
        _run(tmp, layer, f"single/{layer}")
        single = load_checkpoint(os.path.join(tmp, "single", layer, "checkpoint.pt"))
        assert ddp["tokens"] == single["tokens"] == STEPS * B * T
        model, optimizers = single["model"], single["optimizers"]
        heldout = json.load(open(os.path.join(tmp, "single", layer, "heldout.json")))["history"][-1]
    assert ddp["step"] == STEPS and ddp["state"] is None
    assert any(k.startswith(("encoder.blocks", "forward_encoder.blocks")) for k in ddp["model"])
    param_diff = max_abs_diff(ddp["model"], model, "model")
    optim_diff = max_abs_diff(ddp["optimizers"], optimizers, "optimizers")
    print(f"\nTransformer DDP {layer}: max |param diff| {param_diff:.2e}, max |optimizer diff| {optim_diff:.2e}")
    assert param_diff <= 1e-5 and optim_diff <= 1e-5
    assert ddp_heldout["eval_tokens"] == heldout["eval_tokens"]
    assert ddp_heldout["value"] == pytest.approx(heldout["value"], rel=1e-5)


@pytest.mark.slow
def test_transformer_resume_under_two_processes_is_bit_exact(runs):
    tmp = runs
    resumed = load_checkpoint(os.path.join(tmp, "dropout", "resumed", "checkpoint.pt"))
    straight = load_checkpoint(os.path.join(tmp, "dropout", "straight", "checkpoint.pt"))
    assert resumed["step"] == straight["step"] == STEPS
    assert resumed["rng"]["world_size"] == WORLD
    for key in ("model", "optimizers"):
        assert max_abs_diff(resumed[key], straight[key], key) == 0.0, key
    # dropout did act: the run differs from the dropout-free one
    assert max_abs_diff(straight["model"], load_checkpoint(os.path.join(tmp, "ddp", "sampled", "checkpoint.pt"))["model"]) > 0


# --- GPT's 512-token windows ------------------------------------------------------------------

@pytest.mark.slow
def test_gpt_preset_trains_on_512_token_windows(tmp_path, repo_root):
    """config/lm/gpt-c.yaml, shrunk but with its bptt 512 and its optimizer (tokens_per_epoch_ref),
    through `elmoc train`: every step reads full windows of 512 tokens per row."""
    from elmoc.config import resolve_variant

    config = {"pretrain": {"presets_dir": str(repo_root / "config" / "lm"), "extra_variants": ["gpt-c"],
                           "overrides_by_type": {"encoder": {"transformer": {"d_model": 8, "heads": 2, "d_ff": 16,
                                                                             "num_layers": 1}}},
                           "overrides": {"input": {"vectors": "vec.npy"}, "output": {"vectors": "vec.npy"},
                                         "train": {"batch_size": 2, "max_steps": 2, "log_every": 1,
                                                   "checkpoint_every": 0}}}}
    spec = resolve_variant(config, "gpt-c")
    assert spec["train"]["bptt"] == 512 and spec["optimizer"]["tokens_per_epoch_ref"] == 1.5625e7
    spec.update(data={"train": "corpus/train", "heldout": "corpus/heldout.txt"}, vocab="vocab.txt")
    rng = np.random.default_rng(5)
    write_workdir(tmp_path, [sentences(rng, 500)], sentences(rng, 5), spec, rng)  # ~3,500 tokens with boundaries
    r = elmoc_train(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    steps = [rec for rec in _records(tmp_path / "out" / "train_log.jsonl") if rec["event"] == "train"]
    assert [rec["tokens"] for rec in steps] == [2 * 512, 2 * 2 * 512]
