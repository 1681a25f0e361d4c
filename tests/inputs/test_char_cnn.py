"""The char-CNN + ELMo LSTM reproduce bilm-tf's activations on AllenNLP's tiny ELMo."""
import json

import h5py
import numpy as np
import pytest
import torch

from elmoc.errors import InputFileError
from elmoc.inputs.bilm_tf_weights import load_elmo_lstm
from elmoc.inputs.characters import batch_char_ids, token_char_ids
from elmoc.nn.masking import reverse_padded
from elmoc.registry import build



def test_char_ids_scheme():
    ids = token_char_ids("ab", 6)
    assert ids == [259, 98, 99, 260, 261, 261]  # bow, 'a'+1, 'b'+1, eow, pad, pad
    assert token_char_ids("<s>", 5) == [259, 257, 260, 261, 261]
    assert token_char_ids("<pad>", 4) == [0, 0, 0, 0]
    assert len(token_char_ids("x" * 100, 50)) == 50


def test_reproduces_bilm_tf_activations_statefully(elmo_fixture_dir):
    options = str(elmo_fixture_dir / "options.json")
    weights = str(elmo_fixture_dir / "lm_weights.hdf5")
    opts = json.loads((elmo_fixture_dir / "options.json").read_text())
    cnn = build("input", {"type": "char_cnn", "options": options, "weights": weights})
    lstm_cfg = {
        "type": "elmo_lstm", "num_layers": opts["lstm"]["n_layers"], "cell_size": opts["lstm"]["dim"],
        "projection_size": opts["lstm"]["projection_dim"], "cell_clip": 3.0, "proj_clip": 3.0,
        "layer_norm": False, "recurrent_dropout": 0.0, "residual": True,
    }
    encoders = []
    for direction in (0, 1):
        enc = build("encoder", lstm_cfg, input_dim=cnn.output_dim)
        load_elmo_lstm(enc, weights, direction)
        encoders.append(enc.eval())
    sentences = json.loads((elmo_fixture_dir / "sentences.json").read_text())
    expected = h5py.File(elmo_fixture_dir / "lm_embeddings_0.hdf5", "r")
    states = [None, None]
    worst = 0.0
    with torch.no_grad():
        for i in range(len(sentences[0])):
            rows = [["<S>"] + sentences[k][i].split() + ["</S>"] for k in range(3)]
            lengths = torch.tensor([len(r) for r in rows])
            chars = batch_char_ids(rows, cnn.max_chars)
            mask = chars[..., 0] > 0  # (B, T)
            tokens = cnn.encode_chars(chars)
            fwd = encoders[0](tokens, mask, states[0])
            bwd = encoders[1](reverse_padded(tokens, lengths), mask, states[1])
            states = [fwd.state, bwd.state]
            backward = reverse_padded(bwd.output, lengths)
            n = int(lengths[0]) - 2
            got = torch.stack([fwd.output[0, 1 : n + 1], backward[0, 1 : n + 1]]).numpy()
            want = expected[str(i)][...]
            assert got.shape == want.shape
            worst = max(worst, float(np.abs(got - want).max()))
    assert worst < 1e-5, worst


def test_weight_shape_mismatch_names_dataset(elmo_fixture_dir, tmp_path):
    opts = json.loads((elmo_fixture_dir / "options.json").read_text())
    opts["char_cnn"]["filters"][0] = [1, 5]
    (tmp_path / "options.json").write_text(json.dumps(opts))
    with pytest.raises(InputFileError, match=r"CNN/W_cnn_0.*\[1, 1, 4, 5\]"):
        build("input", {"type": "char_cnn", "options": str(tmp_path / "options.json"),
                        "weights": str(elmo_fixture_dir / "lm_weights.hdf5")})


def test_options_missing_key_named(elmo_fixture_dir, tmp_path):
    opts = json.loads((elmo_fixture_dir / "options.json").read_text())
    del opts["char_cnn"]["n_highway"]
    (tmp_path / "options.json").write_text(json.dumps(opts))
    with pytest.raises(InputFileError, match="char_cnn.n_highway"):
        build("input", {"type": "char_cnn", "options": str(tmp_path / "options.json")})


def test_word_ids_path_and_gradients(elmo_fixture_dir):
    vocab = ["<pad>", "<s>", "</s>", "<unk>", "the", "cat"]
    layer = build("input", {"type": "char_cnn", "options": str(elmo_fixture_dir / "options.json")}, vocab=vocab)
    ids = torch.tensor([[1, 4, 5, 2]])
    out = layer(ids)
    assert out.shape == (1, 4, 16)
    direct = layer.encode_chars(batch_char_ids([["<s>", "the", "cat", "</s>"]], layer.max_chars))
    torch.testing.assert_close(out, direct)
    out.sum().backward()
    assert layer.char_embedding.weight.grad is not None
    frozen = build("input", {"type": "char_cnn", "options": str(elmo_fixture_dir / "options.json"), "trainable": False},
                   vocab=vocab)
    assert not any(p.requires_grad for p in frozen.parameters())


def test_retrained_elmo_preset_has_bilm_tf_training_characters(repo_root):
    """config/lm/elmo.yaml retrains ELMo with bilm-tf's 261 trained characters (262 is the
    released options.json's inference value); both build the same table: 261 trained rows
    and the all-zero "no token" row 0, which gets no gradient."""
    import copy

    import torch
    import yaml

    from elmoc.errors import InputFileError
    from elmoc.inputs.char_cnn import CharCnnInput

    options = yaml.safe_load((repo_root / "config/lm/elmo.yaml").read_text())["input"]["options"]
    assert options["char_cnn"]["n_characters"] == 261
    small = copy.deepcopy(options)
    small["char_cnn"].update(filters=[[1, 4], [2, 4]], n_highway=1, embedding={"dim": 3})
    small["lstm"]["projection_dim"] = 5
    tables = []
    for n in (261, 262):
        small["char_cnn"]["n_characters"] = n
        torch.manual_seed(0)
        layer = CharCnnInput(small, vocab=["<pad>", "<s>", "</s>", "<unk>", "cat"])
        layer(torch.tensor([[4, 0]])).sum().backward()  # "cat", then a padding token
        grad = layer.char_embedding.weight.grad
        assert layer.char_embedding.weight.shape == (262, 3) and not layer.char_embedding.weight[0].any()
        assert not grad[0].any() and grad[1:].abs().sum() > 0
        tables.append(layer.char_embedding.weight.detach())
    assert torch.equal(tables[0], tables[1])
    small["char_cnn"]["n_characters"] = 263
    with pytest.raises(InputFileError, match="261 .bilm-tf's training options. or 262"):
        CharCnnInput(small)
