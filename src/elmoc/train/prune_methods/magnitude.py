"""``magnitude``: ``levels`` are sparsities of the encoder's weight matrices (layer-wise, the
smallest surviving weights go; :mod:`elmoc.nn.pruning`); the round's ``mask.pt`` holds the
masks.  The matrices keep their shapes (zeros stored as zeros)."""
from __future__ import annotations

import torch

from elmoc.nn.pruning import Masks, magnitude_masks
from elmoc.registry import register
from elmoc.train.prune_methods.base import MaskMethod


@register("prune_method", "magnitude")
class MagnitudePrune(MaskMethod):

    def choose_masks(self, weights: dict[str, torch.Tensor], level: float, previous: Masks | None) -> Masks:
        return magnitude_masks(weights, level, previous)
