"""Fixtures of tests/pretrained (helpers in lm_tree_helpers.py, imported by that unique name)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from lm_tree_helpers import WORDS, build_tree, run_command

from elmoc.data.vectors.fasttext_model import FastTextTrainConfig, train_fasttext


@pytest.fixture(scope="session")
def fasttext_bin(tmp_path_factory) -> Path:
    # training needs the fasttext package, which the GPU machine lacks (its first GPU check errored here)
    pytest.importorskip("fasttext", reason="training the fixture's fastText model needs the fasttext package")
    d = tmp_path_factory.mktemp("ft")
    rng = np.random.default_rng(0)
    (d / "shard_000.txt").write_text("".join(" ".join(rng.choice(WORDS, size=8)) + "\n" for _ in range(300)))
    out = d / "cc.bin"
    train_fasttext([d / "shard_000.txt"], out, FastTextTrainConfig(
        dim=16, lr=0.025, epoch=2, minCount=1, bucket=20000, minn=2, maxn=4, thread=1, seed=1))
    return out


@pytest.fixture
def lm_tree(tmp_path, fasttext_bin, monkeypatch):
    """Factory: ``lm_tree(kind)`` builds a tree in a fresh folder and chdirs into it."""
    def make(kind: str = "fasttext", shared_data: Path | None = None) -> Path:
        root = tmp_path / f"work_{kind}"
        build_tree(root, kind, fasttext_bin, shared_data)
        monkeypatch.chdir(root)
        return root

    return make


@pytest.fixture(scope="module")
def elmo_dir(tmp_path_factory):
    """AllenNLP's small test ELMo (char-CNN with highways and projection, 2 LSTM layers) as a
    model directory, and a sentences file to measure on (module scope: tests/conftest.py's
    ``elmo_fixture_dir`` is per test)."""
    shared = Path(os.environ.get("ELMOC_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    elmo_fixture_dir = shared / "fixtures" / "allennlp" / "elmo"
    if not (elmo_fixture_dir / "lm_weights.hdf5").is_file():
        pytest.skip("AllenNLP ELMo fixture absent (set ELMOC_SHARED_DATA)")
    root = tmp_path_factory.mktemp("compress")
    assert run_command("export", ["--bilm-tf-options", str(elmo_fixture_dir / "options.json"),
                                  "--bilm-tf-weights", str(elmo_fixture_dir / "lm_weights.hdf5"),
                                  "--output-dir", str(root / "elmo")]) == 0
    sentences = json.loads((elmo_fixture_dir / "sentences.json").read_text())
    lines = [s for batch in sentences for s in batch]
    (root / "s.txt").write_text("\n".join(lines) + "\n")
    return root
