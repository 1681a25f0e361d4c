"""Issue 53.1: code written for ``allennlp.modules.elmo`` runs on elmoc with one changed import.

Two references, neither computed by the code under test:

- ``data/allennlp_snippet_reference.json``: AllenNLP's documented usage snippet's output on
  the bilm-tf test fixture (``Elmo(options, weights, 2, dropout=0)``: an untrained scalar mix,
  the mean of the three layers), written once by :func:`write_reference` (``python
  tests/pretrained/test_allennlp_drop_in.py``) through the path verified before this module
  existed: ``elmoc export --bilm-tf-*`` -> ``load_bilm`` -> ``BiLM.embed`` (which
  test_released_elmo.py checks against bilm-tf's own activations);
- the fixture's ``lm_embeddings_0.hdf5``: bilm-tf's top layer, batches of 3 with the LSTM
  state carried (AllenNLP's stateful default), compared with ``stateful=True``.
"""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

REFERENCE = Path(__file__).parent / "data" / "allennlp_snippet_reference.json"
SENTENCES = [["First", "sentence", "."], ["Another", "."]]


def allennlp_snippet(options_file, weight_file):
    """AllenNLP's README usage of ``Elmo``, with only the import changed."""
    from elmoc import Elmo, batch_to_ids  # was: from allennlp.modules.elmo import Elmo, batch_to_ids

    # Compute two different representation for each token.
    # Each representation is a linear weighted combination for the
    # 3 layers in ELMo (i.e., charcnn, the outputs of the two BiLSTM))
    elmo = Elmo(options_file, weight_file, 2, dropout=0)

    # use batch_to_ids to convert sentences to character ids
    sentences = [['First', 'sentence', '.'], ['Another', '.']]
    character_ids = batch_to_ids(sentences)

    embeddings = elmo(character_ids)

    # embeddings['elmo_representations'] is length two list of tensors.
    # Each element contains one layer of ELMo representations with shape
    # (2, 3, 1024).
    #   2    - the batch size
    #   3    - the sequence length of the batch
    #   1024 - the length of each ELMo vector
    return embeddings


def test_allennlp_snippet_equals_the_stored_reference(elmo_fixture_dir):
    embeddings = allennlp_snippet(str(elmo_fixture_dir / "options.json"), str(elmo_fixture_dir / "lm_weights.hdf5"))
    reference = json.loads(REFERENCE.read_text())
    want = np.asarray(reference["representation"], dtype=np.float32)
    assert set(embeddings) == {"elmo_representations", "mask"} and len(embeddings["elmo_representations"]) == 2
    assert embeddings["mask"].dtype == torch.bool
    assert embeddings["mask"].tolist() == [[True, True, True], [True, True, False]]
    for rep in embeddings["elmo_representations"]:
        assert rep.shape == (2, 3, 32)
        np.testing.assert_allclose(rep.detach().numpy(), want, atol=1e-5, rtol=0)
    assert float(embeddings["elmo_representations"][0][1, 2].detach().abs().max()) == 0.0  # padding


def test_stateful_top_layer_equals_bilm_tf_outputs(elmo_fixture_dir):
    from elmoc import Elmo, batch_to_ids

    sentences = json.loads((elmo_fixture_dir / "sentences.json").read_text())
    top = Elmo(str(elmo_fixture_dir / "options.json"), str(elmo_fixture_dir / "lm_weights.hdf5"), 1, dropout=0.0,
               scalar_mix_parameters=[-1e9, -1e9, 0.0], stateful=True)  # the top layer alone
    worst = 0.0
    with h5py.File(elmo_fixture_dir / "lm_embeddings_0.hdf5") as h5:
        for i in range(len(sentences[0])):
            batch = [sentences[k][i].split() for k in range(len(sentences))]
            out = top(batch_to_ids(batch))
            assert out["mask"].sum(dim=1).tolist() == [len(s) for s in batch]
            want = np.concatenate([h5[str(i)][()][0], h5[str(i)][()][1]], axis=-1)
            got = out["elmo_representations"][0][0, : len(batch[0])].detach().numpy()
            worst = max(worst, float(np.abs(got - want).max()))
    assert worst < 1e-5, worst


