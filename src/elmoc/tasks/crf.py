"""Linear-chain CRF (NER's ``crf_tagger``): forward-algorithm likelihood, constrained decoding.

Training maximises the log-likelihood of the gold tag sequence under learned
transition scores; the loss is the negative log-likelihood *summed* over the
batch, as AllenNLP's ``ConditionalRandomField`` returns it (so a regulariser
added to it, e.g. the scalar-mix L2, keeps its weight whatever the batch size).
Decoding is the shared constrained Viterbi (:mod:`elmoc.nn.viterbi`) with the
tagging scheme's hard constraints added to the learned scores, as AllenNLP's
``constrain_crf_decoding``.  Start/end transition *scores* are optional (off in
the paper's NER config); the start/end *constraints* always apply when decoding.

Hand-written (a short dynamic program) because torch has no CRF.
"""
from __future__ import annotations

import torch
from torch import nn

from elmoc.nn.viterbi import constraint_scores, viterbi_decode


class ConditionalRandomField(nn.Module):
    """CRF over per-token tag scores.

    Args:
        num_tags: number of tags.
        allowed, start_allowed, end_allowed: decoding constraints (bool, see
            :func:`elmoc.nn.viterbi.allowed_transitions`); None = everything allowed.
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

    def forward(self, scores: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The training loss: negative log-likelihood summed over the batch (scalar)."""
        return self.neg_log_likelihood(scores, tags, mask).sum()

    @torch.no_grad()
    def viterbi(self, scores: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """Best constrained tag sequence of each sentence (lists of its real length)."""
        return viterbi_decode(scores, mask, self.transitions + constraint_scores(self.allowed),
                              self.start_scores + constraint_scores(self.start_allowed),
                              self.end_scores + constraint_scores(self.end_allowed))
