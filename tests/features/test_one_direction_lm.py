"""A one-direction LM (``train.directions: forward``: the GPT presets, the paper's "uni-directional
Transformer", section 5.2.2) through the real commands: `elmoc train` trains the forward LM and
refuses a backward one; `elmoc extract` reads the forward model.pt alone and writes features of
width H (not 2H); the task trains on them; the flat pretrain table and the table beyond the paper
hold the variant; `elmoc export` -> `elmoc embed` -> `Elmo` read one forward stack."""
from __future__ import annotations

import csv
import json
import subprocess

import h5py
import numpy as np
import pytest
import torch
import yaml
from tiny_corpus import ELMOC, elmoc_train, sentences, tiny_spec, write_workdir

from elmoc.pretrained.elmo import Elmo
from elmoc.pretrained.loader import load_bilm, load_checkpoints
from elmoc.tables.cells import count

D_MODEL, BLOCKS, VARIANT = 8, 2, "gpt-tiny"
RUN = f"results/lm/{VARIANT}/forward"


def elmoc(root, *args):
    return subprocess.run(ELMOC + list(args), cwd=root, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny causal Transformer LM with train.directions: forward, trained as
    results/lm/gpt-tiny/forward (the workflow's layout, its spec.yaml beside)."""
    root = tmp_path_factory.mktemp("gpt")
    rng = np.random.default_rng(0)
    spec = tiny_spec(VARIANT, {"type": "cosine", "vectors": "vec.npy"}, batch_size=4, bptt=8, eval_batch_size=3,
                     directions="forward", reset_state=True)
    spec["encoder"] = {"type": "transformer", "d_model": D_MODEL, "heads": 2, "d_ff": 16, "num_layers": BLOCKS,
                       "dropout": 0.1}
    vocab, _ = write_workdir(root, [sentences(rng, 30), sentences(rng, 30)], sentences(np.random.default_rng(1), 12),
                             spec, rng)
    (root / f"results/lm/{VARIANT}").mkdir(parents=True)
    (root / f"results/lm/{VARIANT}/spec.yaml").write_text(yaml.safe_dump(spec))
    r = elmoc_train(root, RUN, direction="forward")
    assert r.returncode == 0, r.stderr
    return {"root": root, "vocab": vocab}


@pytest.mark.slow
def test_one_forward_lm_is_trained_and_a_backward_run_refused(trained):
    root = trained["root"]
    assert sorted(p.name for p in (root / f"results/lm/{VARIANT}").iterdir()) == ["forward", "spec.yaml"]
    heldout = json.loads((root / RUN / "heldout.json").read_text())
    assert heldout["direction"] == "forward" and heldout["metric"] == "cosine"
    r = elmoc_train(root, "backward", direction="backward")
    lines = [line for line in r.stderr.splitlines() if "error:" in line]
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(lines) == 1 and "train.directions: forward" in lines[0] and "--direction forward" in lines[0], r.stderr
    assert not (root / "backward").exists()


@pytest.mark.slow
def test_features_are_the_forward_lms_alone_width_h_and_the_task_and_tables_take_them(trained, monkeypatch):
    root = trained["root"]
    monkeypatch.chdir(root)  # the spec names vec.npy relative to it
    lines = [f"__label__{'neg' if i % 2 else 'pos'} {'the cat sat' if i % 2 else 'a dog ran'} on mat{i} ."
             for i in range(16)]
    (root / "pol.cor").write_text("\n".join(lines) + "\n")
    section = json.dumps({"type": "sst", "format": "polarity", "train": "pol.cor",
                          "model": {"pre_encode_dim": 8, "encoder_hidden": 4, "integrator_hidden": 4,
                                    "output_dims": [8, 4]},
                          "trainer": {"batch_size": 4, "epochs": 1, "patience": 1}})
    r = elmoc(root, "task-sentences", "--task", "sst5", "--section-json", section, "--output", "sentences.txt")
    assert r.returncode == 0, r.stderr
    model = f"{RUN}/model.pt"
    r = elmoc(root, "extract", "--forward", model, "--sentences", "sentences.txt", "--output", "feats.hdf5",
              "--threads", "1")
    assert r.returncode == 0, r.stderr
    tokens = [s.split() for s in (root / "sentences.txt").read_text().splitlines()]
    with h5py.File(root / "feats.hdf5") as h5:
        assert h5.attrs["num_layers"] == BLOCKS + 1 and h5.attrs["dim"] == D_MODEL  # H, not 2H
        extracted = {i: h5[str(i)][()] for i in range(len(tokens))}
    for i, words in enumerate(tokens):
        assert extracted[i].shape == (BLOCKS + 1, len(words), D_MODEL)
    # the forward LM's own layers of the bare sentence (a trained LM reads no <s> ... </s> by default)
    bilm = load_checkpoints(root / model, None, root / "vocab.txt")
    assert bilm.single and bilm.backward_lm is None and bilm.output_dim == D_MODEL
    ids = torch.tensor([trained["vocab"].encode(tokens[0])])
    with torch.no_grad():
        want = torch.stack(bilm.forward_lm.encode(ids).layers, 1)[0].numpy()
    np.testing.assert_allclose(extracted[0], want, atol=1e-6)
    # a backward file beside a one-direction LM is refused in one line
    r = elmoc(root, "extract", "--forward", model, "--backward", "vocab.txt", "--sentences", "sentences.txt",
              "--output", "bad.hdf5")
    assert r.returncode == 1 and "one-direction LM" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (root / "bad.hdf5").exists()

    out = f"results/tasks/sst5/{VARIANT}/seed1.json"
    r = elmoc(root, "task", "--task", "sst5", "--section-json", section, "--variant", VARIANT, "--seed", "1",
              "--features", "feats.hdf5", "--threads", "1", "--output", out)
    assert r.returncode == 0, r.stderr
    record = json.loads((root / out).read_text())
    assert record["status"] == "ok" and record["variant"] == VARIANT and 0.0 <= record["test"] <= 1.0

    r = elmoc(root, "tables", "pretrain", "--inputs", f"{RUN}/heldout.json", "--output", "pretrain.md",
              "--csv", "pretrain.csv")
    assert r.returncode == 0, r.stderr
    flat = (root / "pretrain.csv").read_text().splitlines()
    assert len(flat) == 2 and f"{VARIANT},forward" in flat[1]
    r = elmoc(root, "tables", "beyond", "--heldout", f"{RUN}/heldout.json", "--tasks", out, "--output-dir", "tables",
              "--section-json", json.dumps({VARIANT: "gpt-c"}))
    assert r.returncode == 0, r.stderr
    with open(root / "tables/beyond.csv", newline="") as f:
        rows = [row for row in csv.reader(f) if VARIANT in row]
    params = json.loads((root / RUN / "heldout.json").read_text())["trainable_parameters"]
    assert len(rows) == 1 and rows[0][:4] == ["GPT", rows[0][1], "CONT", VARIANT], rows
    assert rows[0][4] == count(params)  # the forward LM's parameters alone (nothing to add)
    assert rows[0][-1].startswith(f"{100 * record['test']:.2f}")  # the task score of its features


@pytest.mark.slow
def test_export_embed_and_elmo_read_one_forward_stack(trained, monkeypatch):
    root = trained["root"]
    monkeypatch.chdir(root)
    (root / "sents.txt").write_text("the cat sat on a mat\nred ball over zebra tree\n")
    r = elmoc(root, "extract", "--forward", f"{RUN}/model.pt", "--sentences", "sents.txt", "--output", "s.hdf5",
              "--threads", "1")
    assert r.returncode == 0, r.stderr
    r = elmoc(root, "export", "--variant", VARIANT, "--output-dir", "model_dir")
    assert r.returncode == 0, r.stderr
    meta = json.loads((root / "model_dir/elmoc-model.json").read_text())
    assert meta["stack"] == "forward" and meta["layers"] == BLOCKS + 1 and meta["dim"] == D_MODEL
    assert "forward.safetensors" in meta["files"] and "backward.safetensors" not in meta["files"]
    card = (root / "model_dir/README.md").read_text()
    assert "| | forward |" in card and "one forward LM" in card
    r = elmoc(root, "embed", "--model", "model_dir", "sents.txt", "embedded.hdf5", "--all", "--threads", "1")
    assert r.returncode == 0, r.stderr
    with h5py.File(root / "s.hdf5") as a, h5py.File(root / "embedded.hdf5") as b:
        for i in ("0", "1"):
            assert b[i].shape == a[i].shape and b[i].shape[-1] == D_MODEL
            np.testing.assert_allclose(b[i][()], a[i][()], atol=1e-6)
    elmo = Elmo.from_pretrained(root / "model_dir", num_output_representations=1)
    assert elmo.get_output_dim() == D_MODEL
    assert elmo([["the", "cat", "sat"]])["elmo_representations"][0].shape == (1, 3, D_MODEL)
    assert load_bilm(root / "model_dir").single