def test_inputs_as_token_lists_word_ids_and_nested_batches_agree(elmo_fixture_dir):
    from elmoc import Elmo, batch_to_ids

    words = ["<pad>", "First", "sentence", ".", "Another"]
    elmo = Elmo(str(elmo_fixture_dir / "options.json"), str(elmo_fixture_dir / "lm_weights.hdf5"), 1, dropout=0.0,
                vocab_to_cache=words).eval()
    chars = batch_to_ids(SENTENCES + [[]])  # an empty sentence gives zeros, as AllenNLP
    by_chars = elmo(chars)
    by_tokens = elmo(SENTENCES + [[]])
    by_words = elmo(chars, torch.tensor([[1, 2, 3], [4, 3, 0], [0, 0, 0]]))
    nested = elmo(chars.view(1, 3, 3, 50))
    want = by_chars["elmo_representations"][0]
    assert want.shape == (3, 3, 32) and float(want[2].detach().abs().max()) == 0.0
    for other in (by_tokens, by_words):
        torch.testing.assert_close(other["elmo_representations"][0], want)
        assert torch.equal(other["mask"], by_chars["mask"])
    assert nested["elmo_representations"][0].shape == (1, 3, 3, 32) and nested["mask"].shape == (1, 3, 3)
    torch.testing.assert_close(nested["elmo_representations"][0][0], want)


def test_keep_sentence_boundaries_and_padded_time(elmo_fixture_dir):
    from elmoc import Elmo, batch_to_ids

    files = (str(elmo_fixture_dir / "options.json"), str(elmo_fixture_dir / "lm_weights.hdf5"))
    plain = Elmo(*files, 1, dropout=0.0)
    kept = Elmo(*files, 1, dropout=0.0, keep_sentence_boundaries=True)
    chars = torch.cat([batch_to_ids(SENTENCES), torch.zeros(2, 2, 50, dtype=torch.long)], dim=1)  # 5 positions
    out, with_bounds = plain(chars), kept(chars)
    assert out["elmo_representations"][0].shape == (2, 5, 32)
    assert with_bounds["elmo_representations"][0].shape == (2, 7, 32)
    assert with_bounds["mask"].sum(dim=1).tolist() == [5, 4]
    torch.testing.assert_close(with_bounds["elmo_representations"][0][0, 1:4], out["elmo_representations"][0][0, :3])


def test_batch_to_ids_follows_allennlps_character_mapper():
    from elmoc import batch_to_ids
    from elmoc.inputs.characters import decode_char_ids

    ids = batch_to_ids([["<S>", "é", "<s>"], ["x" * 60]])
    assert ids.shape == (2, 3, 50) and ids.dtype == torch.long
    assert ids[0, 0, :4].tolist() == [259, 257, 260, 261]  # the sentence-boundary "character"
    assert ids[0, 1, :5].tolist() == [259, 0xC3 + 1, 0xA9 + 1, 260, 261]  # UTF-8 bytes, +1
    assert ids[0, 2, :5].tolist() == [259, ord("<") + 1, ord("s") + 1, ord(">") + 1, 260]  # spelled out
    assert ids[1, 0, -1].item() == 260 and ids[1, 1].abs().sum() == 0  # 48 bytes kept; padding
    cut = batch_to_ids([["é" * 30]])[0, 0].tolist()  # cut inside a character: the same bytes come back
    assert batch_to_ids([[decode_char_ids(cut)]])[0, 0].tolist() == cut


