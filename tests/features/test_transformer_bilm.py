"""Causality of a Transformer bi-LM as features see it (issue 25): in the BiLM's output at word
t, the forward half does not change when words after t change, and the backward half (the
backward LM reads the reversed sentence, flipped back) does not change when words before t
change; both do change when the words on their own side change.  Padding of shorter
sentences in the batch changes nothing either."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.features.bilm import BiLM, FeatureLM
from elmoc.registry import build

WORDS = "the cat sat on a mat dog ran to big small house".split()
D_MODEL, BLOCKS = 8, 2


@pytest.fixture(scope="module")
def bilm():
    vocab = Vocabulary.from_counts(Counter({w: 20 - i for i, w in enumerate(WORDS)}))
    lms = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        inputs = build("input", {"type": "random", "dim": 6, "seed": 3}, vocab=vocab)
        encoder = build("encoder", {"type": "transformer", "d_model": D_MODEL, "heads": 2, "d_ff": 16,
                                    "num_layers": BLOCKS, "dropout": 0.1}, input_dim=inputs.output_dim)
        lms.append(FeatureLM(inputs, encoder, vocab).eval())
    return BiLM(lms[0], lms[1], vocab, boundaries=True).eval()


def embed(bilm, sentences):
    with torch.no_grad():
        layers, mask, _ = bilm.embed(sentences)
    return layers, mask


def test_layers_are_input_view_plus_blocks_of_both_directions(bilm):
    layers, mask = embed(bilm, [["the", "cat", "sat"], ["a", "dog"]])
    assert bilm.num_layers == BLOCKS + 1 and bilm.output_dim == 2 * D_MODEL
    assert layers.shape == (2, BLOCKS + 1, 3, 2 * D_MODEL)
    assert mask.tolist() == [[True, True, True], [True, True, False]]
    assert not layers[1, :, 2].any()  # zero after the sentence


@pytest.mark.parametrize("t", [0, 2, 4])
def test_forward_half_ignores_the_future_backward_half_the_past(bilm, t):
    sentence = "the cat sat on a mat".split()
    future = sentence[: t + 1] + ["house", "big", "ran", "to", "dog"][: len(sentence) - t - 1]
    past = ["small", "house", "big", "ran", "to"][:t] + sentence[t:]
    base, _ = embed(bilm, [sentence])
    f, _ = embed(bilm, [future])
    p, _ = embed(bilm, [past])
    fwd, bwd = slice(0, D_MODEL), slice(D_MODEL, 2 * D_MODEL)
    # every layer: the forward half up to t only sees words <= t; the backward half from t on, words >= t
    torch.testing.assert_close(f[0, :, : t + 1, fwd], base[0, :, : t + 1, fwd], atol=1e-6, rtol=0)
    torch.testing.assert_close(p[0, :, t:, bwd], base[0, :, t:, bwd], atol=1e-6, rtol=0)
    # and each half does see its own side (the </s> and <s> around the sentence count too)
    assert (f[0, 1:, t:, bwd] - base[0, 1:, t:, bwd]).abs().max() > 1e-4
    if t > 0:  # at t = 0 no word before t changed
        assert (p[0, 1:, : t + 1, fwd] - base[0, 1:, : t + 1, fwd]).abs().max() > 1e-4


def test_a_sentence_embeds_the_same_alone_and_in_a_padded_batch(bilm):
    short, long = "a dog ran".split(), "the cat sat on a big mat".split()
    alone, _ = embed(bilm, [short])
    batched, _ = embed(bilm, [long, short])
    torch.testing.assert_close(batched[1, :, :3], alone[0], atol=1e-5, rtol=0)
