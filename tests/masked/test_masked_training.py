"""`elmoc train --direction masked`: a masked LM trained end to end through the real command
(CPU, 1 thread), its heldout record, a stopped-and-resumed run bit-identical to an
uninterrupted one, the refusals of a run the spec does not train, and its consumers:
extraction (one bidirectional stack: input view + every block), `elmoc export` ->
`elmoc embed` -> `Elmo`."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from tiny_corpus import ELMOC, elmoc_train, sentences, tiny_spec, write_workdir

from elmoc.data.batches import iter_heldout
from elmoc.masked_lm import MaskedLM
from elmoc.model_file import load_checkpoint
from elmoc.pretrained.elmo import Elmo
from elmoc.pretrained.loader import load_bilm, load_checkpoints
from elmoc.train.heldout import evaluate_heldout

BATCH, BPTT, EVAL_BATCH, D_MODEL, BLOCKS = 4, 8, 3, 8, 2


def make_workdir(root: Path, output: dict | None = None, objective: str = "masked_lm") -> dict:
    rng = np.random.default_rng(0)
    shards = [sentences(rng, 30), sentences(rng, 30)]
    heldout = sentences(np.random.default_rng(1), 12)
    spec = tiny_spec("tiny-mlm", output or {"type": "cosine", "vectors": "vec.npy"}, batch_size=BATCH, bptt=BPTT,
                     checkpoint_every=4, eval_batch_size=EVAL_BATCH, objective=objective, reset_state=True)
    spec["encoder"] = {"type": "transformer", "d_model": D_MODEL, "heads": 2, "d_ff": 16, "num_layers": BLOCKS,
                       "dropout": 0.1, "causal": objective != "masked_lm"}
    vocab, _ = write_workdir(root, shards, heldout, spec, rng)
    return {"root": root, "spec": spec, "vocab": vocab, "heldout": heldout, "shards": shards}


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    work = make_workdir(tmp_path_factory.mktemp("mlm"))
    r = elmoc_train(work["root"], direction="masked")
    assert r.returncode == 0, r.stderr
    return work


def elmoc(root, *args):
    return subprocess.run(ELMOC + list(args), cwd=root, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_masked_run_writes_one_model_and_its_heldout_over_masked_positions(straight, monkeypatch):
    out = straight["root"] / "out"
    final = load_checkpoint(out / "model.pt")
    assert final["direction"] == "masked" and final["final"]
    assert "mask_vector" in final["model"] and any(k.startswith("encoder.blocks.") for k in final["model"])
    heldout = json.loads((out / "heldout.json").read_text())
    assert heldout["direction"] == "masked" and heldout["metric"] == "cosine"
    assert [h["tag"] for h in heldout["history"]] == ["before", "after"]
    assert heldout["trainable_parameters"] == sum(p.numel() for p in MaskedLM.from_spec(
        {**straight["spec"], "input": {"type": "fasttext", "vectors": str(straight["root"] / "vec.npy")},
         "output": {"type": "cosine", "vectors": str(straight["root"] / "vec.npy")}}, straight["vocab"]).parameters()
        if p.requires_grad)
    # oracle: model.pt evaluated on the masked heldout windows gives the recorded numbers,
    # counted over the masked positions only
    monkeypatch.chdir(straight["root"])
    model = MaskedLM.from_spec(straight["spec"], straight["vocab"])
    model.load_state_dict(final["model"])
    windows = list(iter_heldout("corpus/heldout.txt", straight["vocab"], EVAL_BATCH, BPTT, "masked"))
    alone = evaluate_heldout(model, iter(windows), torch.device("cpu"), reset_state=True)
    after = heldout["history"][-1]
    assert alone["value"] == pytest.approx(after["value"], abs=1e-6) == heldout["after"]
    assert after["eval_tokens"] == sum(w.num_predicted for w in windows) < sum(w.num_tokens for w in windows) / 3
    # tokens: every position read (not only the predicted ones), the forward stream's windows
    read = sum(((sum(len(s.split()) + 2 for s in lines) - 1) // BATCH) * BATCH for lines in straight["shards"])
    assert final["tokens"] == heldout["tokens"] == read


@pytest.mark.slow
def test_stopped_masked_run_resumes_bit_identical(straight, tmp_path):
    make_workdir(tmp_path)
    r = elmoc_train(tmp_path, "out", "--max-steps", "3", direction="masked")  # dropout 0.1: the RNG resumes too
    assert r.returncode == 0, r.stderr
    assert load_checkpoint(tmp_path / "out/checkpoint.pt")["step"] == 3
    r = elmoc_train(tmp_path, direction="masked")
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stderr
    a, b = load_checkpoint(straight["root"] / "out/model.pt"), load_checkpoint(tmp_path / "out/model.pt")
    assert a["step"] == b["step"] > 3 and a["tokens"] == b["tokens"]
    assert a["model"].keys() == b["model"].keys()
    for name, value in a["model"].items():
        assert torch.equal(value, b["model"][name]), name
    ha = json.loads((straight["root"] / "out/heldout.json").read_text())
    hb = json.loads((tmp_path / "out/heldout.json").read_text())
    assert [h["value"] for h in ha["history"]] == [h["value"] for h in hb["history"]]


@pytest.mark.slow
def test_a_run_the_spec_does_not_train_is_refused(tmp_path):
    for objective, direction, needle in (("masked_lm", "forward", "train it with --direction masked"),
                                         ("causal_lm", "masked", "set train.objective: masked_lm")):
        root = tmp_path / objective
        make_workdir(root, objective=objective)
        r = elmoc_train(root, direction=direction)
        assert r.returncode == 1, r.stderr
        assert "Traceback" not in r.stderr
        lines = [line for line in r.stderr.splitlines() if "error:" in line]
        assert len(lines) == 1 and "spec.yaml" in lines[0] and needle in lines[0], r.stderr
        assert not (root / "out").exists()


@pytest.mark.slow
def test_extraction_export_embed_and_elmo_read_one_bidirectional_stack(straight, monkeypatch):
    root = straight["root"]
    monkeypatch.chdir(root)  # the spec names vec.npy relative to it
    (root / "sents.txt").write_text("the cat sat on a mat\nred ball over zebra tree\n")
    r = elmoc(root, "extract", "--forward", "out/model.pt", "--backward", "out/model.pt", "--sentences",
              "sents.txt", "--output", "feats.hdf5", "--threads", "1")
    assert r.returncode == 0, r.stderr
    with h5py.File(root / "feats.hdf5") as h5:
        assert h5.attrs["num_layers"] == BLOCKS + 1 and h5.attrs["dim"] == D_MODEL
        extracted = [h5["0"][()], h5["1"][()]]
    assert extracted[0].shape == (BLOCKS + 1, 6, D_MODEL) and extracted[1].shape == (BLOCKS + 1, 5, D_MODEL)
    # no masking at extraction: the encoder's layers of the bare sentence (a trained LM reads no
    # <s> ... </s> by default: boundaries by the model's kind, issue 31.8)
    bilm = load_checkpoints(root / "out/model.pt", root / "out/model.pt", root / "vocab.txt")
    assert bilm.single and bilm.num_layers == BLOCKS + 1 and bilm.output_dim == D_MODEL
    ids = torch.tensor([straight["vocab"].encode("the cat sat on a mat".split())])
    with torch.no_grad():
        layers = bilm.forward_lm.encode(ids).layers
    want = torch.stack(layers, 1)[0].numpy()
    np.testing.assert_allclose(extracted[0], want, atol=1e-6)

    r = elmoc(root, "export", "--forward", "out/model.pt", "--backward", "out/model.pt", "--output-dir", "model_dir")
    assert r.returncode == 0, r.stderr
    meta = json.loads((root / "model_dir/elmoc-model.json").read_text())
    assert meta["stack"] == "single" and meta["layers"] == BLOCKS + 1 and meta["dim"] == D_MODEL
    assert "masked.safetensors" in meta["files"] and "forward.safetensors" not in meta["files"]
    assert "| | masked |" in (root / "model_dir/README.md").read_text()
    r = elmoc(root, "embed", "--model", "model_dir", "sents.txt", "embedded.hdf5", "--all", "--threads", "1")
    assert r.returncode == 0, r.stderr
    with h5py.File(root / "embedded.hdf5") as h5:
        for i in (0, 1):
            np.testing.assert_allclose(h5[str(i)][()], extracted[i], atol=1e-6)
    elmo = Elmo.from_pretrained(root / "model_dir", num_output_representations=1)
    assert elmo.get_output_dim() == D_MODEL
    reps = elmo([["the", "cat", "sat"]])["elmo_representations"][0]
    assert reps.shape == (1, 3, D_MODEL)
    assert load_bilm(root / "model_dir").single


@pytest.mark.slow
def test_a_sampled_masked_lm_reports_perplexity_over_masked_positions(tmp_path):
    make_workdir(tmp_path, output={"type": "sampled", "num_samples": 5})
    r = elmoc_train(tmp_path, direction="masked")
    assert r.returncode == 0, r.stderr
    heldout = json.loads((tmp_path / "out/heldout.json").read_text())
    assert heldout["metric"] == "perplexity" and heldout["direction"] == "masked"
    vocab_size = len(make_workdir(tmp_path / "again", output={"type": "sampled", "num_samples": 5})["vocab"])
    assert 1.0 < heldout["after"] < 10 * vocab_size


def test_export_by_variant_finds_the_masked_model(tmp_path):
    from elmoc.pretrained.writer import lm_files

    folder = tmp_path / "lm/mlm-c/masked"
    folder.mkdir(parents=True)
    (folder / "model.pt").write_bytes(b"")
    assert lm_files(tmp_path, "mlm-c") == {"forward": folder / "model.pt", "backward": folder / "model.pt"}
