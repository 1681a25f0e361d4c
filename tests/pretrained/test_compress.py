"""Issue 24.3: ``elmoc compress`` writes float16/bfloat16/int8 copies of a model directory
that load like any other, with their measured figures on the card.

Fidelity bounds (mean cosine per layer of the copy's features to the source's, on
AllenNLP's small test ELMo): float16 rounds each weight to 11 significant bits
(relative error <= 2^-11 ~ 5e-4), so features move by ~1e-3 relative and the cosine
stays above 1 - 1e-6; ``> 0.9999`` leaves two orders of margin.  bfloat16 keeps 8 bits
(2^-8 ~ 4e-3): ``> 0.999``.  int8 quantizes each weight row to 255 levels of its
largest value and every activation per call, ~1e-2 relative per product, compounded
over the char-CNN, 2 highway layers and the LSTM steps: ``> 0.99``.
"""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch
from lm_tree_helpers import run_command

from elmoc import Elmo, embed_sentences
from elmoc.encoders.elmo_lstm import ProjectedLstmLayer
from elmoc.encoders.int8_lstm import Int8ProjectedLstmLayer
from elmoc.errors import InputFileError
from elmoc.pretrained.compare import directory_size, feature_fidelity
from elmoc.pretrained.compress import record_downstream
from elmoc.io.tensor_files import read_state
from elmoc.pretrained.formats import int8_modules, quantize_int8
from elmoc.pretrained.loader import load_bilm
from elmoc.registry import build

BOUND = {"float16": 0.9999, "bfloat16": 0.999, "int8": 0.99}
STORED = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def copies(elmo_dir):
    for fmt in BOUND:
        assert run_command("compress", [str(elmo_dir / "elmo"), "--output-dir", str(elmo_dir / fmt), "--format", fmt,
                                        "--measure", str(elmo_dir / "s.txt"), "--threads", "1",
                                        "--rounds", "1"]) == 0
    return elmo_dir


def _sentences(root) -> list[list[str]]:
    return [line.split() for line in (root / "s.txt").read_text().splitlines()]


@pytest.mark.parametrize("fmt", list(BOUND))
def test_each_format_round_trips(copies, fmt):
    source, copy = copies / "elmo", copies / fmt
    sentences = _sentences(copies)
    want = embed_sentences(source, sentences, "all", batch_size=8)
    got = embed_sentences(copy, sentences, "all", batch_size=8)
    assert [g.shape for g in got] == [w.shape for w in want]
    fidelity = feature_fidelity(want, got)
    assert len(fidelity["mean_cosine"]) == 3
    assert min(fidelity["mean_cosine"]) > BOUND[fmt], fidelity
    assert fidelity["max_abs_diff"] > 0  # really another model, not the source loaded twice
    assert directory_size(copy) < 0.6 * directory_size(source)
    meta = json.loads((copy / "elmoc-model.json").read_text())
    assert meta["compression"]["format"] == fmt
    measured = meta["compression"]["measured"]
    assert measured["size_bytes"]["compressed"] < measured["size_bytes"]["source"]
    assert min(measured["mean_cosine"]) > BOUND[fmt] and measured["tokens_per_s"]["compressed"] > 0
    card = (copy / "README.md").read_text()
    assert f"## Compressed copy: {fmt}" in card and "mean cosine to the source" in card
    assert card.startswith((source / "README.md").read_text().rstrip("\n"))
    state = read_state(copy / "forward.safetensors")
    if fmt in STORED:
        assert {v.dtype for v in state.values() if v.is_floating_point()} == {STORED[fmt]}
    else:
        quantized = sorted(k for k, v in state.items() if v.is_quantized)
        assert all(state[k].dtype == torch.qint8 for k in quantized)
        assert "encoder.lstm_layers.0.state_linearity.weight" in quantized
        assert "input_layer.projection.weight" in quantized and "input_layer.highways.1.gate.weight" in quantized


