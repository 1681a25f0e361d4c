"""``full_constant`` (elmoc's ``full`` before issue 47): every LM layer at ``lm_lr`` (None:
``trainer.lr``) from the first step, no schedule: the defaults of :class:`Recipe`."""
from __future__ import annotations

from elmoc.registry import register
from elmoc.tasks.recipes.base import Recipe


@register("recipe", "full_constant")
class FullConstantRecipe(Recipe):
    pass
