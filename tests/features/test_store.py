import json

import h5py
import numpy as np
import pytest

from elmoc.errors import InputFileError
from elmoc.features.store import FeatureStore


def _write(path, sentences, lengths=None):
    with h5py.File(path, "w") as h5:
        mapping = {}
        for i, tokens in enumerate(sentences):
            n = len(tokens) if lengths is None else lengths[i]
            h5.create_dataset(str(i), data=np.full((3, n, 4), float(i), dtype="float32"))
            mapping[" ".join(tokens)] = str(i)
        ds = h5.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
        ds[0] = json.dumps(mapping)


@pytest.mark.parametrize("max_memory", [2 * 1024**3, 0])  # in memory and lazy
def test_lookup_by_text(tmp_path, max_memory):
    path = tmp_path / "f.hdf5"
    _write(path, [["a", "b"], ["c", "d", "e"]])
    store = FeatureStore(path, max_memory_bytes=max_memory)
    assert (store.num_layers, store.dim, len(store)) == (3, 4, 2)
    got = store.get(["c", "d", "e"])
    assert got.shape == (3, 3, 4) and np.all(got == 1.0)
    assert store.check([["a", "b"], ["c", "d", "e"]]) == 2
    store.close()


def test_missing_sentence_is_an_error(tmp_path):
    path = tmp_path / "f.hdf5"
    _write(path, [["a", "b"]])
    store = FeatureStore(path)
    with pytest.raises(InputFileError, match="no features for sentence 'x y'"):
        store.check([["a", "b"], ["x", "y"]])


def test_token_count_mismatch_is_an_error(tmp_path):
    path = tmp_path / "f.hdf5"
    _write(path, [["a", "b"], ["c"]], lengths=[2, 2])
    store = FeatureStore(path)
    with pytest.raises(InputFileError, match="2 token rows but the sentence 'c' has 1 tokens"):
        store.check([["a", "b"], ["c"]])


def test_bad_files(tmp_path):
    with pytest.raises(InputFileError, match="not found"):
        FeatureStore(tmp_path / "nope.hdf5")
    (tmp_path / "junk.hdf5").write_text("junk")
    with pytest.raises(InputFileError, match="not a readable HDF5"):
        FeatureStore(tmp_path / "junk.hdf5")
    with h5py.File(tmp_path / "noindex.hdf5", "w") as h5:
        h5.create_dataset("0", data=np.zeros((3, 1, 4), "float32"))
    with pytest.raises(InputFileError, match="sentence_to_index"):
        FeatureStore(tmp_path / "noindex.hdf5")
