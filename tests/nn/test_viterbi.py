"""The one constrained Viterbi: BIO/BIOUL constraints hold and the best allowed path is found
(exhaustive search), with and without learned transition / start / end scores."""
from __future__ import annotations

import itertools

import pytest
import torch

from elmoc.nn.viterbi import allowed_transitions, constraint_scores, viterbi_decode

LABELS = ["O", "B-ARG0", "I-ARG0", "B-V", "I-V", "B-ARG1", "I-ARG1"]
BIOUL = ["O", "B-PER", "I-PER", "L-PER", "U-PER", "B-LOC", "I-LOC", "L-LOC", "U-LOC"]


def well_formed(tags):
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            return False
        previous = tag
    return True


def valid_bioul(tags):
    prev = "O"
    for t in tags:
        if t[0] in "IL" and not (prev[0] in "BI" and prev[2:] == t[2:]):
            return False
        if t[0] in "OBU" and prev[0] in "BI":
            return False
        prev = t
    return prev[0] in "OLU"


def bio_decode(scores, mask, labels):
    transitions, start, end = allowed_transitions(labels, "BIO")
    return viterbi_decode(scores, mask, constraint_scores(transitions), constraint_scores(start), constraint_scores(end))


def test_bio_constraints():
    transitions, start, end = allowed_transitions(LABELS, "BIO")
    i_arg0 = LABELS.index("I-ARG0")
    assert transitions[LABELS.index("B-ARG0"), i_arg0] and transitions[i_arg0, i_arg0]
    assert not transitions[LABELS.index("O"), i_arg0]
    assert not transitions[LABELS.index("B-ARG1"), i_arg0]
    assert transitions[i_arg0, LABELS.index("B-ARG1")]
    assert start.tolist() == [True, True, False, True, False, True, False]
    assert end.all()
    with pytest.raises(ValueError, match="not O or B/I-TYPE"):
        allowed_transitions(["O", "X-Y"], "BIO")
    with pytest.raises(ValueError, match="not O or B/I-TYPE"):
        allowed_transitions(["O", "BI-Y"], "BIO")
    with pytest.raises(ValueError, match="scheme"):
        allowed_transitions(["O"], "IOB1")


def test_bioul_constraints():
    allowed, start, end = allowed_transitions(BIOUL, "BIOUL")
    assert allowed[1, 2] and allowed[1, 3] and not allowed[1, 6] and not allowed[0, 2] and not allowed[1, 0]
    assert allowed[3, 0] and allowed[4, 5] and not allowed[3, 2]
    assert not start[2] and not start[3] and start[4] and not end[1] and not end[2] and end[3] and end[0]
    with pytest.raises(ValueError, match="B/I/U/L-TYPE"):
        allowed_transitions(["O", "E-PER"], "BIOUL")


def test_greedy_argmax_would_be_ill_formed_but_viterbi_is_not():
    # token-wise argmax: I-ARG0 at the start and I-ARG1 after B-ARG0
    log_probs = torch.log(torch.tensor([[
        [0.1, 0.3, 0.6, 0.0, 0.0, 0.0, 0.0],
        [0.1, 0.0, 0.0, 0.0, 0.0, 0.4, 0.5],
        [0.6, 0.0, 0.0, 0.4, 0.0, 0.0, 0.0],
    ]]) + 1e-6)
    path = bio_decode(log_probs, torch.ones(1, 3, dtype=torch.bool), LABELS)[0]
    tags = [LABELS[i] for i in path]
    assert well_formed(tags)
    best = max(
        (seq for seq in itertools.product(range(len(LABELS)), repeat=3) if well_formed([LABELS[i] for i in seq])),
        key=lambda seq: sum(float(log_probs[0, t, i]) for t, i in enumerate(seq)),
    )
    assert path == list(best)
    assert tags == ["B-ARG0", "B-ARG1", "O"]


def test_random_bio_batches_with_padding_are_well_formed_and_optimal():
    torch.manual_seed(0)
    labels = ["O", "B-A", "I-A", "B-B", "I-B"]
    scores = torch.randn(6, 5, len(labels)) * 3
    lengths = [5, 4, 3, 1, 5, 2]
    mask = torch.arange(5)[None, :] < torch.tensor(lengths)[:, None]
    paths = bio_decode(scores, mask, labels)
    for b, path in enumerate(paths):
        assert len(path) == lengths[b]
        assert well_formed([labels[i] for i in path])
        candidates = [s for s in itertools.product(range(len(labels)), repeat=lengths[b]) if well_formed([labels[i] for i in s])]
        value = lambda s: sum(float(scores[b, t, i]) for t, i in enumerate(s))  # noqa: E731
        assert value(path) == pytest.approx(max(value(s) for s in candidates))


def test_learned_scores_plus_bioul_constraints_are_optimal():
    torch.manual_seed(3)
    labels = BIOUL[:5]
    allowed, start_ok, end_ok = allowed_transitions(labels, "BIOUL")
    learned, first, last = torch.randn(5, 5), torch.randn(5), torch.randn(5)
    scores = torch.randn(4, 4, 5) * 2
    lengths = [4, 3, 1, 2]
    mask = torch.arange(4)[None, :] < torch.tensor(lengths)[:, None]
    paths = viterbi_decode(scores, mask, learned + constraint_scores(allowed),
                           first + constraint_scores(start_ok), last + constraint_scores(end_ok))
    for b, path in enumerate(paths):
        def value(seq):
            total = float(first[seq[0]] + last[seq[-1]]) + sum(float(scores[b, t, i]) for t, i in enumerate(seq))
            return total + sum(float(learned[i, j]) for i, j in zip(seq, seq[1:]))
        candidates = [s for s in itertools.product(range(5), repeat=lengths[b]) if valid_bioul([labels[i] for i in s])]
        assert valid_bioul([labels[i] for i in path])
        assert value(path) == pytest.approx(max(value(s) for s in candidates), abs=1e-5)
