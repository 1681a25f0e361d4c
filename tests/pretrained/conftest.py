"""Fixtures of tests/pretrained (helpers in lm_tree_helpers.py, imported by that unique name)."""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from lm_tree_helpers import WORDS, build_tree, run_command

from elmoc.data.vectors.fasttext_model import FastTextTrainConfig, train_fasttext


def write_fasttext_bin(path: Path, words: list[str], dim: int = 16, bucket: int = 2000, minn: int = 2,
                       maxn: int = 4, seed: int = 1) -> Path:
    """A skip-gram fastText 0.9 ``.bin`` (version 12) with random rows, written in the layout
    ``elmoc.data.vectors.fasttext_bin`` documents: what the fixture uses where the ``fasttext``
    package (which trains a real one) is missing, as on the GPU machine."""
    rng = np.random.default_rng(seed)
    out = bytearray(struct.pack("<2i", 793712314, 12))
    # dim, ws, epoch, minCount, neg, wordNgrams, loss (ns), model (skipgram), bucket, minn, maxn, lrUpdateRate; t
    out += struct.pack("<12id", dim, 5, 1, 1, 5, 1, 1, 2, bucket, minn, maxn, 100, 1e-4)
    out += struct.pack("<3i2q", len(words), len(words), 0, 10 * len(words), -1)
    for i, word in enumerate(words):
        out += word.encode("utf-8") + b"\0" + struct.pack("<qb", len(words) - i, 0)
    for rows in (len(words) + bucket, len(words)):  # input (words + buckets), output (words)
        out += struct.pack("<?2q", False, rows, dim)
        out += rng.normal(0.0, 0.3, size=(rows, dim)).astype("<f4").tobytes()
    path.write_bytes(bytes(out))
    return path


@pytest.fixture(scope="session")
def fasttext_bin(tmp_path_factory) -> Path:
    """The fixture's fastText model: trained by the ``fasttext`` package where it is installed,
    else (the GPU machine's image lacks it; ``ELMOC_TEST_WRITTEN_FASTTEXT=1`` forces it here)
    written with random rows by :func:`write_fasttext_bin`, so the tests that need a model run
    everywhere."""
    d = tmp_path_factory.mktemp("ft")
    out = d / "cc.bin"
    try:
        import fasttext  # noqa: F401  (only whether it imports)
    except ImportError:
        return write_fasttext_bin(out, list(WORDS))
    if os.environ.get("ELMOC_TEST_WRITTEN_FASTTEXT") == "1":
        return write_fasttext_bin(out, list(WORDS))
    rng = np.random.default_rng(0)
    (d / "shard_000.txt").write_text("".join(" ".join(rng.choice(WORDS, size=8)) + "\n" for _ in range(300)))
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
