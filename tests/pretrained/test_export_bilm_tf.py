"""Issue 53.2: ``elmoc export --to bilm-tf``: a trained char-CNN ELMo-LSTM bi-LM as bilm-tf's
``options.json`` + weights HDF5, read back by elmoc's bilm-tf importer (the reader AllenNLP's
``Elmo`` layout follows, checked against bilm-tf's own outputs) with equal layers; ELMo-C refused."""
from __future__ import annotations

import json

import h5py
import pytest
import torch
from lm_tree_helpers import run_command

from elmoc.model_file import load_checkpoint, save_checkpoint
from elmoc.pretrained.bilm_tf import load_bilm_tf
from elmoc.pretrained.loader import load_checkpoints

SENTENCES = [["the", "zebra", "ran", "to", "the", "house"], ["a", "xqzzy"], ["the", "cat", "sat", "."]]


def _share_forward_cnn(root):
    """A joint bi-LM's layout: the backward LM reads the forward LM's char-CNN (bilm-tf has one)."""
    forward = load_checkpoint(root / "results/lm/tiny/forward/model.pt")
    path = root / "results/lm/tiny/backward/model.pt"
    backward = load_checkpoint(path)
    backward["model"].update({k: v for k, v in forward["model"].items() if k.startswith("input_layer.")})
    save_checkpoint(path, backward)


def test_round_trip_through_bilm_tf_files_keeps_every_layer(lm_tree, shared_data):
    root = lm_tree("char_cnn", shared_data)
    _share_forward_cnn(root)
    assert run_command("export", ["--variant", "tiny", "--to", "bilm-tf", "--output-dir", "bilm_tf"]) == 0
    options = json.loads((root / "bilm_tf/options.json").read_text())
    assert options["char_cnn"]["n_characters"] == 262 and options["lstm"]["dim"] == 10
    assert options["lstm"]["projection_dim"] == 6 and options["lstm"]["use_skip_connections"] is True
    with h5py.File(root / "bilm_tf/weights.hdf5") as h5:
        assert h5["char_embed"].shape == (261, 4) and h5["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"].shape == (12, 40)
    original = load_checkpoints("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt",
                                closed_vocabulary=True, boundaries=True)  # AllenNLP reads <S> ... </S>
    back = load_bilm_tf(root / "bilm_tf/options.json", root / "bilm_tf/weights.hdf5")
    with torch.no_grad():
        want, mask, _ = original.embed(SENTENCES)
        got, got_mask, _ = back.embed(SENTENCES)
    assert torch.equal(mask, got_mask) and want.shape == got.shape == (3, 3, 6, 12)
    worst = float((want - got).abs().max())
    assert worst < 1e-5, worst
    assert float(want.abs().max()) > 0.1


def test_separately_trained_char_cnns_are_refused(lm_tree, shared_data, capsys):
    lm_tree("char_cnn", shared_data)  # forward and backward LMs with their own char-CNN
    assert run_command("export", ["--variant", "tiny", "--to", "bilm-tf", "--output-dir", "bilm_tf"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "one char-CNN shared by both directions" in err and "joint" in err


def test_elmo_c_says_why_no_allennlp_format_exists(lm_tree, capsys):
    root = lm_tree("fasttext")
    assert run_command("export", ["--variant", "tiny", "--to", "bilm-tf", "--output-dir", "bilm_tf"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no bilm-tf/AllenNLP format exists for input 'fasttext'" in err
    assert "Elmo.from_pretrained(DIR)" in err and not (root / "bilm_tf").exists()


def test_to_bilm_tf_with_the_released_files_is_refused(elmo_fixture_dir, tmp_path, capsys):
    assert run_command("export", ["--bilm-tf-options", str(elmo_fixture_dir / "options.json"), "--bilm-tf-weights",
                                  str(elmo_fixture_dir / "lm_weights.hdf5"), "--to", "bilm-tf",
                                  "--output-dir", str(tmp_path / "x")]) == 1
    assert "already are bilm-tf's files" in capsys.readouterr().err


@pytest.mark.parametrize("clip", [None, 0])
def test_options_without_clipping_import(clip, elmo_fixture_dir, tmp_path):
    options = json.loads((elmo_fixture_dir / "options.json").read_text())
    options["lstm"]["cell_clip"] = clip
    (tmp_path / "o.json").write_text(json.dumps(options))
    bilm = load_bilm_tf(tmp_path / "o.json", elmo_fixture_dir / "lm_weights.hdf5")
    assert bilm.forward_lm.encoder.lstm_layers[0].cell_clip is None
