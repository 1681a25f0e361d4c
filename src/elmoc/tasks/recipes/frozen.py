"""``frozen``: the LM in eval mode without gradients: the feature path's numbers, computed
in-process (equal within float rounding: other batches, other padding)."""
from __future__ import annotations

from elmoc.registry import register
from elmoc.tasks.recipes.base import Recipe


@register("recipe", "frozen")
class FrozenRecipe(Recipe):
    trainable = False
