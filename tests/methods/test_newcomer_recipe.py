"""Newcomer trial (issue 46): a "linear probe, then fine-tune" recipe is one plug-in file
(tests/methods/plugins/linear_probe.py), used through FineTuneSettings, the task runner and
check_section with no other edit."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from elmoc.config import check_section
from elmoc.errors import ConfigError
from elmoc.tasks.fine_tune import FineTuneSettings
from elmoc.tasks.runner import run_task

sys.path.insert(0, str(Path(__file__).parents[1] / "tasks"))
from test_fine_tune import _setup, _trainer, model_dir  # noqa: E402,F401 (the fixture)


def test_linear_probe_recipe_from_a_plugin_trains_the_head_then_every_layer(newcomer, tmp_path, model_dir):
    newcomer("linear_probe")
    assert check_section("recipe", "linear_probe", {"probe_epochs": 2}).probe_epochs == 2
    with pytest.raises(ConfigError, match=r"fine_tune.probe_epochs: 0 must be a positive integer"):
        FineTuneSettings.from_section({"recipe": "linear_probe", "probe_epochs": 0})
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, "linear_probe", lm_lr=0.02)
    t = _trainer(task, inputs, config, data)
    assert [g["lr"] for g in t.optimizer.param_groups] == [0.01, 0.02, 0.02, 0.02]  # head, LM layers 0..2
    lm = list(t.tuner.embedder.lm.parameters())
    t.tuner.start_epoch(1)
    assert not any(p.requires_grad for p in lm)  # the probe: the head alone
    t.tuner.start_epoch(2)
    assert all(p.requires_grad for p in lm)  # then every LM layer
    result = run_task(task, inputs, 7, config, data)
    assert result["best_epoch"] >= 1 and np.isfinite(result["dev"])
