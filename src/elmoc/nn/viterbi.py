"""The one constrained Viterbi decoder of the sequence taggers (NER's CRF, SRL's BIO tagger).

:func:`allowed_transitions` gives the hard constraints of a tagging scheme (AllenNLP's
``allowed_transitions``): in BIO an ``I-X`` only continues ``B-X``/``I-X`` and may
not open a sentence; in BIOUL an ``I-X``/``L-X`` only continues ``B-X``/``I-X``, a
chunk must be closed by ``L-X`` before anything else, and a sentence may neither
open with ``I``/``L`` nor end inside a chunk.  :func:`viterbi_decode` finds the best
path under transition scores in which ``-inf`` marks what is not allowed;
:func:`constraint_scores` turns the boolean constraints into such scores (0 /
``-inf``), which a CRF adds to its learned transition scores and SRL uses alone.

Hand-written (a short dynamic program) because torch has no Viterbi: batched
over sentences on the scores' device, looping over time only; the back-pointers
are copied to the CPU once for the backtrace.
"""
from __future__ import annotations

from typing import Sequence

import torch

SCHEMES = ("BIO", "BIOUL")


def _parse(tag: str, scheme: str) -> tuple[str, str]:
    if tag == "O":
        return "O", ""
    prefixes = tuple(scheme.replace("O", ""))
    prefix, _, kind = tag.partition("-")
    if prefix not in prefixes or not kind:
        raise ValueError(f"tag {tag!r} is not O or {'/'.join(prefixes)}-TYPE ({scheme})")
    return prefix, kind


def allowed_transitions(labels: Sequence[str], scheme: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hard constraints of a tag set.

    Args:
        labels: tag strings, index = tag id (``O``, ``B-X``, ``I-X`` and for BIOUL ``L-X``, ``U-X``).
        scheme: ``"BIO"`` or ``"BIOUL"``.
    Returns:
        transitions: (num_tags, num_tags) bool, ``[i, j]`` True if tag j may follow tag i.
        start: (num_tags,) bool, tags that may open a sentence.
        end: (num_tags,) bool, tags that may close a sentence.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    parsed = [_parse(tag, scheme) for tag in labels]
    n = len(labels)
    transitions = torch.zeros(n, n, dtype=torch.bool)
    for i, (p_prev, k_prev) in enumerate(parsed):
        for j, (p_next, k_next) in enumerate(parsed):
            continues = p_prev in ("B", "I") and k_prev == k_next
            if scheme == "BIO":
                transitions[i, j] = p_next != "I" or continues
            elif p_prev in ("B", "I"):  # BIOUL, inside a chunk: continue or close it
                transitions[i, j] = p_next in ("I", "L") and continues
            else:
                transitions[i, j] = p_next in ("O", "B", "U")
    start = torch.tensor([p in ("O", "B", "U") for p, _ in parsed], dtype=torch.bool)
    end = torch.tensor([scheme == "BIO" or p in ("O", "L", "U") for p, _ in parsed], dtype=torch.bool)
    return transitions, start, end


def constraint_scores(allowed: torch.Tensor) -> torch.Tensor:
    """0 where ``allowed`` (bool, any shape) is True, ``-inf`` elsewhere (float32)."""
    return torch.zeros(allowed.shape, device=allowed.device).masked_fill(~allowed, float("-inf"))


def viterbi_decode(scores: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
                   start: torch.Tensor | None = None, end: torch.Tensor | None = None) -> list[list[int]]:
    """Best path of each sentence: argmax of sum_t scores[t, y_t] + start[y_0] + sum_t transitions[y_t-1, y_t] + end[y_last].

    Args:
        scores: (batch, time, num_tags) float per-token tag scores.
        mask: (batch, time) bool, True for real tokens (each row a prefix, at least one token).
        transitions: (num_tags, num_tags) float, ``-inf`` = not allowed.
        start, end: (num_tags,) float first/last-tag scores (``-inf`` = not allowed), or None for 0.
    Returns:
        one list of tag ids per sentence, of the sentence's length.
    """
    batch, time, num_tags = scores.shape
    if transitions.shape != (num_tags, num_tags):
        raise ValueError(f"transitions {tuple(transitions.shape)} do not match {num_tags} tags")
    scores = scores.detach().float()
    transitions = transitions.detach().float()
    best = scores[:, 0] if start is None else scores[:, 0] + start.detach().float()  # (batch, tags)
    backpointers = []
    for t in range(1, time):
        value, index = (best.unsqueeze(2) + transitions).max(dim=1)  # (batch, tags) over the previous tag
        best = torch.where(mask[:, t].unsqueeze(1), value + scores[:, t], best)  # padding keeps the last real step
        backpointers.append(index)
    if end is not None:
        best = best + end.detach().float()
    last = best.argmax(dim=1).tolist()
    pointers = torch.stack(backpointers).cpu().numpy() if backpointers else None  # (time - 1, batch, tags)
    lengths = mask.sum(dim=1).tolist()
    paths = []
    for b in range(batch):
        tag = last[b]
        path = [tag]
        for t in range(int(lengths[b]) - 1, 0, -1):
            tag = int(pointers[t - 1, b, tag])
            path.append(tag)
        paths.append(path[::-1])
    return paths
