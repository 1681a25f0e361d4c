"""Issue 12.1: words outside the LM vocabulary keep their identity at extraction."""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from lm_tree_helpers import run_command


from elmoc.errors import InputFileError
from elmoc.inputs.characters import batch_char_ids
from elmoc.pretrained.loader import load_checkpoints

SENTENCE = ["the", "zebra", "ran", "xqzzy"]  # zebra: fastText knows it; xqzzy: nobody does


def extract(tmp, *extra):
    out = tmp / "features.hdf5"
    (tmp / "sentences.txt").write_text(" ".join(SENTENCE) + "\n")
    assert run_command("extract", ["--forward", "results/lm/tiny/forward/model.pt", "--backward",
                 "results/lm/tiny/backward/model.pt", "--sentences", str(tmp / "sentences.txt"),
                 "--output", str(out), *extra]) == 0
    with h5py.File(out) as h5:
        return h5["0"][()], dict(h5.attrs)


def layer0(bilm, vectors):
    """Layer 0 of both directions for input vectors (n, dim): (n, 2H)."""
    x = torch.as_tensor(np.asarray(vectors), dtype=torch.float32)[None]
    mask = torch.ones(x.shape[:2], dtype=torch.bool)
    with torch.no_grad():
        f = bilm.forward_lm.encoder(x, mask).layers[0][0]
        b = bilm.backward_lm.encoder(x, mask).layers[0][0]
    return torch.cat([f, b], dim=-1).numpy()


def test_fasttext_input_reads_the_words_fasttext_vector(lm_tree):
    import fasttext

    root = lm_tree("fasttext")
    feats, attrs = extract(root)
    assert attrs["open_vocabulary"]
    bilm = load_checkpoints("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt")
    assert "zebra" not in bilm.vocab and "xqzzy" not in bilm.vocab
    ref = fasttext.load_model("results/fasttext/cc.bin")  # independent oracle: the fasttext package
    want = layer0(bilm, [ref.get_word_vector(w) for w in SENTENCE + ["<unk>"]])
    np.testing.assert_allclose(feats[0], want[:4], atol=1e-5)
    for pos in (1, 3):  # both OOV words: their own vector, not <unk>'s
        assert np.abs(feats[0, pos] - want[4]).max() > 1e-2
    closed, attrs = extract(root, "--closed-vocabulary")
    assert not attrs["open_vocabulary"]
    np.testing.assert_allclose(closed[0, 1], want[4], atol=1e-5)  # the old behaviour: <unk>
    np.testing.assert_allclose(closed[0, 0], feats[0, 0], atol=1e-6)  # vocabulary words unchanged


def test_char_cnn_input_reads_the_words_characters(lm_tree, shared_data):
    lm_tree("char_cnn", shared_data)
    feats, _ = extract(Path.cwd())
    bilm = load_checkpoints("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt")
    chars = batch_char_ids([SENTENCE + ["<unk>"]], bilm.forward_lm.input_layer.max_chars)
    with torch.no_grad():
        f = bilm.forward_lm.input_layer.encode_chars(chars)[0]
        b = bilm.backward_lm.input_layer.encode_chars(chars)[0]
        mask = torch.ones(1, f.shape[0], dtype=torch.bool)
        want = torch.cat([bilm.forward_lm.encoder(f[None], mask).layers[0][0],
                          bilm.backward_lm.encoder(b[None], mask).layers[0][0]], dim=-1).numpy()
    np.testing.assert_allclose(feats[0], want[:4], atol=1e-5)
    assert np.abs(feats[0, 1] - want[4]).max() > 1e-3


def test_closed_word_table_falls_back_to_unk(lm_tree):
    lm_tree("random")
    feats, attrs = extract(Path.cwd())
    assert not attrs["open_vocabulary"]
    np.testing.assert_allclose(feats[0, 1], feats[0, 3], atol=1e-6)  # both OOV words read <unk>


def test_wrong_fasttext_model_is_refused(lm_tree, tmp_path):
    root = lm_tree("fasttext")
    table = np.load("results/vectors/cc.npy")
    np.save("results/vectors/cc.npy", table[:, ::-1].copy())  # a table this .bin did not make
    with pytest.raises(InputFileError, match=r"cc.npy: rows do not match the fastText model"):
        load_checkpoints(root / "results/lm/tiny/forward/model.pt", root / "results/lm/tiny/backward/model.pt")


def test_directions_of_different_sizes_are_refused(lm_tree, capsys):
    import torch as _torch

    root = lm_tree("fasttext")
    path = root / "results/lm/tiny/backward/model.pt"
    payload = _torch.load(path, weights_only=True)
    payload["spec"] = json.loads(json.dumps(payload["spec"]))
    payload["spec"]["encoder"]["cell_size"] = 12
    _torch.save(payload, path)
    (root / "s.txt").write_text("the cat\n")
    code = run_command("extract", ["--forward", "results/lm/tiny/forward/model.pt", "--backward", str(path),
                 "--sentences", "s.txt", "--output", "f.hdf5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert "backward/model.pt: its LM spec differs from" in err[0] and "in encoder" in err[0]


def test_char_cnn_table_input_reads_the_cnn_vector_of_the_word(lm_tree, shared_data, tmp_path):
    """ELMo-C-CNN: input table = the ELMo char-CNN over the vocabulary; an OOV word reads that
    char-CNN's vector of its characters, at extraction and from an exported directory."""
    from lm_tree_helpers import H as width
    from lm_tree_helpers import save_lm_pair
    from elmoc.commands.cnn_table import char_cnn_table
    from elmoc.data.vocab.vocabulary import Vocabulary
    from elmoc.pretrained.elmo import embed_sentences

    root = lm_tree("char_cnn", shared_data)
    (root / "results/lm/tiny").rename(root / "results/lm/elmo")
    vocab = Vocabulary.load("results/vocab/vocab.txt")
    np.save("results/vectors/cnn.npy", char_cnn_table("results/lm/elmo/forward/model.pt", vocab))
    spec = {"name": "tiny", "input": {"type": "fasttext", "vectors": "results/vectors/cnn.npy"},
            "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 10, "projection_size": width},
            "output": {"type": "cosine", "vectors": "results/vectors/cnn.npy"}, "vocab": "results/vocab/vocab.txt"}
    save_lm_pair(root, spec, vocab)
    feats, attrs = extract(root)
    assert attrs["open_vocabulary"]
    bilm = load_checkpoints("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt")
    elmo = load_checkpoints("results/lm/elmo/forward/model.pt", "results/lm/elmo/backward/model.pt")
    chars = batch_char_ids([SENTENCE + ["<unk>"]], elmo.forward_lm.input_layer.max_chars)
    with torch.no_grad():
        cnn = elmo.forward_lm.input_layer.encode_chars(chars)[0]
    want = layer0(bilm, cnn)
    np.testing.assert_allclose(feats[0], want[:4], atol=1e-5)
    assert np.abs(feats[0, 1] - want[4]).max() > 1e-3
    assert run_command("export", ["--variant", "tiny", "--output-dir", str(tmp_path / "cnn_model")]) == 0
    assert (tmp_path / "cnn_model/char_cnn.safetensors").is_file()
    np.testing.assert_allclose(embed_sentences(tmp_path / "cnn_model", [SENTENCE])[0], feats, atol=1e-6)
