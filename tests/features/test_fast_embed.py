"""Issue 24.2: what makes embedding fast changes no number.

- both directions of a bilm-tf model read one char-CNN, run once per batch;
- the char-CNN encodes each distinct word of a batch once;
against the straightforward computation (each direction its own CNN, every position encoded).
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import torch

from elmoc.features.bilm import BiLM, same_input
from elmoc.inputs.char_cnn import CharCnnInput
from elmoc.inputs.characters import batch_char_ids
from elmoc.pretrained.bilm_tf import convert_bilm_tf
from elmoc.pretrained.loader import load_bilm


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    shared = Path(os.environ.get("ELMOC_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
    source = shared / "fixtures" / "allennlp" / "elmo"
    if not (source / "lm_weights.hdf5").is_file():
        pytest.skip("AllenNLP ELMo fixture absent")
    out = convert_bilm_tf(source / "options.json", source / "lm_weights.hdf5", tmp_path_factory.mktemp("m") / "elmo")
    sentences = [s.split() for s in json.loads((source / "sentences.json").read_text())[0]]
    return out, sentences


def count_cnn_calls(bilm: BiLM, monkeypatch) -> list[int]:
    """Patch CharCnnInput.encode_chars to record how many words each call encodes."""
    calls: list[int] = []
    original = CharCnnInput.encode_chars

    def counting(self, chars):
        calls.append(chars.shape[0] * chars.shape[1])
        return original(self, chars)

    monkeypatch.setattr(CharCnnInput, "encode_chars", counting)
    return calls


def test_bilm_tf_directions_share_one_char_cnn(released, monkeypatch):
    directory, sentences = released
    bilm = load_bilm(directory)
    assert bilm.shared_input and bilm.forward_lm.input_layer is bilm.backward_lm.input_layer
    calls = count_cnn_calls(bilm, monkeypatch)
    with torch.inference_mode():
        shared, mask, _ = bilm.embed(sentences)
    distinct = len({w for s in sentences for w in s} | {"<s>", "</s>"})
    assert calls == [distinct]  # one CNN call for both directions, each distinct word once

    # the straightforward computation: each direction its own copy of the CNN
    bilm.backward_lm.input_layer = copy.deepcopy(bilm.forward_lm.input_layer)
    assert not bilm.shared_input
    calls.clear()
    with torch.inference_mode():
        separate, mask2, _ = bilm.embed(sentences)
    assert len(calls) == 2
    assert torch.equal(mask, mask2)
    torch.testing.assert_close(shared, separate, rtol=0, atol=1e-6)


def test_different_weights_are_not_shared(released):
    directory, _ = released
    bilm = load_bilm(directory)
    fwd, bwd = bilm.forward_lm, bilm.backward_lm
    bwd.input_layer = copy.deepcopy(fwd.input_layer)
    assert same_input(fwd, bwd)
    with torch.no_grad():
        bwd.input_layer.projection.bias[0] += 1e-3
    assert not same_input(fwd, bwd)
    rebuilt = BiLM(fwd, bwd, bilm.vocab)
    assert not rebuilt.shared_input and rebuilt.backward_lm.input_layer is not rebuilt.forward_lm.input_layer


def test_distinct_words_equal_every_position(released):
    directory, sentences = released
    lm = load_bilm(directory).forward_lm
    rows = [["<s>", *s, "</s>"] for s in sentences]
    width = max(len(r) for r in rows) + 2  # wider than the longest row: padding stays zero
    with torch.inference_mode():
        got = lm.input_layer.word_vectors(rows, width, torch.device("cpu"))
        want = lm.input_layer.encode_chars(batch_char_ids(rows, lm.input_layer.max_chars))
    assert got.shape == (len(rows), width, lm.input_layer.output_dim)
    for b, row in enumerate(rows):
        torch.testing.assert_close(got[b, : len(row)], want[b, : len(row)], rtol=0, atol=1e-6)
        assert not got[b, len(row):].any()


def test_lstm_skips_the_padding_of_sorted_rows(released, monkeypatch):
    """Without gradients an ELMo LSTM runs in time segments over the rows still going: the
    same layers and final states as one call over the padded batch, for fewer positions."""
    directory, sentences = released
    bilm = load_bilm(directory)
    batch = [s for s in sentences for _ in range(3)][:20]  # >= 8 rows, lengths 5..~20
    batch = [s[: 2 + i] for i, s in enumerate(batch)]  # every row its own length
    with torch.enable_grad():  # the one-call path
        whole, mask, (fwd_whole, bwd_whole) = bilm.embed(batch)
    positions: list[int] = []
    original = type(bilm.forward_lm).encode

    def counting(self, ids, mask=None, state=None, vectors=None):
        positions.append(ids.numel())
        return original(self, ids, mask, state, vectors)

    monkeypatch.setattr(type(bilm.forward_lm), "encode", counting)
    with torch.inference_mode():
        segmented, mask2, (fwd_seg, bwd_seg) = bilm.embed(batch)
    padded = len(batch) * (max(len(s) for s in batch) + 2)
    assert len(positions) > 2 and sum(positions) < 2 * padded * 0.8  # both directions, < 80% of the padded work
    assert torch.equal(mask, mask2)
    torch.testing.assert_close(segmented, whole.detach(), rtol=0, atol=1e-5)
    for seg, ref in zip([*fwd_seg, *bwd_seg], [*fwd_whole, *bwd_whole]):  # per layer (h, c), row order kept
        for a, b in zip(seg, ref):
            torch.testing.assert_close(a, b.detach(), rtol=0, atol=1e-5)
