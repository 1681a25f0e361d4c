import numpy as np
import torch

from elmoc.cli import main
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import LanguageModel
from elmoc.model_file import save_checkpoint

OPTIONS = {"lstm": {"projection_dim": 8}, "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 3], [2, 5]],
                                                       "n_highway": 1, "max_characters_per_token": 10,
                                                       "activation": "relu"}}


def test_cnn_table_matches_the_trained_layer(tmp_path):
    vocab = Vocabulary.from_counts(__import__("collections").Counter("a b c dog cats".split()))
    vocab.save(tmp_path / "vocab.txt")
    spec = {"input": {"type": "char_cnn", "options": OPTIONS},
            "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 8, "projection_size": 8, "layer_norm": False},
            "output": {"type": "sampled", "num_samples": 3}}
    torch.manual_seed(0)
    model = LanguageModel.from_spec(spec, vocab)
    save_checkpoint(tmp_path / "ckpt.pt", {"spec": spec, "model": model.state_dict(), "direction": "forward"})
    out = tmp_path / "vectors" / "cnn.npy"
    assert main(["cnn-table", "--checkpoint", str(tmp_path / "ckpt.pt"), "--vocab", str(tmp_path / "vocab.txt"),
                 "--output", str(out), "--chunk", "3"]) == 0
    table = np.load(out)
    assert table.shape == (len(vocab), 8) and table.dtype == np.float32
    with torch.no_grad():
        expected = model.input_layer(torch.arange(len(vocab))[None])[0].numpy()
    np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-6)


def test_cnn_table_rejects_non_cnn_checkpoint(tmp_path, capsys):
    vocab = Vocabulary.from_counts(__import__("collections").Counter("a b".split()))
    vocab.save(tmp_path / "vocab.txt")
    save_checkpoint(tmp_path / "ckpt.pt", {"spec": {"input": {"type": "fasttext"}}, "model": {}})
    assert main(["cnn-table", "--checkpoint", str(tmp_path / "ckpt.pt"), "--vocab", str(tmp_path / "vocab.txt"),
                 "--output", str(tmp_path / "x.npy")]) == 1
    assert "not 'char_cnn'" in capsys.readouterr().err
    assert not (tmp_path / "x.npy").exists()