@pytest.mark.parametrize("bad", [["The cat sat ."], "The cat sat .", [["The", 3]]])
def test_raw_strings_are_refused_not_split_into_characters(bad, elmo_fixture_dir):
    from elmoc import Elmo, batch_to_ids
    from elmoc.errors import ConfigError

    with pytest.raises(ConfigError, match="batch_to_ids: .*(string|holds 3)"):
        batch_to_ids(bad)
    elmo = Elmo(str(elmo_fixture_dir / "options.json"), str(elmo_fixture_dir / "lm_weights.hdf5"), 1)
    with pytest.raises(ConfigError, match="Elmo: .*(tokenize the text first|holds 3)"):
        elmo(bad)


def test_unsupported_or_wrong_arguments_are_refused_in_one_line(elmo_fixture_dir, tmp_path):
    from elmoc import Elmo
    from elmoc.errors import ConfigError, InputFileError

    with pytest.raises(ConfigError, match="module must be an elmoc BiLM"):
        Elmo(None, None, 1, module=torch.nn.Linear(2, 2))
    with pytest.raises(ConfigError, match="give the bilm-tf options_file and weight_file"):
        Elmo(str(elmo_fixture_dir / "options.json"), None, 1)
    with pytest.raises(InputFileError, match="missing.hdf5: not found"):
        Elmo(str(elmo_fixture_dir / "options.json"), str(tmp_path / "missing.hdf5"), 1)
    elmo = Elmo(str(elmo_fixture_dir / "options.json"), str(elmo_fixture_dir / "lm_weights.hdf5"), 1)
    assert elmo.training  # starts in training mode, dropout on, as AllenNLP's
    with pytest.raises(ConfigError, match="row 0 of the character ids is not ELMo's"):
        elmo(torch.full((1, 2, 50), 7, dtype=torch.long))


def write_reference() -> None:
    """Write REFERENCE through the verified path (see the module docstring)."""
    import os
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    from lm_tree_helpers import run_command

    from elmoc.pretrained.loader import load_bilm

    fixture = Path(os.environ.get("ELMOC_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared/data"))
    fixture = fixture / "fixtures/allennlp/elmo"
    with tempfile.TemporaryDirectory() as tmp:
        assert run_command("export", ["--bilm-tf-options", str(fixture / "options.json"), "--bilm-tf-weights",
                                      str(fixture / "lm_weights.hdf5"), "--output-dir", f"{tmp}/elmo"]) == 0
        with torch.no_grad():
            layers, mask, _ = load_bilm(f"{tmp}/elmo").embed(SENTENCES)
    mean = layers.mean(dim=1) * mask[:, :, None]  # softmax of equal weights, gamma 1
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps({
        "made_by": "python tests/pretrained/test_allennlp_drop_in.py (write_reference: elmoc export --bilm-tf-* "
                   "of the AllenNLP fixture, load_bilm, BiLM.embed, mean of the 3 layers)",
        "sentences": SENTENCES, "representation": np.round(mean.numpy().astype(np.float64), 8).tolist()}) + "\n")


if __name__ == "__main__":
    write_reference()


def test_readme_snippet_runs_with_the_urls_pointing_at_the_fixture(elmo_fixture_dir, repo_root, tmp_path,
                                                                   monkeypatch):
    import re

    text = (repo_root / "README.md").read_text(encoding="utf-8").split("## Coming from AllenNLP", 1)[1]
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    urls = re.findall(r'"(https://[^"]+)"', code)
    assert [u.rsplit("_", 1)[-1] for u in urls] == ["options.json", "weights.hdf5"]
    code = code.replace(urls[0], (elmo_fixture_dir / "options.json").as_uri())
    code = code.replace(urls[1], (elmo_fixture_dir / "lm_weights.hdf5").as_uri())
    monkeypatch.setenv("ELMOC_CACHE", str(tmp_path / "cache"))
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    embeddings = scope["embeddings"]
    assert [tuple(r.shape) for r in embeddings["elmo_representations"]] == [(2, 3, 32), (2, 3, 32)]
    want = np.asarray(json.loads(REFERENCE.read_text())["representation"], dtype=np.float32)
    np.testing.assert_allclose(embeddings["elmo_representations"][1].detach().numpy(), want, atol=1e-5, rtol=0)
