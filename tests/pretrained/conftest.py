"""Fixtures of tests/pretrained (helpers in lm_tree_helpers.py, imported by that unique name)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from lm_tree_helpers import WORDS, build_tree

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
