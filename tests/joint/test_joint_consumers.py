"""What consumes a trained LM reads a joint bi-LM's one model.pt: extraction (the same file
as --forward and --backward), the CNN table of the ELMo-C-CNN ablations (the shared
char-CNN), and export + ``Elmo.from_pretrained``."""
from __future__ import annotations

from collections import Counter

import h5py
import numpy as np
import pytest
import torch

from elmoc.cli import main
from elmoc.data.vocab.vocabulary import BOS, EOS, Vocabulary
from elmoc.lm import BidirectionalLM
from elmoc.model_file import load_checkpoint, save_checkpoint

OPTIONS = {"lstm": {"projection_dim": 8}, "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 3], [2, 5]],
                                                       "n_highway": 1, "max_characters_per_token": 10,
                                                       "activation": "relu"}}
SPEC = {"name": "tiny-elmo", "input": {"type": "char_cnn", "options": OPTIONS},
        "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 12, "projection_size": 8,
                    "layer_norm": False, "recurrent_dropout": 0.1},
        "output": {"type": "sampled", "num_samples": 4},
        "train": {"batch_size": 2, "bptt": 5, "directions": "joint"}, "vocab": "vocab.txt"}
SENTENCES = [["the", "cat", "sat", "on", "a", "mat"], ["a", "dog", "ran"], ["the", "mat"]]


@pytest.fixture
def joint(tmp_path, monkeypatch):
    """A tiny joint ELMo (char-CNN input, sampled softmax) saved as ``model.pt`` as
    ``elmoc train --direction joint`` writes it; returns (model, path, vocab)."""
    monkeypatch.chdir(tmp_path)
    vocab = Vocabulary.from_counts(Counter("the cat sat on a mat and the dog ran off".split()))
    vocab.save(tmp_path / "vocab.txt")
    torch.manual_seed(0)
    model = BidirectionalLM.from_spec(SPEC, vocab)
    with torch.no_grad():  # distinct directions, visibly
        for p in model.backward_encoder.parameters():
            p.add_(0.3 * torch.randn_like(p))
    path = tmp_path / "results/lm/tiny-elmo/joint/model.pt"
    save_checkpoint(path, {"spec": SPEC, "vocab_path": "vocab.txt", "direction": "joint",
                           "model": model.state_dict(), "step": 3, "tokens": 60, "history": [], "final": True})
    (tmp_path / "s.txt").write_text("".join(" ".join(s) + "\n" for s in SENTENCES))
    return model.eval(), path, vocab


@torch.no_grad()
def _expected_layers(model: BidirectionalLM, vocab: Vocabulary, words: list[str],
                     boundaries: bool = False) -> np.ndarray:
    """(layers, words, 2 * hidden): each direction's view run on its own over the bare
    words (a trained LM's default), or with ``boundaries`` over ``<s> words </s>``
    (the backward one reversed), boundaries dropped."""
    ids = torch.tensor([[vocab.id(w) for w in ([BOS, *words, EOS] if boundaries else words)]])
    inner = slice(1, -1) if boundaries else slice(None)
    fwd = model.direction("forward").encode(ids).layers
    bwd = model.direction("backward").encode(ids.flip(1)).layers
    return torch.stack([torch.cat([f, b.flip(1)], dim=-1)[0, inner] for f, b in zip(fwd, bwd)]).numpy()


def test_extract_reads_the_joint_file_as_both_directions(joint):
    model, path, vocab = joint
    for flags, boundaries in (([], False), (["--boundaries", "true"], True)):
        assert main(["extract", "--forward", str(path), "--backward", str(path), "--sentences", "s.txt",
                     "--output", "out.hdf5", *flags]) == 0
        with h5py.File("out.hdf5") as h5:
            got = {k: h5[k][()] for k in h5 if k != "sentence_to_index"}
            assert bool(h5.attrs["boundaries"]) is boundaries
        assert len(got) == len(SENTENCES)
        for i, words in enumerate(SENTENCES):
            expected = _expected_layers(model, vocab, words, boundaries)
            assert got[str(i)].shape == expected.shape == (3, len(words), 16)
            np.testing.assert_allclose(got[str(i)], expected, rtol=1e-5, atol=1e-6)
    # the backward half came from the backward encoder, not the forward one again
    assert np.abs(got["0"][1:, :, :8] - got["0"][1:, :, 8:]).max() > 1e-3


def test_cnn_table_of_a_joint_elmo_is_its_shared_char_cnn(joint, tmp_path):
    model, path, vocab = joint
    assert main(["cnn-table", "--checkpoint", str(path), "--vocab", "vocab.txt", "--output", "cnn.npy",
                 "--chunk", "4"]) == 0
    with torch.no_grad():
        expected = model.input_layer(torch.arange(len(vocab))[None])[0].numpy()
    np.testing.assert_allclose(np.load(tmp_path / "cnn.npy"), expected, rtol=1e-5, atol=1e-6)
    from elmoc.inputs.char_cnn_vectors import CharCnnVectors

    words = ["cat", "zebras"]  # one word outside the vocabulary: the char-CNN reads it all the same
    composed = CharCnnVectors.from_lm(load_checkpoint(path), path).vectors(words)
    np.testing.assert_allclose(composed[0], expected[vocab.id("cat")], rtol=1e-5, atol=1e-6)
    assert composed.shape == (2, 8) and np.isfinite(composed).all()


def test_export_and_from_pretrained_of_a_joint_model(joint):
    from elmoc.pretrained.elmo import Elmo

    model, path, vocab = joint
    assert main(["export", "--forward", str(path), "--backward", str(path), "--output-dir", "model"]) == 0
    elmo = Elmo.from_pretrained("model", num_output_representations=1, dropout=0.0)
    layers, mask, _ = elmo.bilm.embed(SENTENCES)
    for i, words in enumerate(SENTENCES):
        np.testing.assert_allclose(layers[i, :, : len(words)].numpy(), _expected_layers(model, vocab, words),
                                   rtol=1e-5, atol=1e-6)
    out = elmo(SENTENCES)
    assert out["elmo_representations"][0].shape == (3, 6, 16)
    assert out["mask"].sum().item() == sum(len(s) for s in SENTENCES)
