"""Trainable subword embedding (ELMo-Sub's input, spec 3.3).

A plain ``nn.Embedding`` over the BPE vocabulary; the ``subword`` output layer ties
its softmax weights to this table.  Init ``N(0, 1/sqrt(dim))`` (not PyTorch's
N(0, 1)) because the tied table also produces the logits, where unit-variance rows
of width 512 would start the softmax far from uniform.
"""
from __future__ import annotations

import math
from typing import Sized

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.inputs.base import InputLayer
from elmoc.registry import register


@register("input", "subword")
class SubwordInput(InputLayer):
    """Trainable embedding of subword ids.

    Args:
        dim: embedding width (512 in the paper, equal to the encoder projection so
            that input and output can be tied).
        vocab: (context) the subword vocabulary (``results/bpe/vocab.txt``).

    Shape:
        ids: (batch, time) long; returns (batch, time, dim).
    """

    OPTION_RANGES = {"dim": "int > 0"}

    def __init__(self, dim: int = 512, vocab: Sized | None = None):
        super().__init__()
        if vocab is None:
            raise ConfigError("input 'subword' needs the subword vocabulary (set `vocab:` in the LM spec)")
        if not isinstance(dim, int) or dim < 1:
            raise ConfigError(f"input 'subword': dim must be a positive integer, got {dim!r}")
        self.embedding = nn.Embedding(len(vocab), dim)
        if not self.embedding.weight.is_meta:
            nn.init.normal_(self.embedding.weight, std=1.0 / math.sqrt(dim))
        self.output_dim = dim

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids)
