"""Issue 53.3: model directories store their weights as ``.safetensors`` (no pickle to load),
every kind of directory loads without unpickling, and directories written before (``.pt``
weights) still load."""
from __future__ import annotations

import json
import pickle
import shutil
import struct

import numpy as np
import pytest
import torch
from lm_tree_helpers import run_command

from elmoc.errors import InputFileError
from elmoc.io.tensor_files import read_state
from elmoc.pretrained.loader import load_bilm

SENTENCES = [["the", "zebra", "ran", "to", "the", "house"], ["a", "xqzzy"]]


@pytest.fixture(scope="module")
def int8_copy(elmo_dir):
    assert run_command("compress", [str(elmo_dir / "elmo"), "--output-dir", str(elmo_dir / "int8"), "--format", "int8",
                                    "--measure", str(elmo_dir / "s.txt"), "--threads", "1", "--rounds", "1"]) == 0
    return elmo_dir / "int8"


def _no_unpickling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model directory was unpickled")

    for module, name in ((torch, "load"), (torch.serialization, "load"), (pickle, "load"), (pickle, "loads")):
        monkeypatch.setattr(module, name, refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


def test_every_kind_of_directory_loads_without_unpickling(elmo_dir, int8_copy, lm_tree, monkeypatch):
    root = lm_tree("fasttext")  # ELMo-C: a FastText table and fastText's n-grams
    assert run_command("export", ["--variant", "tiny", "--output-dir", "elmo_c"]) == 0
    directories = [elmo_dir / "elmo", int8_copy, root / "elmo_c"]
    from elmoc import Elmo

    with monkeypatch.context() as patched:
        _no_unpickling(patched)
        for directory in directories:
            with torch.no_grad():
                layers, mask, _ = load_bilm(directory).embed(SENTENCES)
                out = Elmo.from_pretrained(directory, 1, dropout=0.0)(SENTENCES)
            assert torch.isfinite(layers).all() and mask.sum() == 8
            assert out["elmo_representations"][0].shape[:2] == (2, 6)
    for directory in directories:
        meta = json.loads((directory / "elmoc-model.json").read_text())
        assert meta["format"] == "elmoc-model-v2"
        assert not [n for n in meta["files"] if n.endswith((".pt", ".pkl"))], meta["files"]
        assert {"forward.safetensors", "backward.safetensors"} <= set(meta["files"])


def test_int8_weights_come_back_exactly(int8_copy):
    state = read_state(int8_copy / "forward.safetensors")
    quantized = {k: v for k, v in state.items() if v.is_quantized}
    assert "encoder.lstm_layers.0.state_linearity.weight" in quantized
    from elmoc.pretrained.formats import int8_modules

    bilm = load_bilm(int8_copy)
    for name, module in int8_modules(bilm.forward_lm):
        assert torch.equal(module.weight().int_repr(), quantized[f"{name}.weight"].int_repr())
        assert torch.equal(module.weight().q_per_channel_scales(), quantized[f"{name}.weight"].q_per_channel_scales())


def test_weights_read_without_torch_from_the_format_alone(elmo_dir):
    """The file is a little-endian header length, a JSON header, then raw tensors: any language reads it."""
    raw = (elmo_dir / "elmo" / "forward.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    entry = header["encoder.lstm_layers.0.state_projection.weight"]
    start, end = entry["data_offsets"]
    assert entry["dtype"] == "F32"
    values = np.frombuffer(raw[8 + size + start : 8 + size + end], dtype="<f4").reshape(entry["shape"])
    want = read_state(elmo_dir / "elmo" / "forward.safetensors")["encoder.lstm_layers.0.state_projection.weight"]
    np.testing.assert_array_equal(values, want.numpy())


def test_directories_written_before_with_pt_weights_still_load(elmo_dir, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(elmo_dir / "elmo", old)
    meta = json.loads((old / "elmoc-model.json").read_text())
    for stem in ("forward", "backward"):
        torch.save(read_state(old / f"{stem}.safetensors"), old / f"{stem}.pt")
        (old / f"{stem}.safetensors").unlink()
    meta["format"] = "elmoc-model-v1"
    meta["files"] = sorted(n.replace(".safetensors", ".pt") for n in meta["files"])
    (old / "elmoc-model.json").write_text(json.dumps(meta))
    with torch.no_grad():
        want = load_bilm(elmo_dir / "elmo").embed(SENTENCES)[0]
        got = load_bilm(old).embed(SENTENCES)[0]
    assert torch.equal(want, got)
    assert run_command("compress", [str(old), "--output-dir", str(tmp_path / "half"), "--format", "float16",
                                    "--measure", str(elmo_dir / "s.txt"), "--threads", "1", "--rounds", "1"]) == 0
    half = json.loads((tmp_path / "half" / "elmoc-model.json").read_text())
    assert half["format"] == "elmoc-model-v2" and "forward.safetensors" in half["files"]
    assert not (tmp_path / "half" / "forward.pt").exists()


def test_a_damaged_weights_file_is_one_line(elmo_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(elmo_dir / "elmo", broken)
    (broken / "forward.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(InputFileError, match=r"forward.safetensors: is not a model directory's weights file in the "
                       r"safetensors format .*; export the model again"):
        load_bilm(broken)
