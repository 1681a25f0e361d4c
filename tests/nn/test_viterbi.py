"""Constrained Viterbi: BIO constraints hold and the best allowed path is found."""
from __future__ import annotations

import itertools

import pytest
import torch

from elmoc.nn.viterbi import bio_constraints, viterbi_decode

LABELS = ["O", "B-ARG0", "I-ARG0", "B-V", "I-V", "B-ARG1", "I-ARG1"]


def well_formed(tags):
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            return False
        previous = tag
    return True


def test_constraints():
    transitions, start = bio_constraints(LABELS)
    i_arg0 = LABELS.index("I-ARG0")
    assert transitions[LABELS.index("B-ARG0"), i_arg0] and transitions[i_arg0, i_arg0]
    assert not transitions[LABELS.index("O"), i_arg0]
    assert not transitions[LABELS.index("B-ARG1"), i_arg0]
    assert transitions[i_arg0, LABELS.index("B-ARG1")]
    assert start.tolist() == [True, True, False, True, False, True, False]
    with pytest.raises(ValueError, match="not O, B-X or I-X"):
        bio_constraints(["O", "X-Y"])


def test_greedy_argmax_would_be_ill_formed_but_viterbi_is_not():
    # token-wise argmax: I-ARG0 at the start and I-ARG1 after B-ARG0
    log_probs = torch.log(torch.tensor([[
        [0.1, 0.3, 0.6, 0.0, 0.0, 0.0, 0.0],
        [0.1, 0.0, 0.0, 0.0, 0.0, 0.4, 0.5],
        [0.6, 0.0, 0.0, 0.4, 0.0, 0.0, 0.0],
    ]]) + 1e-6)
    transitions, start = bio_constraints(LABELS)
    path = viterbi_decode(log_probs, torch.ones(1, 3, dtype=torch.bool), transitions, start)[0]
    tags = [LABELS[i] for i in path]
    assert well_formed(tags)
    # exhaustive search over well-formed sequences agrees
    best = max(
        (seq for seq in itertools.product(range(len(LABELS)), repeat=3) if well_formed([LABELS[i] for i in seq])),
        key=lambda seq: sum(float(log_probs[0, t, i]) for t, i in enumerate(seq)),
    )
    assert path == list(best)
    assert tags == ["B-ARG0", "B-ARG1", "O"]


def test_random_batches_with_padding_are_well_formed_and_optimal():
    torch.manual_seed(0)
    labels = ["O", "B-A", "I-A", "B-B", "I-B"]
    transitions, start = bio_constraints(labels)
    scores = torch.randn(6, 5, len(labels)) * 3
    lengths = [5, 4, 3, 1, 5, 2]
    mask = torch.arange(5)[None, :] < torch.tensor(lengths)[:, None]
    paths = viterbi_decode(scores, mask, transitions, start)
    for b, path in enumerate(paths):
        assert len(path) == lengths[b]
        assert well_formed([labels[i] for i in path])
        candidates = [s for s in itertools.product(range(len(labels)), repeat=lengths[b]) if well_formed([labels[i] for i in s])]
        value = lambda s: sum(float(scores[b, t, i]) for t, i in enumerate(s))  # noqa: E731
        assert value(path) == pytest.approx(max(value(s) for s in candidates))
