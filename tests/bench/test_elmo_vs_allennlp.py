"""benchmarks/elmo_vs_allennlp.py helpers (issue 24): the random bilm-tf weights load into
elmoc, and the HDF5 comparison finds what differs.  AllenNLP itself is not needed."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch
from benchmark_scripts import load_benchmark

from elmoc.pretrained.bilm_tf import _bilm_tf_parts


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("elmo_vs_allennlp")


TINY = {"lstm": {"use_skip_connections": True, "projection_dim": 4, "cell_clip": 3, "proj_clip": 3, "dim": 8,
                 "n_layers": 2},
        "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 8]], "n_highway": 1, "embedding": {"dim": 4},
                     "n_characters": 262, "max_characters_per_token": 50}}


def test_random_weights_have_the_bilm_tf_layout_elmoc_reads(bench, tmp_path):
    options, weights = bench.write_random_bilm_tf(tmp_path, TINY, seed=3)
    assert json.loads(options.read_text()) == TINY
    with h5py.File(weights) as h5:
        assert h5["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"].shape == (8, 32)
        assert h5["char_embed"].shape == (261, 4) and h5["CNN/W_cnn_1"].shape == (1, 2, 4, 8)
    _, _, states = _bilm_tf_parts(options, weights)  # every dataset's shape is checked on load
    forward = states["forward"]["encoder.lstm_layers.0.state_projection.weight"]
    backward = states["backward"]["encoder.lstm_layers.0.state_projection.weight"]
    assert torch.isfinite(forward).all() and not torch.equal(forward, backward)
    assert bench.ORIGINAL_OPTIONS["lstm"]["dim"] == 4096 and bench.ORIGINAL_OPTIONS["lstm"]["projection_dim"] == 512


def _features(path, arrays, sentences):
    with h5py.File(path, "w") as h5:
        for key, value in arrays.items():
            h5[key] = value.astype(np.float32)
        ds = h5.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
        ds[0] = json.dumps({s: str(i) for i, s in enumerate(sentences)})


def test_compare_features_reports_the_largest_difference_and_its_layer(bench, tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"0": rng.standard_normal((3, 2, 4)), "1": rng.standard_normal((3, 5, 4))}
    _features(tmp_path / "a.hdf5", arrays, ["a b", "c d e f g"])
    _features(tmp_path / "same.hdf5", arrays, ["a b", "c d e f g"])
    assert bench.compare_features(tmp_path / "a.hdf5", tmp_path / "same.hdf5")["max_abs_diff"] == 0.0
    changed = {k: v.copy() for k, v in arrays.items()}
    changed["1"][2, 4, 0] += 0.5
    changed["0"][0, 0, 0] += 1e-3
    _features(tmp_path / "b.hdf5", changed, ["a b", "c d e f g"])
    got = bench.compare_features(tmp_path / "a.hdf5", tmp_path / "b.hdf5")
    assert got["sentences"] == 2 and got["worst_key"] == "1"
    assert got["max_abs_diff"] == pytest.approx(0.5, abs=1e-6)
    assert got["per_layer_max_abs_diff"] == pytest.approx([1e-3, 0.0, 0.5], abs=1e-6)


def test_compare_features_refuses_different_shapes_keys_or_index(bench, tmp_path):
    arrays = {"0": np.zeros((3, 2, 4))}
    _features(tmp_path / "a.hdf5", arrays, ["a b"])
    _features(tmp_path / "shape.hdf5", {"0": np.zeros((3, 3, 4))}, ["a b"])
    _features(tmp_path / "keys.hdf5", {**arrays, "1": np.zeros((3, 1, 4))}, ["a b", "c"])
    _features(tmp_path / "index.hdf5", arrays, ["x y"])
    for other, message in (("shape", "shape"), ("keys", "different sentences"), ("index", "sentence_to_index")):
        with pytest.raises(ValueError, match=message):
            bench.compare_features(tmp_path / "a.hdf5", tmp_path / f"{other}.hdf5")


def test_sample_sentences_draws_distinct_lines_reproducibly(bench, tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "s0").write_text("a b\n\nc  d e\na b\n")
    (tmp_path / "c" / "s1").write_text("f\ng h i j\n")
    one = bench.sample_sentences(tmp_path / "c", 3, seed=1)
    assert one == bench.sample_sentences(tmp_path / "c", 3, seed=1)
    assert len(set(one)) == 3 and set(one) <= {"a b", "c d e", "f", "g h i j"}
    assert bench.sample_sentences(tmp_path / "c", 4, seed=1, max_tokens=10)
    with pytest.raises(SystemExit):
        bench.sample_sentences(tmp_path / "c", 5)
