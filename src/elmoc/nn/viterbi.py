"""Constrained Viterbi decoding over BIO tags (He et al. 2017; AllenNLP's SRL decoder).

The tagger's per-token log-probabilities are decoded under hard constraints: an
``I-X`` tag may only follow ``B-X`` or ``I-X``, and may not start a sentence.
Disallowed transitions get ``-inf``; all allowed transitions score 0, so the
result is the most probable *well-formed* tag sequence.

Hand-written (a short dynamic program) because torch has no Viterbi; it is
batched over sentences and loops over time only.
"""
from __future__ import annotations

from typing import Sequence

import torch


def bio_constraints(labels: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Allowed transitions and start tags of a BIO label set.

    Args:
        labels: tag strings, each ``O``, ``B-X`` or ``I-X``.
    Returns:
        transitions: (num_tags, num_tags) bool, ``[i, j]`` True if tag j may follow tag i.
        start: (num_tags,) bool, True if the tag may open a sentence.
    """
    n = len(labels)
    transitions = torch.ones(n, n, dtype=torch.bool)
    start = torch.ones(n, dtype=torch.bool)
    for j, tag in enumerate(labels):
        if tag.startswith("I-"):
            name = tag[2:]
            start[j] = False
            for i, prev in enumerate(labels):
                transitions[i, j] = prev in (f"B-{name}", f"I-{name}")
        elif not (tag == "O" or tag.startswith("B-")):
            raise ValueError(f"tag {tag!r} is not O, B-X or I-X")
    return transitions, start


def viterbi_decode(scores: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
                   start: torch.Tensor | None = None) -> list[list[int]]:
    """Best allowed tag sequence of each sentence.

    Args:
        scores: (batch, time, num_tags) float, per-token tag scores (log-probabilities).
        mask: (batch, time) bool, True for real tokens (each row a prefix, at least one token).
        transitions: (num_tags, num_tags) bool allowed transitions (see :func:`bio_constraints`).
        start: (num_tags,) bool allowed first tags, or None for all.
    Returns:
        one list of tag indices per sentence, of the sentence's length.
    """
    batch, time, num_tags = scores.shape
    if transitions.shape != (num_tags, num_tags):
        raise ValueError(f"transitions {tuple(transitions.shape)} do not match {num_tags} tags")
    scores = scores.detach().float()
    neg = torch.tensor(float("-inf"))
    penalty = torch.where(transitions, torch.tensor(0.0), neg)  # (tags, tags)
    first = scores[:, 0]
    if start is not None:
        first = first + torch.where(start, torch.tensor(0.0), neg)
    best = first  # (batch, tags)
    backpointers = []
    for t in range(1, time):
        candidate = best.unsqueeze(2) + penalty.unsqueeze(0)  # (batch, prev, next)
        value, index = candidate.max(dim=1)  # (batch, next)
        step = value + scores[:, t]
        live = mask[:, t].unsqueeze(1)
        best = torch.where(live, step, best)
        backpointers.append(index)
    lengths = mask.sum(dim=1).tolist()
    paths = []
    for b in range(batch):
        tag = int(best[b].argmax())
        path = [tag]
        for t in range(int(lengths[b]) - 1, 0, -1):
            tag = int(backpointers[t - 1][b, tag])
            path.append(tag)
        paths.append(path[::-1])
    return paths
