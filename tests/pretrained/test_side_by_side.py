"""Issue 36.4: model directories measured side by side against one original
(elmoc.pretrained.side_by_side): parameters kept, layer pairing, speed and fidelity."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from lm_tree_helpers import run_command

from elmoc.io.tensor_files import read_state, save_tensors
from elmoc.pretrained.compare import directory_size
from elmoc.pretrained.side_by_side import layer_pairs, measure_side_by_side, stored_parameters


@pytest.fixture(scope="module")
def trio(elmo_dir):
    """The test ELMo, its float16 copy and a copy with half of one LSTM matrix set to zero."""
    assert run_command("compress", [str(elmo_dir / "elmo"), "--output-dir", str(elmo_dir / "float16"),
                                    "--format", "float16", "--measure", str(elmo_dir / "s.txt"),
                                    "--threads", "1", "--rounds", "1"]) == 0
    pruned = elmo_dir / "pruned-half"
    shutil.copytree(elmo_dir / "elmo", pruned)
    state = read_state(pruned / "forward.safetensors")
    name = next(k for k, v in state.items() if v.dim() == 2 and "encoder" in k)
    weight = state[name].clone()
    weight.view(-1)[: weight.numel() // 2] = 0.0
    state[name] = weight
    save_tensors(state, pruned / "forward.safetensors")
    return elmo_dir, name, weight


def _sentences(root) -> list[list[str]]:
    return [line.split() for line in (root / "s.txt").read_text().splitlines()]


def test_layer_pairs_by_depth_and_width():
    a = np.zeros((3, 5, 8))
    assert layer_pairs(a, np.zeros((3, 5, 8))) == [(0, 0), (1, 1), (2, 2)]
    assert layer_pairs(np.zeros((5, 5, 8)), np.zeros((3, 5, 8))) == [(0, 0), (1, 2), (2, 4)]
    assert layer_pairs(a, np.zeros((2, 5, 8))) == [(0, 0), (1, 2)]  # one LSTM layer: top with top
    assert layer_pairs(a, np.zeros((3, 5, 4))) is None  # narrower: nothing to compare
    assert layer_pairs(a, np.zeros((4, 5, 8))) is None  # deeper than the original
    assert layer_pairs(a, np.zeros((1, 5, 8))) is None  # the input view alone


def test_stored_parameters_count_what_a_pruned_model_keeps(trio):
    root, name, weight = trio
    full, pruned, half = (stored_parameters(root / d) for d in ("elmo", "pruned-half", "float16"))
    zeros_before = int((read_state(root / "elmo" / "forward.safetensors")[name] == 0).sum())
    assert pruned["parameters"] == full["parameters"] == half["parameters"]
    assert full["nonzero"] - pruned["nonzero"] == weight.numel() // 2 - zeros_before
    assert half["weights_bytes"] < 0.6 * full["weights_bytes"]


def test_side_by_side_records(trio):
    root, _, _ = trio
    records = measure_side_by_side(root / "elmo", {"float16": root / "float16", "pruned-half": root / "pruned-half",
                                                   "same": root / "elmo"}, _sentences(root), rounds=1, batch_size=4)
    assert list(records) == ["original", "float16", "pruned-half", "same"]
    assert records["original"]["speed_ratio"] == pytest.approx(1.0, abs=1e-12)  # speed x best / tokens: rounding
    same = records["same"]
    assert same["mean_cosine"] == [1.0] * same["layers"] and same["max_abs_diff"] == 0.0
    assert same["layer_pairs"] == [(i, i) for i in range(3)]
    assert min(records["float16"]["mean_cosine"]) > 0.9999
    assert min(records["pruned-half"]["mean_cosine"][1:]) < 0.9999  # the LSTM layers moved
    assert records["pruned-half"]["mean_cosine"][0] == pytest.approx(1.0)  # the input view did not
    for role, d in (("original", "elmo"), ("float16", "float16")):
        assert records[role]["size_bytes"] == directory_size(root / d)
        assert records[role]["tokens_per_s"] > 0