@pytest.mark.parametrize("fmt", list(BOUND))
def test_elmo_module_and_embed_command_load_each_format(copies, fmt, tmp_path):
    elmo = Elmo.from_pretrained(copies / fmt, 1, dropout=0.0)
    with torch.no_grad():
        out = elmo([["the", "cat", "sat"], ["a", "dog"]])
    assert out["elmo_representations"][0].shape == (2, 3, 32)
    assert torch.isfinite(out["elmo_representations"][0]).all()
    assert run_command("embed", [str(copies / "s.txt"), str(tmp_path / "o.hdf5"), "--model", str(copies / fmt),
                                 "--all"]) == 0


def test_int8_copy_computes_with_its_stored_int8_weights(copies):
    bilm = load_bilm(copies / "int8")
    state = read_state(copies / "int8" / "backward.safetensors")
    quantized = dict(int8_modules(bilm.backward_lm))
    assert len(quantized) == 11  # 3 per LSTM layer, 2 per highway layer, the char-CNN projection
    for name, module in quantized.items():
        stored = state[f"{name}.weight"]
        assert torch.equal(module.weight().int_repr(), stored.int_repr()), name
        assert torch.equal(module.weight().q_per_channel_scales(), stored.q_per_channel_scales()), name
    assert all(isinstance(layer, Int8ProjectedLstmLayer) for layer in bilm.forward_lm.encoder.lstm_layers)


@pytest.mark.parametrize("layer_norm", [True, False])
def test_int8_layer_loop_equals_the_float_layer(layer_norm):
    """With float Linears the step-by-step layer computes what the fused float layer computes
    (padding, a carried state, clipping): the int8 layer differs only by its quantized products."""
    torch.manual_seed(0)
    layer = ProjectedLstmLayer(6, 10, 6, cell_clip=0.5, proj_clip=0.4, layer_norm=layer_norm).eval()
    stepwise = Int8ProjectedLstmLayer.from_float(layer)
    x = torch.randn(3, 7, 6)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 2:] = False
    state = (torch.randn(3, 6), torch.randn(3, 10))
    with torch.no_grad():
        want, (wh, wc) = layer(x, mask, state, None)
        got, (gh, gc) = stepwise(x, mask, state, None)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gh, wh, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gc, wc, atol=1e-5, rtol=1e-5)


def test_int8_encoders_stay_close_to_float(tmp_path):
    """quantize_int8 on an ELMo LSTM (with input projection and LayerNorm) and a Transformer:
    every Linear becomes int8 and the outputs stay close to the float ones."""
    torch.manual_seed(0)
    x = torch.randn(4, 9, 20)
    mask = torch.ones(4, 9, dtype=torch.bool)
    mask[3, 5:] = False
    for cfg, linears in (({"type": "elmo_lstm", "num_layers": 2, "cell_size": 64, "projection_size": 32}, 7),
                         ({"type": "transformer", "d_model": 32, "heads": 4, "d_ff": 64, "num_layers": 2}, 5)):
        float_encoder = build("encoder", cfg, input_dim=20).eval()
        int8_encoder = build("encoder", cfg, input_dim=20).eval()
        int8_encoder.load_state_dict(float_encoder.state_dict())
        quantize_int8(int8_encoder)
        assert len(dict(int8_modules(int8_encoder))) == linears, cfg["type"]
        with torch.no_grad():
            want = float_encoder(x, mask).layers
            got = int8_encoder(x, mask).layers
        for w, g in zip(want, got):
            w, g = w[mask], g[mask]  # (tokens, dim)
            cos = torch.nn.functional.cosine_similarity(w, g, dim=-1)
            assert cos.mean() > 0.99 and not torch.equal(w, g), (cfg["type"], float(cos.mean()))


