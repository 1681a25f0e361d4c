"""Issue 13: export a model directory, load it elsewhere, embed, and the Elmo module."""
from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest
import torch
from lm_tree_helpers import run_command

from elmoc import Elmo, embed_sentences
from elmoc.errors import InputFileError
from elmoc.pretrained.loader import load_bilm

SENTENCES = ["the zebra ran to the house", "a xqzzy", "the cat sat on a big mat ."]


@pytest.fixture
def exported(lm_tree, tmp_path, monkeypatch):
    """Extract in the results tree, export, then move to a fresh folder with no results/."""
    root = lm_tree("fasttext")
    (root / "s.txt").write_text("\n".join(SENTENCES) + "\n")
    assert run_command("extract", ["--forward", "results/lm/tiny/forward/model.pt", "--backward",
                                   "results/lm/tiny/backward/model.pt", "--sentences", "s.txt",
                                   "--output", "extract.hdf5"]) == 0
    assert run_command("export", ["--variant", "tiny", "--output-dir", "model"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(root / "model", elsewhere / "model")
    shutil.copy(root / "s.txt", elsewhere / "s.txt")
    shutil.copy(root / "extract.hdf5", elsewhere / "extract.hdf5")
    shutil.rmtree(root)
    monkeypatch.chdir(elsewhere)
    return elsewhere


def test_embed_equals_extract_without_results_tree(exported):
    model = exported / "model"
    names = sorted(p.name for p in model.iterdir())
    assert {"elmoc-model.json", "forward.safetensors", "backward.safetensors", "vocab.txt", "input_vectors.npy", "spec.yaml",
            "README.md", "fasttext_buckets.npy", "fasttext_words.txt"} <= set(names)
    assert "zebra" in (model / "fasttext_words.txt").read_text().split("\n")
    card = (model / "README.md").read_text()
    assert "tokens seen | 60 | 60" in card and "elmoc export --variant tiny" in card
    assert "| threads x processes (from step) | 1 x 1 (0); 1 x 2 (2) | 1 x 1 (0) |" in card
    assert "equal neither layout's uninterrupted run" in card  # the forward LM changed layout
    # a trained LM: bare tokens in both, by the model's kind (issue 31.8)
    assert json.loads((model / "elmoc-model.json").read_text())["boundaries"] is False
    assert run_command("embed", ["s.txt", "embed.hdf5", "--model", "model", "--all", "--batch-size", "2"]) == 0
    with h5py.File("embed.hdf5") as a, h5py.File("extract.hdf5") as b:
        assert not a.attrs["boundaries"] and not b.attrs["boundaries"]
        assert json.loads(a["sentence_to_index"][0]) == json.loads(b["sentence_to_index"][0])
        for key in ("0", "1", "2"):
            assert a[key].shape == b[key].shape
            # batches of 2 here, of 64 in extract: other padded shapes, float32 sums in another order
            np.testing.assert_allclose(a[key][()], b[key][()], atol=1e-5)
        full = a["1"][()]
    for flag, want in (("--top", full[-1]), ("--average", full.mean(axis=0))):
        assert run_command("embed", ["s.txt", "o.hdf5", "--model", "model", flag]) == 0
        with h5py.File("o.hdf5") as h5:
            np.testing.assert_allclose(h5["1"][()], want, atol=1e-6)
    arrays = embed_sentences("model", [s.split() for s in SENTENCES])
    np.testing.assert_allclose(arrays[1], full, atol=1e-6)


def test_oov_word_gets_its_own_vector(exported):
    a, b, c = embed_sentences("model", [["zebra"], ["xqzzy"], ["<unk>"]], layers="all")
    assert np.abs(a[0] - c[0]).max() > 1e-2 and np.abs(b[0] - c[0]).max() > 1e-2


def test_elmo_module_against_hand_computation(exported):
    torch.manual_seed(0)
    elmo = Elmo.from_pretrained("model", num_output_representations=2, dropout=0.0)
    assert not any(p.requires_grad for p in elmo.bilm.parameters())
    with torch.no_grad():
        elmo.scalar_mixes[0].weights.copy_(torch.tensor([0.5, -1.0, 2.0]))
        elmo.scalar_mixes[1].gamma.fill_(3.0)
    batch = [s.split() for s in SENTENCES]
    out = elmo(batch)
    reps, mask = out["elmo_representations"], out["mask"]
    assert len(reps) == 2 and mask.dtype == torch.bool
    assert mask.tolist() == [[t < len(s) for t in range(8)] for s in batch]
    layers = embed_sentences("model", batch)
    w = torch.softmax(torch.tensor([0.5, -1.0, 2.0]), 0).numpy()
    for b, s in enumerate(batch):
        assert reps[0].shape == (3, 8, elmo.get_output_dim())
        np.testing.assert_allclose(reps[0][b, : len(s)].detach().numpy(),
                                   np.tensordot(w, layers[b], axes=1), atol=1e-5)
        np.testing.assert_allclose(reps[1][b, : len(s)].detach().numpy(), 3.0 * layers[b].mean(axis=0), atol=1e-5)
        assert not reps[0][b, len(s):].any()
    reps[0].sum().backward()
    assert elmo.scalar_mixes[0].weights.grad is not None
    ids = torch.tensor([[elmo.bilm.vocab.id(w) for w in "the cat sat".split()] + [0]])
    by_id = elmo(ids)["elmo_representations"][1]
    by_str = elmo([["the", "cat", "sat"]])["elmo_representations"][1]
    torch.testing.assert_close(by_id[:, :3], by_str)


def test_bad_model_directories_are_one_line(exported, tmp_path, capsys):
    (exported / "empty.txt").write_text("the cat\n\nsat\n")
    assert run_command("embed", ["empty.txt", "o.hdf5", "--model", "model", "--all"]) == 1
    assert capsys.readouterr().err.strip().endswith("empty.txt:2: blank line: every line must hold one sentence "
                                                    "(remove empty lines)")
    broken = tmp_path / "broken"
    shutil.copytree(exported / "model", broken)
    (broken / "fasttext_buckets.npy").unlink()
    with pytest.raises(InputFileError, match=r"broken/fasttext_buckets.npy: missing from the model directory"):
        load_bilm(broken)
    meta = json.loads((exported / "model/elmoc-model.json").read_text())
    meta["format"] = "elmoc-model-v0"
    (broken / "elmoc-model.json").write_text(json.dumps(meta))
    with pytest.raises(InputFileError, match=r"elmoc-model.json: format 'elmoc-model-v0' is not one this elmoc reads \(elmoc-model-v1, elmoc-model-v2"):
        load_bilm(broken)
    with pytest.raises(InputFileError, match=r"nowhere: model directory not found"):
        load_bilm(tmp_path / "nowhere")
    meta["format"], meta["oov_vectors"] = "elmoc-model-v2", "char_cnn_typo"  # no composer of the input has it
    (broken / "elmoc-model.json").write_text(json.dumps(meta))
    with pytest.raises(InputFileError, match=r"elmoc-model.json: oov_vectors 'char_cnn_typo' is not a composer of "
                       r"input 'fasttext'; export the model again"):
        load_bilm(broken, check_files=False)


def test_released_bilm_tf_through_elmo_module(elmo_fixture_dir, tmp_path):
    """AllenNLP's fixture ELMo, converted, reproduces bilm-tf's lm_embeddings_0.hdf5 (stateful, as AllenNLP)."""
    assert run_command("export", ["--bilm-tf-options", str(elmo_fixture_dir / "options.json"), "--bilm-tf-weights",
                                  str(elmo_fixture_dir / "lm_weights.hdf5"), "--output-dir", str(tmp_path / "elmo")]) == 0
    top_only = [-1e9, -1e9, 0.0]  # softmax -> (0, 0, 1): the top layer, as the fixture stores
    elmo = Elmo.from_pretrained(tmp_path / "elmo", 1, dropout=0.0, scalar_mix_parameters=top_only, stateful=True)
    sentences = json.loads((elmo_fixture_dir / "sentences.json").read_text())
    worst = 0.0
    with h5py.File(elmo_fixture_dir / "lm_embeddings_0.hdf5") as expected, torch.no_grad():
        for i in range(len(sentences[0])):
            batch = [sentences[k][i].split() for k in range(3)]
            rep = elmo(batch)["elmo_representations"][0]
            want = expected[str(i)][()]  # (2, words, 16): forward and backward top layers
            got = rep[0, : len(batch[0])].numpy()
            worst = max(worst, float(np.abs(got - np.concatenate([want[0], want[1]], axis=-1)).max()))
    assert worst < 1e-5, worst


def test_cuda_without_cuda_is_one_line(exported, capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    assert run_command("embed", ["s.txt", "o.hdf5", "--model", "model", "--all", "--device", "cuda"]) == 1
    assert "CUDA is not available here; use --device cpu" in capsys.readouterr().err


@pytest.mark.gpu
def test_embed_on_gpu_matches_cpu(exported):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    sentences = [s.split() for s in SENTENCES]
    cpu = embed_sentences("model", sentences)
    gpu = embed_sentences("model", sentences, device="cuda")
    for a, b in zip(cpu, gpu):
        np.testing.assert_allclose(a, b, atol=1e-4)
    elmo = Elmo.from_pretrained("model", 1, dropout=0.0, device="cuda")
    assert elmo(sentences)["elmo_representations"][0].device.type == "cuda"


def test_embed_raw_text_with_the_project_tokenizer(exported):
    (exported / "raw.txt").write_text("The cat didn't sit.\n")
    assert run_command("embed", ["raw.txt", "raw.hdf5", "--model", "model", "--top", "--tokenize"]) == 0
    with h5py.File("raw.hdf5") as h5:
        assert json.loads(h5["sentence_to_index"][0]) == {"The cat did n't sit .": "0"}
        assert h5["0"].shape == (6, 12)


@pytest.mark.slow
def test_sigterm_during_embed_is_a_clean_exit_without_temporaries(exported):
    """SIGTERM (a scheduler's cancel) used to kill `elmoc embed` with -15 and leave
    ``.o.XXXX.tmp.h5`` and its ``.index`` beside the output; now it is handled like Ctrl-C."""
    import signal
    import subprocess
    import sys
    import time

    (exported / "many.txt").write_text("the cat sat on a big mat .\n" * 100_000)
    proc = subprocess.Popen([sys.executable, "-m", "elmoc.cli", "embed", "many.txt", "o.h5", "--model", "model",
                             "--top", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(exported.glob(".o.*.tmp.h5")) and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "elmoc embed: terminated (SIGTERM)" in err
    assert not list(exported.glob(".o.*")) and not (exported / "o.h5").exists()
