"""Linear-chain CRF with BIOUL-constrained Viterbi decoding (NER's ``crf_tagger``).

Training maximises the log-likelihood of the gold tag sequence under learned
transition scores (forward algorithm).  Decoding is Viterbi with the tagging
scheme's hard constraints (e.g. ``I-PER`` only after ``B-PER``/``I-PER``, a
sentence may not end inside a chunk), as AllenNLP's ``constrain_crf_decoding``.
Start/end transition *scores* are optional (off in the paper's NER config); the
start/end *constraints* always apply when decoding.

Hand-written (short dynamic programs) because torch has no CRF.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


def bioul_constraints(labels: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Allowed transitions of a BIOUL tag set.

    Returns:
        transitions: (num_tags, num_tags) bool, ``[i, j]`` True if tag j may follow tag i.
        start: (num_tags,) bool, tags that may open a sentence (O, B-*, U-*).
        end: (num_tags,) bool, tags that may close a sentence (O, L-*, U-*).
    """
    parsed = []
    for tag in labels:
        if tag == "O":
            parsed.append(("O", ""))
        else:
            prefix, _, kind = tag.partition("-")
            if prefix not in ("B", "I", "L", "U") or not kind:
                raise ValueError(f"tag {tag!r} is not O or B/I/L/U-TYPE")
            parsed.append((prefix, kind))
    n = len(labels)
    transitions = torch.zeros(n, n, dtype=torch.bool)
    for i, (p_prev, k_prev) in enumerate(parsed):
        for j, (p_next, k_next) in enumerate(parsed):
            if p_prev in ("O", "L", "U"):
                transitions[i, j] = p_next in ("O", "B", "U")
            else:  # inside a chunk: continue or close it, same type
                transitions[i, j] = p_next in ("I", "L") and k_next == k_prev
    start = torch.tensor([p in ("O", "B", "U") for p, _ in parsed])
    end = torch.tensor([p in ("O", "L", "U") for p, _ in parsed])
    return transitions, start, end


class ConditionalRandomField(nn.Module):
    """CRF over per-token tag scores.

    Args:
        num_tags: number of tags.
        allowed, start_allowed, end_allowed: decoding constraints (see :func:`bioul_constraints`);
            None = everything allowed.
        start_end_scores: learn start and end transition scores.

    Shape:
        scores: (batch, time, num_tags) float; tags: (batch, time) long;
        mask: (batch, time) bool, each row a non-empty prefix.
    """

    def __init__(self, num_tags: int, allowed: torch.Tensor | None = None, start_allowed: torch.Tensor | None = None,
                 end_allowed: torch.Tensor | None = None, start_end_scores: bool = False):
        super().__init__()
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        nn.init.xavier_normal_(self.transitions)
        if start_end_scores:
            self.start_scores = nn.Parameter(torch.randn(num_tags))
            self.end_scores = nn.Parameter(torch.randn(num_tags))
        else:
            self.register_buffer("start_scores", torch.zeros(num_tags))
            self.register_buffer("end_scores", torch.zeros(num_tags))
        ones = torch.ones(num_tags, dtype=torch.bool)
        self.register_buffer("allowed", torch.ones(num_tags, num_tags, dtype=torch.bool) if allowed is None else allowed.bool())
        self.register_buffer("start_allowed", ones if start_allowed is None else start_allowed.bool())
        self.register_buffer("end_allowed", ones.clone() if end_allowed is None else end_allowed.bool())

    def _log_partition(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        alpha = self.start_scores + scores[:, 0]  # (B, K)
        for t in range(1, scores.shape[1]):
            step = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + scores[:, t].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, t].unsqueeze(1), step, alpha)
        return torch.logsumexp(alpha + self.end_scores, dim=1)  # (B,)

    def _gold_score(self, scores: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        emit = scores.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, T)
        trans = self.transitions[tags[:, :-1], tags[:, 1:]]  # (B, T-1)
        maskf = mask.to(scores.dtype)
        total = (emit * maskf).sum(1) + (trans * maskf[:, 1:]).sum(1)
        last = tags.gather(1, (mask.sum(1) - 1).unsqueeze(1)).squeeze(1)
        return total + self.start_scores[tags[:, 0]] + self.end_scores[last]

    def neg_log_likelihood(self, scores: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-sentence negative log-likelihood, shape (batch,)."""
        return self._log_partition(scores, mask) - self._gold_score(scores, tags, mask)

    @torch.no_grad()
    def viterbi(self, scores: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """Best constrained tag sequence of each sentence (lists of its real length)."""
        neg = torch.finfo(scores.dtype).min / 4
        trans = self.transitions.masked_fill(~self.allowed, neg)
        start = self.start_scores.masked_fill(~self.start_allowed, neg)
        end = self.end_scores.masked_fill(~self.end_allowed, neg)
        delta = start + scores[:, 0]  # (B, K)
        backpointers = []
        for t in range(1, scores.shape[1]):
            cand = delta.unsqueeze(2) + trans  # (B, K_prev, K)
            best, arg = cand.max(dim=1)
            step = best + scores[:, t]
            keep = mask[:, t].unsqueeze(1)
            delta = torch.where(keep, step, delta)
            backpointers.append(torch.where(keep, arg, torch.arange(self.num_tags).expand_as(arg)))
        last = (delta + end).argmax(dim=1)  # (B,)
        lengths = mask.sum(1).tolist()
        paths = []
        for b, n in enumerate(lengths):
            tag = int(last[b])
            path = [tag]
            for t in range(n - 1, 0, -1):
                tag = int(backpointers[t - 1][b, tag])
                path.append(tag)
            paths.append(path[::-1])
        return paths
