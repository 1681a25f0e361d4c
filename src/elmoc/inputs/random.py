"""Random N(0, 1) input table (the paper's "random input embedding" ablation, spec 5.1).

Generated from a seed instead of read from a file, so it needs no artifact; frozen
by default (a non-persistent buffer, rebuilt identically from the seed), or
trainable.  The paper reports this input as unstable (85.8 on SNLI).
ELMo-C-RND, in contrast, keeps FastText *inputs* and uses random *targets*
(``results/vectors/random.npy`` for the output layer).
"""
from __future__ import annotations

from typing import Sized

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.inputs.base import InputLayer
from elmoc.registry import register


@register("input", "random")
class RandomInput(InputLayer):
    """Table of N(0, 1) rows, one per vocabulary entry.

    Args:
        dim: width (300 as FastText).
        seed: generator seed of the table.
        trainable: make the table a parameter (default: frozen buffer).
        vocab: (context) the vocabulary.

    Shape:
        ids: (batch, time) long; returns (batch, time, dim).
    """

    OPTION_RANGES = {"dim": "int > 0"}

    def __init__(self, dim: int = 300, seed: int = 1, trainable: bool = False, vocab: Sized | None = None):
        super().__init__()
        if vocab is None:
            raise ConfigError("input 'random' needs the vocabulary (set `vocab:` in the LM spec)")
        if not isinstance(dim, int) or dim < 1:
            raise ConfigError(f"input 'random': dim must be a positive integer, got {dim!r}")
        if torch.empty(()).is_meta:
            table = torch.empty(len(vocab), dim)
        else:
            table = torch.randn(len(vocab), dim, generator=torch.Generator().manual_seed(int(seed)))
        self.trainable = bool(trainable)
        if self.trainable:
            self.table = nn.Parameter(table)
        else:
            self.register_buffer("table", table, persistent=False)
        self.output_dim = dim

    @property
    def weight(self) -> torch.Tensor:
        return self.table

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[ids]
