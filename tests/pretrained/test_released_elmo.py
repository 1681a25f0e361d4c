"""Issue 12.2: the released bilm-tf ELMo as the workflow's model.pt, end to end through extract."""
from __future__ import annotations

import json

import h5py
import numpy as np
import yaml
from lm_tree_helpers import run_command

from elmoc.data.vocab.vocabulary import Vocabulary


def test_released_weights_through_extract_and_cnn_table(elmo_fixture_dir, tmp_path, monkeypatch, repo_root):
    monkeypatch.chdir(tmp_path)
    spec = yaml.safe_load((repo_root / "config/lm/elmo.yaml").read_text())
    spec["vocab"] = "vocab.txt"
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    Vocabulary(["<pad>", "<s>", "</s>", "<unk>", "the", "cat"]).save(tmp_path / "vocab.txt")
    for direction in ("forward", "backward"):
        assert run_command("export", [
            "--bilm-tf-options", str(elmo_fixture_dir / "options.json"), "--bilm-tf-weights",
            str(elmo_fixture_dir / "lm_weights.hdf5"), "--format", "checkpoints", "--spec", "spec.yaml",
            "--vocab", "vocab.txt", "--direction", direction, "--output-dir", "lm/elmo"]) == 0
    heldout = json.loads((tmp_path / "lm/elmo/forward/heldout.json").read_text())
    assert heldout["released"]["weights"].endswith("lm_weights.hdf5") and heldout["steps"] == 0
    sentences = json.loads((elmo_fixture_dir / "sentences.json").read_text())
    (tmp_path / "s.txt").write_text(sentences[0][0] + "\n")
    assert run_command("extract", ["--forward", "lm/elmo/forward/model.pt", "--backward",
                                   "lm/elmo/backward/model.pt", "--sentences", "s.txt", "--output", "f.hdf5"]) == 0
    with h5py.File("f.hdf5") as got, h5py.File(elmo_fixture_dir / "lm_embeddings_0.hdf5") as want:
        # the released ELMo reads <S> ... </S> by default, as AllenNLP feeds it (issue 31.8; trained LMs: bare)
        assert got.attrs["boundaries"]
        top = got["0"][()][-1]  # the first batch starts from zero states, as extraction does
        expected = np.concatenate([want["0"][()][0], want["0"][()][1]], axis=-1)
        np.testing.assert_allclose(top, expected, atol=1e-5)
    from elmoc.commands.cnn_table import char_cnn_table

    table = char_cnn_table("lm/elmo/forward/model.pt", Vocabulary.load("vocab.txt"))
    assert table.shape == (6, 16) and np.isfinite(table).all()