def test_fasttext_model_tables_become_float16(lm_tree, tmp_path):
    """A FastText-input model: its input table and fastText n-gram tables are stored in float16
    and words outside the LM vocabulary still get their composed vector."""
    root = lm_tree("fasttext")
    assert run_command("export", ["--variant", "tiny", "--output-dir", "model"]) == 0
    (root / "s.txt").write_text("the zebra ran to the house\nthe cat sat on a big mat\n")
    assert run_command("compress", ["model", "--output-dir", "model16", "--format", "float16", "--measure", "s.txt",
                                    "--rounds", "1"]) == 0
    for name in ("input_vectors.npy", "fasttext_buckets.npy", "fasttext_word_vectors.npy"):
        assert np.load(root / "model" / name).dtype == np.float32
        assert np.load(root / "model16" / name).dtype == np.float16, name
    meta = json.loads((root / "model16/elmoc-model.json").read_text())
    assert meta["compression"]["tables"] == "float16"
    sentences = [["the", "zebra", "ran"]]
    want, got = embed_sentences(root / "model", sentences)[0], embed_sentences(root / "model16", sentences)[0]
    assert min(feature_fidelity([want], [got])["mean_cosine"]) > 0.9999
    assert np.abs(got[0, 1]).sum() > 0  # zebra (out of the LM vocabulary) is not <unk>'s zero row


def test_record_downstream_updates_meta_and_card(copies, tmp_path):
    copy = tmp_path / "int8"
    shutil.copytree(copies / "int8", copy)
    record_downstream(copy, "sentiment", {"task": "sentiment", "metric": "accuracy", "source": 0.8125,
                                          "compressed": 0.8, "seed": 1, "note": "demo workflow"})
    meta = json.loads((copy / "elmoc-model.json").read_text())
    assert meta["compression"]["downstream"]["sentiment"]["compressed"] == 0.8
    card = (copy / "README.md").read_text()
    assert "| sentiment accuracy (seed 1) | 0.8125 | 0.8000 |" in card
    assert card.count("## Compressed copy: int8") == 1 and "not measured yet" not in card
    assert load_bilm(copy).num_layers == 3
    with pytest.raises(InputFileError, match="not a compressed copy"):
        record_downstream(copies / "elmo", "sentiment", {})


def test_bad_requests_are_one_line(copies, tmp_path, capsys):
    def error(argv):
        assert run_command("compress", argv) == 1
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith("elmoc compress: error: ")
        return err

    measure = ["--measure", str(copies / "s.txt")]
    err = error([str(copies / "elmo"), "--output-dir", str(tmp_path / "x"), "--format", "int4"] + measure)
    assert "unknown compressed format 'int4' (did you mean 'int8'?); choose one of bfloat16, float16, int8" in err
    err = error([str(copies / "int8"), "--output-dir", str(tmp_path / "x"), "--format", "float16"] + measure)
    assert "is already a compressed copy (int8" in err and "compress the uncompressed model directory" in err
    err = error([str(tmp_path / "nowhere"), "--output-dir", str(tmp_path / "x"), "--format", "float16"] + measure)
    assert "nowhere: model directory not found" in err
    err = error([str(copies / "elmo"), "--output-dir", str(tmp_path / "x"), "--format", "float16",
                 "--measure", str(tmp_path / "none.txt")])
    assert "none.txt" in err
    assert not (tmp_path / "x").exists()


def test_crafted_weights_in_a_compressed_copy_run_no_code(copies, tmp_path):
    copy = tmp_path / "int8"
    shutil.copytree(copies / "int8", copy)
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (copy / "forward.safetensors").unlink()  # a copy written before: .pt weights, read weights-only
    meta = json.loads((copy / "elmoc-model.json").read_text())
    meta["files"] = [n.replace("forward.safetensors", "forward.pt") for n in meta["files"]]
    (copy / "elmoc-model.json").write_text(json.dumps(meta))
    torch.save({"x": Evil()}, copy / "forward.pt")
    with pytest.raises(InputFileError, match="forward.pt: is not a model directory's weights file with weights only"):
        load_bilm(copy)
    assert not marker.exists()
