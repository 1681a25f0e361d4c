"""benchmarks/compressed_models.py and compressed_downstream.py helpers (issue 24.3): the HDF5
fidelity and the task section passed to `elmoc task` as the workflow passes it."""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from benchmark_scripts import load_benchmark


def _features(path: Path, arrays: list[np.ndarray]) -> None:
    with h5py.File(path, "w") as h5:
        for i, a in enumerate(arrays):
            h5[str(i)] = a
        h5["sentence_to_index"] = [json.dumps({f"s{i}": str(i) for i in range(len(arrays))})]


def test_hdf5_fidelity_per_layer(tmp_path):
    bench = load_benchmark("compressed_models")
    rng = np.random.default_rng(0)
    ref = [rng.standard_normal((3, n, 4)).astype(np.float32) for n in (2, 5)]
    other = [a.copy() for a in ref]
    other[1][2] *= -1  # layer 2 of sentence 1 flipped: cosine -1 on its 5 tokens
    other[0][0, 0] += 0.5
    _features(tmp_path / "a.hdf5", ref)
    _features(tmp_path / "b.hdf5", other)
    fid = bench.hdf5_fidelity(tmp_path / "a.hdf5", tmp_path / "b.hdf5")
    assert fid["mean_cosine"][1] == pytest.approx(1.0)
    assert fid["mean_cosine"][2] == pytest.approx((2 - 5) / 7)
    assert fid["mean_cosine"][0] < 1.0 and fid["min_cosine"] == pytest.approx(-1.0)
    assert fid["max_abs_diff"] == pytest.approx(2 * float(np.abs(ref[1][2]).max()), rel=1e-6)


def test_task_section_is_the_workflows(tmp_path, repo_root):
    bench = load_benchmark("compressed_downstream")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("tasks:\n  sentiment:\n    trainer: {epochs: 2}\n")
    section = bench.task_section([str(repo_root / "config/config.yaml"), str(overlay)], "sentiment", tmp_path)
    assert section["trainer"]["epochs"] == 2 and section["trainer"]["batch_size"] == 16  # merged, not replaced
    assert section["train"] == str(tmp_path / "resources/tasks/uci_sentences/sentiment-5.0.2.tgz")
    assert "encoding" in section  # the schema's defaults filled, as the workflow's validate() does
