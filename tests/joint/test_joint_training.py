"""`elmoc train --direction joint`: a joint bi-LM trained end to end through the real
command (CPU, 1 thread): its outputs, a stopped-and-resumed run that ends bit-identical
to an uninterrupted one, the lockstep batches, and the refusals of a direction the
spec does not train."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from tiny_corpus import elmoc_train, sentences, tiny_spec, write_workdir
import torch
import yaml

from elmoc.data.batches import BiLMBatch, ShardBatches, iter_heldout, num_windows
from elmoc.lm import LanguageModel
from elmoc.model_file import load_checkpoint, load_directions
from elmoc.outputs.continuous import CosineSums
from elmoc.outputs.heldout import PerplexitySums
from elmoc.train.heldout import evaluate_heldout

BATCH, BPTT, EVAL_BATCH = 2, 5, 3


def make_workdir(root: Path, directions: str = "joint") -> dict:
    """Corpus (2 shards + stats.json), a heldout file of other sentences, vocab, vectors, spec."""
    rng = np.random.default_rng(0)
    shards = [sentences(rng, 20), sentences(rng, 20)]
    heldout = [s for s in sentences(np.random.default_rng(1), 30) if s not in set(shards[0] + shards[1])][:10]
    spec = tiny_spec("tiny-joint", {"type": "sampled", "num_samples": 5}, batch_size=BATCH, bptt=BPTT,
                     checkpoint_every=4, eval_every=0, eval_batch_size=EVAL_BATCH, directions=directions)
    vocab, _ = write_workdir(root, shards, heldout, spec, rng)
    steps = sum(num_windows((sum(len(s.split()) + 2 for s in lines) - 1) // BATCH, BPTT) for lines in shards)
    return {"root": root, "spec": spec, "shards": shards, "heldout": heldout, "vocab": vocab, "steps": steps}


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted joint run: the reference."""
    work = make_workdir(tmp_path_factory.mktemp("joint"))
    r = elmoc_train(work["root"], direction="joint")
    assert r.returncode == 0, r.stderr
    return work


