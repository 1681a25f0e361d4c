"""The hooks input classes give features, export and embed (issue 32.1): their error paths."""
from __future__ import annotations

import numpy as np
import pytest
from torch import nn

from elmoc import registry
from elmoc.errors import ConfigError
from elmoc.inputs.base import InputLayer, input_class
from elmoc.inputs.fasttext import FastTextInput


def test_an_input_class_must_subclass_input_layer():
    @registry.register("input", "plain_module_for_test")
    class Plain(nn.Module):
        pass

    try:
        with pytest.raises(ConfigError, match=r"input 'plain_module_for_test': .*Plain must subclass "
                           r"elmoc.inputs.base.InputLayer"):
            input_class({"type": "plain_module_for_test"})
    finally:
        registry._REGISTRY["input"].pop("plain_module_for_test")
    assert input_class({"type": "fasttext"}) is FastTextInput


def test_a_source_for_an_input_without_composer_is_refused():
    assert InputLayer.oov_composer({"type": "random"}, [], {"--fasttext-model": None}) is None
    with pytest.raises(ConfigError, match=r"^--char-cnn-model: only a frozen-table input composes .* this LM's "
                       r"input is 'random': drop the option$"):
        InputLayer.oov_composer({"type": "random"}, [], {"--fasttext-model": None, "--char-cnn-model": "m.pt"})


def test_frozen_table_sources(tmp_path, caplog):
    table = tmp_path / "vectors" / "random.npy"
    table.parent.mkdir()
    np.save(table, np.zeros((5, 3), np.float32))
    cfg = {"type": "fasttext", "vectors": str(table)}
    with pytest.raises(ConfigError, match=r"^give --fasttext-model or --char-cnn-model, not both$"):
        FastTextInput.oov_composer(cfg, [], {"--fasttext-model": "a.bin", "--char-cnn-model": "m.pt"})
    with pytest.raises(ConfigError, match=r"^--other does not apply to input 'fasttext'; its table is composed by "
                       r"--fasttext-model or --char-cnn-model$"):
        FastTextInput.oov_composer(cfg, [], {"--other": "x"})
    with caplog.at_level("WARNING"):  # nothing beside the table made it: the closed vocabulary
        assert FastTextInput.oov_composer(cfg, [], {"--fasttext-model": None}) is None
    assert "no fastText model or ELMo char-CNN model found" in caplog.text
    assert FastTextInput.load_composer("unknown", tmp_path) is None


def test_char_cnn_table_provenance(tmp_path):
    import torch

    from elmoc.errors import InputFileError
    from elmoc.inputs.char_cnn_vectors import CharCnnVectors

    table = tmp_path / "results/vectors/cnn.npy"
    assert CharCnnVectors.source_beside(table) is None  # no ELMo LM beside it
    for run in ("forward", "joint"):
        (tmp_path / f"results/lm/elmo/{run}").mkdir(parents=True)
        (tmp_path / f"results/lm/elmo/{run}/model.pt").write_bytes(b"")
    assert CharCnnVectors.source_beside(table) == tmp_path / "results/lm/elmo/joint/model.pt"  # the joint ELMo first
    assert CharCnnVectors.source_beside(tmp_path / "results/vectors/cc.npy") is None
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(InputFileError, match=r"other.pt: not an elmoc model.pt; pass the ELMo model.pt the char-CNN "
                       r"table was made from"):
        CharCnnVectors.from_source(tmp_path / "other.pt")
