"""A new frozen-table input is one file: defined outside the package, registered, and taken
through export -> model directory -> embed (an unseen word composed by its own composer)
with no other edit (issue 32.1)."""
from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter

import h5py
import numpy as np
import pytest
import torch
from lm_tree_helpers import WORDS, run_command, save_lm_pair

from elmoc import registry
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.pretrained.loader import load_bilm, load_checkpoints

PLUGIN = '''
"""A frozen table whose row of a word is drawn from a generator seeded by the word's
spelling, so the vector of any word, seen or not, is known (the settings: hashed.json
beside the table)."""
import json
import zlib
from pathlib import Path

import numpy as np

from elmoc.inputs.fasttext import FastTextInput
from elmoc.registry import register


def hashed(word, dim):
    return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(dim).astype(np.float32)


class HashedVectors:
    NAME = "hashed"
    OPTION = "--hashed-settings"
    SOURCE = "hash settings"
    NOTE = "the hash of their spelling (hashed.json)"

    def __init__(self, dim, source):
        self.dim, self.source = int(dim), str(source)

    def vectors(self, words):
        return np.stack([hashed(w, self.dim) for w in words]) if words else np.zeros((0, self.dim), np.float32)

    def save(self, directory, vocab):
        (Path(directory) / "hashed.json").write_text(json.dumps({"dim": self.dim}))

    @classmethod
    def from_source(cls, path):
        return cls(json.loads(Path(path).read_text())["dim"], path)

    @classmethod
    def load(cls, directory):
        return cls.from_source(Path(directory) / "hashed.json")

    @staticmethod
    def source_beside(table):
        settings = Path(table).with_name("hashed.json")
        return settings if settings.is_file() else None


@register("input", "hashed_table")
class HashedTableInput(FastTextInput):
    composers = (HashedVectors,)
'''
DIM = 8
SENTENCE = ["the", "zebra", "ran", "xqzzy"]  # zebra, xqzzy: outside the LM vocabulary


@pytest.fixture
def plugin(tmp_path):
    """The plug-in file imported by path (as ELMOC_PLUGINS will), unregistered afterwards."""
    path = tmp_path / "hashed_table.py"
    path.write_text(PLUGIN)
    spec = importlib.util.spec_from_file_location("hashed_table_plugin", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    registry.by_name("input", "hashed_table")  # still registered
    registry._REGISTRY["input"].pop("hashed_table")
    sys.modules.pop(spec.name)


def layer0(bilm, vectors):
    """Layer 0 of both directions for input vectors (n, dim): (n, 2H)."""
    x = torch.as_tensor(np.asarray(vectors), dtype=torch.float32)[None]
    mask = torch.ones(x.shape[:2], dtype=torch.bool)
    with torch.no_grad():
        return torch.cat([bilm.forward_lm.encoder(x, mask).layers[0][0],
                          bilm.backward_lm.encoder(x, mask).layers[0][0]], dim=-1).numpy()


def test_a_frozen_table_input_in_one_file_exports_and_embeds(plugin, tmp_path, monkeypatch):
    root = tmp_path / "work"
    (root / "results/vectors").mkdir(parents=True)
    monkeypatch.chdir(root)
    vocab = Vocabulary.from_counts(Counter({w: 20 - i for i, w in enumerate(WORDS) if w != "zebra"}))
    vocab.save("results/vocab/vocab.txt")
    np.save("results/vectors/words.npy", np.stack([plugin.hashed(w, DIM) for w in vocab.tokens]))
    (root / "results/vectors/hashed.json").write_text(json.dumps({"dim": DIM}))
    spec = {"name": "tiny", "input": {"type": "hashed_table", "vectors": "results/vectors/words.npy"},
            "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 10, "projection_size": 6},
            "output": {"type": "cosine", "vectors": "results/vectors/words.npy"}, "vocab": "results/vocab/vocab.txt"}
    save_lm_pair(root, spec, vocab)

    assert run_command("export", ["--variant", "tiny", "--output-dir", str(tmp_path / "model")]) == 0
    model = tmp_path / "model"
    meta = json.loads((model / "elmoc-model.json").read_text())
    assert meta["input"] == {"type": "hashed_table", "vectors": "input_vectors.npy"}
    assert meta["oov_vectors"] == "hashed" and (model / "hashed.json").is_file()
    np.testing.assert_array_equal(np.load(model / "input_vectors.npy"), np.load("results/vectors/words.npy"))
    assert "the hash of their spelling" in (model / "README.md").read_text()

    (tmp_path / "s.txt").write_text(" ".join(SENTENCE) + "\n")
    assert run_command("embed", [str(tmp_path / "s.txt"), str(tmp_path / "e.hdf5"), "--model", str(model),
                                 "--all"]) == 0
    bilm = load_bilm(model)
    assert bilm.open_vocabulary and "zebra" not in bilm.vocab
    want = layer0(bilm, [plugin.hashed(w, DIM) for w in SENTENCE])
    with h5py.File(tmp_path / "e.hdf5") as h5:
        np.testing.assert_allclose(h5["0"][()][0], want, atol=1e-5)  # the unseen words read their own vectors
    # extraction from the model.pt files composes the same way
    extracted = load_checkpoints("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt")
    assert type(extracted.forward_lm.subwords).__name__ == "HashedVectors"
    with pytest.raises(Exception, match="--fasttext-model does not apply to input 'hashed_table'"):
        load_checkpoints("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt",
                         fasttext_model="results/vectors/hashed.json")