@pytest.mark.slow
def test_joint_run_writes_a_joint_model_and_both_directions_heldout(straight, monkeypatch):
    out = straight["root"] / "out"
    final = load_checkpoint(out / "model.pt")
    assert final["direction"] == "joint" and final["final"] and final["step"] == straight["steps"]
    keys = final["model"].keys()
    assert any(k.startswith("forward_encoder.") for k in keys) and any(k.startswith("backward_encoder.") for k in keys)
    assert not any(k.startswith("encoder.") for k in keys)
    assert "output_layer.weight.weight" in keys  # one shared output layer
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert isinstance(ckpt["state"], tuple) and len(ckpt["state"]) == 2  # (forward state, backward state)

    heldout = json.loads((out / "heldout.json").read_text())
    assert heldout["direction"] == "joint" and heldout["metric"] == "perplexity" and heldout["threads"] == 1
    after = heldout["history"][-1]
    assert [h["tag"] for h in heldout["history"]] == ["before", "after"]
    # heldout is its own file, never trained on; each direction evaluates all of it
    assert not set(straight["heldout"]) & set(straight["shards"][0] + straight["shards"][1])
    tokens = sum(len(s.split()) + 2 for s in straight["heldout"])
    per_direction = (tokens - 1) // EVAL_BATCH * EVAL_BATCH
    assert after["forward"]["eval_tokens"] == after["backward"]["eval_tokens"] == per_direction
    assert after["eval_tokens"] == 2 * per_direction
    # combined: exp of the mean of the two directions' mean NLLs (not a token-pooled mean)
    assert after["loss"] == pytest.approx(0.5 * (after["forward"]["loss"] + after["backward"]["loss"]), rel=1e-12)
    assert heldout["after"] == after["value"] == pytest.approx(math.exp(after["loss"]), rel=1e-12)
    assert heldout["after"] < heldout["before"]
    for part in ("forward", "backward"):
        assert heldout[part]["after"] == after[part]["value"] == pytest.approx(math.exp(after[part]["loss"]))
        assert heldout[part]["before"] == heldout["history"][0][part]["value"]
    # tokens count both directions' windows
    assert heldout["tokens"] == final["tokens"] == 2 * sum(
        ((sum(len(s.split()) + 2 for s in lines) - 1) // BATCH) * BATCH for lines in straight["shards"])
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    first = next(r for r in log if r["event"] == "train")
    assert first["loss"] == pytest.approx(0.5 * (first["forward_loss"] + first["backward_loss"]), rel=1e-5)

    # oracle: each direction of model.pt, loaded as a separate LM and evaluated on that
    # direction's heldout windows by the one-direction code path, gives the same numbers
    monkeypatch.chdir(straight["root"])
    spec = straight["spec"]
    for part in ("forward", "backward"):
        lm = LanguageModel.from_spec(spec, straight["vocab"])
        lm.load_state_dict(load_directions(out / "model.pt", out / "model.pt")[part]["model"])
        windows = iter_heldout("corpus/heldout.txt", straight["vocab"], EVAL_BATCH, BPTT, part)
        alone = evaluate_heldout(lm, windows, torch.device("cpu"), reset_state=False)
        assert alone["loss"] == pytest.approx(after[part]["loss"], rel=1e-6), part
        assert alone["eval_tokens"] == after[part]["eval_tokens"]


@pytest.mark.slow
def test_stopped_joint_run_resumes_bit_identical(straight, tmp_path):
    work = make_workdir(tmp_path)
    stop_at = 3  # before the first periodic checkpoint (4), so the stop writes the checkpoint
    r = elmoc_train(tmp_path, "out", "--max-steps", str(stop_at), direction="joint")
    assert r.returncode == 0, r.stderr
    ckpt = load_checkpoint(tmp_path / "out/checkpoint.pt")
    assert ckpt["step"] == stop_at and ckpt["data"]["window"] > 0 and ckpt["direction"] == "joint"
    fwd_state, bwd_state = ckpt["state"]
    assert not torch.equal(fwd_state[0][0], bwd_state[0][0])  # two different carried states

    r = elmoc_train(tmp_path, direction="joint")  # the same command without the cap: resumes at step 3
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stderr
    a, b = load_checkpoint(straight["root"] / "out/model.pt"), load_checkpoint(tmp_path / "out/model.pt")
    assert a["step"] == b["step"] == work["steps"] and a["tokens"] == b["tokens"]
    assert a["model"].keys() == b["model"].keys()
    for name, value in a["model"].items():  # tensors, and the sampler's draw count
        assert torch.equal(value, b["model"][name]) if isinstance(value, torch.Tensor) else value == b["model"][name], name
    ha = json.loads((straight["root"] / "out/heldout.json").read_text())
    hb = json.loads((tmp_path / "out/heldout.json").read_text())
    assert [(h["tag"], h["value"], h["forward"], h["backward"]) for h in ha["history"]] == \
        [(h["tag"], h["value"], h["forward"], h["backward"]) for h in hb["history"]]


@pytest.mark.slow
def test_a_direction_the_spec_does_not_train_is_refused(tmp_path):
    for directions, direction, needle in (("separate", "joint", "set train.directions: joint"),
                                          ("joint", "forward", "train it with --direction joint")):
        root = tmp_path / directions
        make_workdir(root, directions)
        r = elmoc_train(root, direction=direction)
        assert r.returncode == 1, r.stderr
        assert "Traceback" not in r.stderr
        lines = [line for line in r.stderr.splitlines() if "error:" in line]
        assert len(lines) == 1 and "spec.yaml" in lines[0] and needle in lines[0], r.stderr
        assert not (root / "out").exists()


def test_joint_batches_are_both_directions_in_lockstep(tmp_path):
    work = make_workdir(tmp_path)
    shards = sorted((tmp_path / "corpus/train").glob("shard_*.txt"))
    vocab = work["vocab"]

    def read(direction, **kw):
        it = ShardBatches(shards, vocab, 4, 3, direction, seed=2, epochs=2, rank=1, world_size=2, **kw)
        return [(b, it.state_dict()) for b in it]

    joint, fwd, bwd = read("joint"), read("forward"), read("backward")
    assert len(joint) == len(fwd) == len(bwd) > 0
    for (j, pos), (f, fpos), (b, bpos) in zip(joint, fwd, bwd):
        assert isinstance(j, BiLMBatch) and pos == fpos == bpos
        for got, want in ((j.forward, f), (j.backward, b)):
            assert torch.equal(got.inputs, want.inputs) and torch.equal(got.targets, want.targets)
            assert torch.equal(got.mask, want.mask)
        assert j.num_tokens == f.num_tokens + b.num_tokens
    # resuming the joint reader from a saved position continues with the same pairs
    resumed = read("joint", position=joint[4][1])
    assert len(resumed) == len(joint) - 5
    assert torch.equal(resumed[0][0].backward.inputs, joint[5][0].backward.inputs)
    held = list(iter_heldout(tmp_path / "corpus/heldout.txt", vocab, 3, 4, "joint"))
    alone = list(iter_heldout(tmp_path / "corpus/heldout.txt", vocab, 3, 4, "backward"))
    assert [torch.equal(h.backward.inputs, a.inputs) for h, a in zip(held, alone)] == [True] * len(alone)


def test_combined_heldout_metric():
    fwd = {"metric": "perplexity", "value": math.exp(2.0), "loss": 2.0, "eval_tokens": 10}
    bwd = {"metric": "perplexity", "value": math.exp(4.0), "loss": 4.0, "eval_tokens": 10}
    both = PerplexitySums.combine(fwd, bwd)
    assert both["value"] == pytest.approx(math.exp(3.0)) and both["loss"] == 3.0 and both["eval_tokens"] == 20
    assert both["forward"] == fwd and both["backward"] == bwd
    cos_f = {"metric": "cosine", "value": 0.5, "loss": -0.5, "eval_tokens": 6, "constant_baseline": 0.2}
    cos_b = {"metric": "cosine", "value": 0.3, "loss": -0.3, "eval_tokens": 6, "constant_baseline": 0.4}
    both = CosineSums.combine(cos_f, cos_b)
    assert both["value"] == pytest.approx(0.4) and both["constant_baseline"] == pytest.approx(0.3)
