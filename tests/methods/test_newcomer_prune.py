"""Newcomer trial (issue 46): a random prune method is one plug-in file
(tests/methods/plugins/random_prune.py), used through ``prune`` (rounds with ``mask.pt``, the
masks kept through fine-tuning) and the ``prune`` section's checks with no other edit."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from elmoc.config import check_section
from elmoc.config_section import Section
from elmoc.errors import ConfigError
from elmoc.model_file import load_checkpoint
from elmoc.nn.pruning import magnitude_masks
from elmoc.train.prune_loop import MASK, PruneSettings, build_model, encoder_matrices, load_masks, prune

TRAIN = Path(__file__).parents[1] / "train"
sys.path.insert(0, str(TRAIN))
_spec = importlib.util.spec_from_file_location("train_fixtures_for_newcomers", TRAIN / "conftest.py")
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
tiny_lm = _fixtures.tiny_lm
from test_prune import trained  # noqa: E402,F401 (the fixture)


def test_random_prune_method_from_a_plugin_runs_rounds_through_prune(newcomer, trained, tmp_path):
    newcomer("random_prune")
    vocab, spec, make_batches, make_heldout, model_pt = trained
    assert check_section("prune_method", "random", {"seed": 4}).seed == 4
    with pytest.raises(ConfigError, match="prune.seed must be int"):
        PruneSettings.from_section(Section({"method": "random", "seed": "x"}, "prune"))
    with pytest.raises(ConfigError, match="unknown key 'seed'"):  # not an option of magnitude
        PruneSettings.from_section(Section({"method": "magnitude", "seed": 1}, "prune"))
    settings = PruneSettings.from_section(Section({"method": "random", "seed": 7, "levels": [0.5, 0.75],
                                                   "finetune_steps": 2}, "prune"))
    prune(model_pt, tmp_path / "rnd", settings, vocab, make_batches, make_heldout,
          vocab_path=str(tmp_path / "vocab.txt"))
    first, second = load_masks(tmp_path / "rnd/round1" / MASK), load_masks(tmp_path / "rnd/round2" / MASK)
    for name, mask in second.items():
        assert int(mask.sum()) == round(0.25 * mask.numel()) and not (mask & ~first[name]).any(), name
    source = build_model(spec, vocab, "forward")
    source.load_state_dict(load_checkpoint(model_pt)["model"])
    by_magnitude = magnitude_masks(encoder_matrices(source), 0.5)
    assert any(not torch.equal(first[k], by_magnitude[k]) for k in first)  # not the magnitude method's choice
    trained_round = load_checkpoint(tmp_path / "rnd/round2/model.pt")["model"]
    assert all((trained_round[k][~m] == 0).all() for k, m in second.items())  # kept through fine-tuning
    summary = json.loads((tmp_path / "rnd" / "prune.json").read_text())
    assert summary["method"] == "random" and summary["seed"] == 7
    assert [r["run"] for r in summary["runs"]] == ["round1", "round2"]
