import numpy as np
import pytest
import torch

from elmoc.errors import ConfigError, InputFileError
from elmoc.tasks.embedder import TaskInputs


def test_words_and_features_concatenated(tmp_path, features_writer, vectors_writer):
    sentences = [["The", "cat", "sat"], ["Dogs", "bark"]]
    h5 = features_writer(tmp_path / "f.hdf5", sentences, num_layers=3, dim=6)
    npy, vocab = vectors_writer(tmp_path, ["the", "cat", "sat", "dogs"], dim=4)
    inputs = TaskInputs.create(sentences, vectors=npy, vocab=vocab, features=h5, lowercase=True)
    batch = inputs.encode(sentences)
    assert batch.mask.tolist() == [[True, True, True], [True, True, False]]
    assert batch.features.shape == (3, 2, 3, 6)
    embedder = inputs.embedder()
    out = embedder(batch)
    assert out.shape == (2, 3, 10) and embedder.output_dim == 10
    assert torch.all(out[1, 2] == 0)  # padding
    table = np.load(npy)
    from elmoc.data.vocab.vocabulary import Vocabulary
    v = Vocabulary.load(vocab)
    assert torch.allclose(out[0, 1, :4], torch.from_numpy(table[v.id("cat")]))  # lowercased lookup
    # the initial mix is the mean of the layers
    assert torch.allclose(out[0, :, 4:], batch.features[:, 0].mean(0), atol=1e-6)
    assert not any(p.requires_grad for p in embedder.words.parameters())
    assert embedder.mix.weights.requires_grad


def test_features_from_other_data_are_an_error(tmp_path, features_writer):
    h5 = features_writer(tmp_path / "f.hdf5", [["a", "b"]])
    with pytest.raises(InputFileError, match="no features for sentence 'c'"):
        TaskInputs.create([["a", "b"], ["c"]], features=h5)
    h5 = features_writer(tmp_path / "g.hdf5", [["a", "b"], ["c"]], wrong_length=1)
    with pytest.raises(InputFileError, match="2 token rows but the sentence 'c' has 1 tokens"):
        TaskInputs.create([["a", "b"], ["c"]], features=h5)


def test_needs_some_input():
    with pytest.raises(ConfigError, match="--fasttext"):
        TaskInputs()
