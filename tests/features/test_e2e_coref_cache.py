"""e2e-coref cache layout (doc groups of (tokens, dim, layers)) <-> our per-sentence HDF5."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from elmoc.errors import InputFileError
from elmoc.features.e2e_coref_cache import e2e_cache_to_sentences, e2e_group_name, write_e2e_cache
from elmoc.features.store import FeatureStore

DOCS = [
    ("bc/cctv/00/cctv_0001_0", [["Hong", "Kong", "is", "dense", "."], ["It", "is", "."]]),
    ("nw/wsj/00/wsj_0001_1", [["It", "is", "."], ["Yes"]]),
]


def write_sentences(path, sentences, layers=3, dim=4):
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as h5:
        index = {}
        for i, tokens in enumerate(sentences):
            h5.create_dataset(str(i), data=rng.normal(size=(layers, len(tokens), dim)).astype("float32"))
            index[" ".join(tokens)] = str(i)
        ds = h5.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
        ds[0] = json.dumps(index)
    return path


def test_round_trip(tmp_path):
    sentences = [["Hong", "Kong", "is", "dense", "."], ["It", "is", "."], ["Yes"]]
    store = FeatureStore(write_sentences(tmp_path / "ours.hdf5", sentences))
    assert write_e2e_cache(store, DOCS, tmp_path / "e2e.hdf5") == 4
    with h5py.File(tmp_path / "e2e.hdf5") as h5:
        assert sorted(h5) == ["bc:cctv:00:cctv_0001_0", "nw:wsj:00:wsj_0001_1"]
        first = h5["bc:cctv:00:cctv_0001_0/0"][()]
        assert first.shape == (5, 4, 3)  # tokens, dim, layers
        np.testing.assert_array_equal(first[:, :, 2], store.get(sentences[0])[2])
    assert e2e_cache_to_sentences(tmp_path / "e2e.hdf5", DOCS, tmp_path / "back.hdf5") == 3
    back = FeatureStore(tmp_path / "back.hdf5")
    for tokens in sentences:
        np.testing.assert_array_equal(back.get(tokens), store.get(tokens))
    assert e2e_group_name("a/b/c_0") == "a:b:c_0"


def test_mismatches_are_errors_and_write_nothing(tmp_path):
    store = FeatureStore(write_sentences(tmp_path / "ours.hdf5", [["It", "is", "."]]))
    with pytest.raises(InputFileError, match="no features for sentence"):
        write_e2e_cache(store, DOCS, tmp_path / "e2e.hdf5")
    assert not (tmp_path / "e2e.hdf5").exists()
    with h5py.File(tmp_path / "cache.hdf5", "w") as h5:
        h5.create_dataset("bc:cctv:00:cctv_0001_0/0", data=np.zeros((4, 2, 3), "float32"))  # 4 rows, 5 tokens
        h5.create_dataset("bc:cctv:00:cctv_0001_0/1", data=np.zeros((3, 2, 3), "float32"))
    with pytest.raises(InputFileError, match="4 token rows but the sentence has 5"):
        e2e_cache_to_sentences(tmp_path / "cache.hdf5", DOCS[:1], tmp_path / "out.hdf5")
    with pytest.raises(InputFileError, match="no group 'nw:wsj"):
        e2e_cache_to_sentences(tmp_path / "cache.hdf5", DOCS[1:], tmp_path / "out.hdf5")
    assert not (tmp_path / "out.hdf5").exists()
