"""Helpers for the downstream-task tests: tiny feature files and word-vector tables."""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary


def write_features(path: Path, sentences, num_layers: int = 3, dim: int = 8, seed: int = 0, wrong_length=None) -> Path:
    """An allennlp-elmo-style HDF5: dataset str(i) (layers, T, dim) + sentence_to_index."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as h5:
        mapping = {}
        for i, tokens in enumerate(sentences):
            n = len(tokens) + (1 if wrong_length is not None and i == wrong_length else 0)
            h5.create_dataset(str(i), data=rng.normal(size=(num_layers, n, dim)).astype("float32"))
            mapping[" ".join(tokens)] = str(i)
        ds = h5.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
        ds[0] = json.dumps(mapping)
    return path


def write_vectors(directory: Path, words, dim: int = 16, seed: int = 0) -> tuple[Path, Path]:
    """A vocab.txt + .npy pair covering ``words``."""
    words = sorted(set(words) - set(SPECIALS))
    vocab = Vocabulary(list(SPECIALS) + words)
    vocab.save(directory / "vocab.txt")
    table = np.random.default_rng(seed).normal(size=(len(vocab), dim)).astype("float32")
    np.save(directory / "vectors.npy", table)
    return directory / "vectors.npy", directory / "vocab.txt"


@pytest.fixture
def features_writer():
    return write_features


@pytest.fixture
def vectors_writer():
    return write_vectors


def _random_inputs(task, instances, dim: int = 16, seed: int = 0):
    """Random word vectors (TaskInputs) for every word of ``instances``."""
    from elmoc.tasks.embedder import TaskInputs

    words = sorted({w for s in task.sentences(instances) for w in s})
    rng = np.random.default_rng(seed)
    return TaskInputs(rng.standard_normal((len(words), dim)).astype(np.float32), words)


@pytest.fixture
def random_inputs():
    return _random_inputs


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run far faster on one thread than on 2 contended ones."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
