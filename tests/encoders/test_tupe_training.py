"""TUPE through the real `elmoc train` (tiny, CPU, 1 thread): a causal TUPE-R LM with CONT and with a
softmax-family output (SAMPLED, a joint bi-LM) and a masked TUPE LM each train and resume bit-exact
(the position term's parameters in the checkpoint, dropout on), and the masked LM's exported model
embeds a sentence with the same layers as the trained model (and extraction with boundaries unties
its `<s>` as training did)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from ddp_compare import max_abs_diff
from tiny_corpus import ELMOC, elmoc_train, sentences, tiny_spec, write_workdir

from elmoc.data.vocab.vocabulary import BOS_ID, EOS_ID
from elmoc.masked_lm import MaskedLM
from elmoc.model_file import load_checkpoint

D_MODEL, BLOCKS = 8, 2
TIMING = ("seconds", "tokens_per_s", "eta_s")


def workdir(root: Path, output: dict, positions: str, objective: str = "causal_lm", **train) -> dict:
    rng = np.random.default_rng(7)
    spec = tiny_spec("tiny-tupe", output, batch_size=2, bptt=8, checkpoint_every=3, eval_every=4,
                     objective=objective, reset_state=True, **train)
    spec["encoder"] = {"type": "transformer", "d_model": D_MODEL, "heads": 2, "d_ff": 16, "num_layers": BLOCKS,
                       "dropout": 0.1, "causal": objective != "masked_lm", "positions": positions}
    vocab, _ = write_workdir(root, [sentences(rng, 14), sentences(rng, 14)], sentences(np.random.default_rng(8), 8),
                             spec, rng)
    return {"root": root, "spec": spec, "vocab": vocab}


def records(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in path.read_text().splitlines()]


def straight_and_resumed(tmp_path: Path, output: dict, positions: str, direction: str, **kw) -> tuple[Path, Path]:
    """One uninterrupted run and one stopped after 5 steps then resumed; both must end equal."""
    runs = []
    for name, stops in (("straight", ()), ("resumed", ("--max-steps", "5"))):
        work = workdir(tmp_path / name, output, positions, **kw)
        for extra in ((stops, ()) if stops else ((),)):
            r = elmoc_train(work["root"], "out", *extra, direction=direction)
            assert r.returncode == 0, r.stderr[-2000:]
        runs.append(work["root"] / "out")
    a, b = (load_checkpoint(run / "model.pt") for run in runs)
    assert a["step"] == b["step"] > 5 and a["tokens"] == b["tokens"]
    assert any("untied." in k for k in a["model"])
    assert a["model"].keys() == b["model"].keys()
    assert max_abs_diff(a["model"], b["model"], "model") == 0.0
    assert records(runs[0] / "train_log.jsonl") == records(runs[1] / "train_log.jsonl")
    heldout = json.loads((runs[0] / "heldout.json").read_text())
    assert all(np.isfinite(h["value"]) for h in heldout["history"])
    return runs[0], runs[1]


@pytest.mark.slow
@pytest.mark.parametrize("output, direction", [
    ({"type": "cosine", "vectors": "vec.npy"}, "forward"),  # CONT, as trans-base-c-tupe-r
    ({"type": "sampled", "num_samples": 5}, "joint"),  # the softmax family: one joint bi-LM
])
def test_a_causal_tupe_r_lm_trains_and_resumes_bit_exact(tmp_path, output, direction):
    extra = {"directions": "joint"} if direction == "joint" else {}
    straight, _ = straight_and_resumed(tmp_path, output, "tupe_r", direction, **extra)
    weights = load_checkpoint(straight / "model.pt")["model"]
    prefix = "forward_encoder." if direction == "joint" else "encoder."
    assert f"{prefix}untied.relative_bias.weight" in weights
    assert f"{prefix}untied.theta" not in weights  # a causal LM unties nothing
    assert f"{prefix}blocks.0.self_attn.parametrizations.in_proj_weight.original" in weights


@pytest.mark.slow
def test_a_masked_tupe_lm_resumes_bit_exact_and_embeds_as_it_was_trained(tmp_path, monkeypatch):
    straight, _ = straight_and_resumed(tmp_path, {"type": "cosine", "vectors": "vec.npy"}, "tupe", "masked",
                                       objective="masked_lm")
    root = straight.parent
    weights = load_checkpoint(straight / "model.pt")["model"]
    assert weights["encoder.untied.theta"][1].abs().min() > 0  # theta_2 trained: <s> was untied in training
    (root / "sents.txt").write_text("the cat sat on a mat\nred ball over old tree\n")

    def elmoc(*args):
        return subprocess.run(ELMOC + list(args), cwd=root, capture_output=True, text=True, timeout=300)

    r = elmoc("export", "--forward", "out/model.pt", "--backward", "out/model.pt", "--output-dir", "model_dir")
    assert r.returncode == 0, r.stderr[-2000:]
    r = elmoc("embed", "--model", "model_dir", "sents.txt", "embedded.hdf5", "--all", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    r = elmoc("extract", "--forward", "out/model.pt", "--backward", "out/model.pt", "--sentences", "sents.txt",
              "--output", "bounded.hdf5", "--boundaries", "true", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    with h5py.File(root / "embedded.hdf5") as h5, h5py.File(root / "bounded.hdf5") as bounded:
        embedded, with_start = h5["0"][()], bounded["0"][()]
    assert embedded.shape == with_start.shape == (BLOCKS + 1, 6, D_MODEL)

    # the trained model, read back from model.pt, over the bare words and over <s> w1..w6 </s>
    monkeypatch.chdir(root)  # the spec names vec.npy relative to it
    work = workdir(tmp_path / "again", {"type": "cosine", "vectors": "vec.npy"}, "tupe", objective="masked_lm")
    model = MaskedLM.from_spec(work["spec"], work["vocab"]).eval()
    model.load_state_dict(weights)
    words = work["vocab"].encode("the cat sat on a mat".split())

    def layers(ids, **starts):
        ids = torch.tensor([ids])
        with torch.no_grad():
            out = model.encoder(model.input_layer(ids), torch.ones_like(ids, dtype=torch.bool), **starts).layers
        return torch.stack(out, 1)[0].numpy()

    np.testing.assert_allclose(embedded, layers(words), atol=1e-5)
    bounded_ids = [BOS_ID, *words, EOS_ID]
    untied = layers(bounded_ids, starts=torch.tensor([bounded_ids]) == BOS_ID)[:, 1:-1]
    np.testing.assert_allclose(with_start, untied, atol=1e-5)
    assert np.abs(with_start[1:] - layers(bounded_ids)[1:, 1:-1]).max() > 1e-4  # <s> untied at feature time
