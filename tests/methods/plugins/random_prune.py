"""A newcomer's prune method in one file: random pruning, the baseline magnitude pruning is
compared with.  Each round keeps a uniformly random ``1 - level`` fraction of every encoder
matrix's weights, among those the previous round kept (drawn from ``prune.seed``)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from elmoc.nn.pruning import Masks, magnitude_mask
from elmoc.registry import register
from elmoc.train.prune_methods.base import MaskMethod


@register("prune_method", "random")
class RandomPrune(MaskMethod):

    @dataclass(frozen=True)
    class Options:
        """Attributes:
            seed: the seed of the draws (each round's masks from its own generator).
        """

        seed: int = 0

    def choose_masks(self, weights: dict[str, torch.Tensor], level: float, previous: Masks | None) -> Masks:
        generator = torch.Generator().manual_seed(self.options.seed + round(level * 1e6))
        previous = previous or {}
        return {name: magnitude_mask(torch.rand(w.shape, generator=generator), level, previous.get(name))
                for name, w in sorted(weights.items())}
