"""Newcomer trial (issue 46): a low-rank compressed format is one plug-in file
(tests/methods/plugins/low_rank.py), used through ``elmoc compress --format low_rank``, the
loader and the compression table's groups with no other edit."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmoc import embed_sentences
from elmoc.config import check_section, declared_values
from elmoc.errors import ConfigError
from elmoc.io.tensor_files import read_state
from elmoc.pretrained.compress import compress_model
from elmoc.pretrained.loader import load_bilm
from elmoc.tables.compression import role_group, role_order

sys.path.insert(0, str(Path(__file__).parents[1] / "tasks"))
sys.path.insert(0, str(Path(__file__).parents[1] / "pretrained"))
from lm_tree_helpers import run_command  # noqa: E402
from test_fine_tune import WORDS, model_dir  # noqa: E402,F401 (the fixture)


def test_low_rank_format_from_a_plugin_compresses_loads_and_has_its_table_group(newcomer, tmp_path, model_dir,
                                                                                 capsys):
    newcomer("low_rank")
    assert check_section("compression", "low_rank", {"rank": 3}).rank == 3
    with pytest.raises(ConfigError, match="rank: 0 must be a positive integer"):
        check_section("compression", "low_rank", {"rank": 0})
    sentences = tmp_path / "s.txt"
    sentences.write_text(" ".join(WORDS[:6]) + "\n" + " ".join(WORDS[6:]) + "\n")
    assert "low_rank" in declared_values("compression", "TABLE_COPY")  # what `--format`'s metavar lists
    with pytest.raises(SystemExit):
        run_command("compress", ["--help"])
    assert "low_rank" in capsys.readouterr().out
    assert run_command("compress", [str(model_dir), "--output", str(tmp_path / "lr"), "--format", "low_rank",
                                    "--measure", str(sentences), "--rounds", "1"]) == 0
    meta = json.loads((tmp_path / "lr" / "elmoc-model.json").read_text())
    assert meta["compression"]["format"] == "low_rank" and meta["compression"]["rank"] == 2
    stored = read_state(tmp_path / "lr" / "forward.safetensors")
    factorised = meta["compression"]["factorised"]
    assert factorised and all(f"{k}.lowrank_u" in stored and k not in stored for k in factorised)
    # the loader multiplies the factors back: each matrix is the best rank-2 approximation of the source's
    source, copy = load_bilm(model_dir), load_bilm(tmp_path / "lr")
    original, restored = dict(source.forward_lm.named_parameters()), dict(copy.forward_lm.named_parameters())
    for key in factorised:
        s = torch.linalg.svdvals(original[key].detach())
        error = torch.linalg.matrix_norm(original[key].detach() - restored[key].detach())
        assert error == pytest.approx(float(s[2:].square().sum().sqrt()), rel=1e-4, abs=1e-5), key
    got = embed_sentences(tmp_path / "lr", [WORDS[:6]], "all")
    assert np.isfinite(got[0]).all()
    # a rank-12 copy of these small matrices is no smaller: nothing is factorised, the weights are the source's
    compress_model(model_dir, tmp_path / "full", "low_rank", [WORDS[:6]], sentences, repeats=1,
                   options={"rank": 12})
    same = dict(load_bilm(tmp_path / "full").forward_lm.named_parameters())
    assert all(torch.equal(same[k], v) for k, v in original.items())
    assert role_group("low_rank") == "factorised"
    assert role_order(["student", "low_rank", "int8", "original"]) == ["original", "int8", "low_rank", "student"]
