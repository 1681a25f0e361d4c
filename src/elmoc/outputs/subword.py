"""SUBWORD: full softmax over the BPE vocabulary, tied to the input table (ELMo-Sub, spec 3.3).

Logits ``h W^T + b`` over all subwords, with ``W`` the ``subword`` input layer's
embedding (tied, as the paper) and a trainable bias; when ``hidden_dim`` differs
from the table width a ``Linear(hidden_dim -> dim)`` is inserted.  Training and
evaluation are the same exact softmax; the heldout metric is *subword* perplexity
(not comparable with word-level perplexities).  Word features downstream use each
word's first subword (:mod:`elmoc.data.vocab.subword`).
"""
from __future__ import annotations

import math
from typing import Sized

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.outputs.base import OutputLoss, SoftmaxOutput
from elmoc.registry import register


@register("output", "subword")
class SubwordOutput(SoftmaxOutput):
    """Full softmax over subwords (shapes as :class:`~elmoc.outputs.base.SoftmaxOutput`).

    Args:
        tie: share the weight with the input layer's table (needs an input layer with a
            trainable ``weight`` of shape (vocab, dim)).  False: own table.
        dim: width of an untied table (default ``hidden_dim``).
        hidden_dim, vocab, input_layer: (context).
    """

    OPTION_RANGES = {"dim": "int > 0 or null"}

    def __init__(
        self,
        hidden_dim: int,
        vocab: Sized | None = None,
        input_layer: nn.Module | None = None,
        tie: bool = True,
        dim: int | None = None,
    ):
        super().__init__()
        if vocab is None:
            raise ConfigError("output 'subword' needs the vocabulary (set `vocab:` in the LM spec)")
        size = len(vocab)
        self.tie = bool(tie)
        if self.tie:
            weight = getattr(input_layer, "weight", None)
            if not isinstance(weight, nn.Parameter) or weight.dim() != 2 or weight.shape[0] != size:
                raise ConfigError(
                    "output 'subword' with tie: true needs a trainable input table over the same vocabulary "
                    "(input type 'subword'); set tie: false for an own output table"
                )
            self._tied_input = [input_layer]  # a list: not registered as a submodule twice
            width = weight.shape[1]
        else:
            width = hidden_dim if dim is None else int(dim)
            self.weight = nn.Parameter(torch.empty(size, width))
            if not self.weight.is_meta:
                nn.init.normal_(self.weight, std=1.0 / math.sqrt(width))
        self.bias = nn.Parameter(torch.zeros(size))
        self.vocab_size = size
        self.projection = nn.Linear(hidden_dim, width) if width != hidden_dim else None

    def table(self) -> torch.Tensor:
        return self._tied_input[0].weight if self.tie else self.weight

    def full_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Shape: (..., hidden_dim) -> (..., V)."""
        h = hidden if self.projection is None else self.projection(hidden)
        return torch.log_softmax(h @ self.table().t() + self.bias, dim=-1)

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        # Every position is scored and padding masked out of the sum: selecting the valid
        # rows first would need their number on the host (a GPU sync per step).
        if hidden.dim() != 3 or hidden.shape[:2] != targets.shape or targets.shape != mask.shape:
            raise ValueError(f"hidden {tuple(hidden.shape)}, targets {tuple(targets.shape)} and mask "
                             f"{tuple(mask.shape)} must agree on (batch, time)")
        valid = mask.reshape(-1)  # (N,) over all batch*time positions
        y = targets.reshape(-1).masked_fill(~valid, 0)  # padding scored against id 0, then dropped
        nll = -self.full_log_probs(hidden.reshape(-1, hidden.shape[-1])).gather(1, y[:, None]).squeeze(1)
        return OutputLoss(torch.where(valid, nll, 0.0).sum(), valid.sum().to(hidden.dtype), {})

    @torch.no_grad()
    def evaluate(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        """The same exact softmax, in chunks of positions to bound memory."""
        chunk = max(1, (1 << 24) // self.vocab_size)
        rows = max(1, chunk // max(1, hidden.shape[1]))
        total, count = hidden.new_zeros(()), hidden.new_zeros(())
        for start in range(0, hidden.shape[0], rows):
            part = self.forward(hidden[start : start + rows], targets[start : start + rows], mask[start : start + rows])
            total, count = total + part.loss_sum, count + part.num_tokens
        return OutputLoss(total, count, {})

    def direction_shared_parameters(self) -> list[nn.Parameter]:
        return [self.bias] + ([] if self.tie else [self.weight])
