"""``ulmfit`` (Howard & Ruder 2018): discriminative learning rates (LM layer ``l`` of ``L`` at
``lm_lr / decay ** (L - l)``; the LM's input layer is layer 0, its encoder layers 1..L), the
slanted triangular schedule over the run's steps and gradual unfreezing.

Gradual unfreezing (ULMFiT section 3.3: "We first unfreeze the last layer and fine-tune all unfrozen
layers for one epoch. We then unfreeze the next lower frozen layer and repeat"): the model ULMFiT
unfreezes is the LM with the classifier appended, whose last layer is that classifier.  Here the
classifier is the task model on the LM's layers (its head), so by default (``first_unfrozen:
head``) epoch 1 trains the head alone, epoch 2 the head and the top LM layer L, epoch 3 down to
layer L - 1, and so on.  ``first_unfrozen: top_layer`` is the former order (epoch 1 trains the
head and the top LM layer, each later epoch one more layer down)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from elmoc.registry import register
from elmoc.tasks.recipes.base import Recipe, check_fraction, slanted_triangular


# gradual unfreezing: the number of LM layers (counted from the top) that train in epoch 1
FIRST_UNFROZEN = {"head": 0, "top_layer": 1}


@register("recipe", "ulmfit")
class UlmfitRecipe(Recipe):

    @dataclass(frozen=True)
    class Options:
        """Attributes:
            decay: the discriminative factor (layer l at lm_lr / decay^(L-l)).
            slanted: the slanted triangular learning rate.
            cut_frac: the fraction of the run's steps spent increasing the rate.
            ratio: how much smaller the lowest rate is than the peak.
            gradual_unfreeze: unfreeze one LM layer per epoch from the top.
            first_unfrozen: what trains in epoch 1 under gradual unfreezing: ``head`` (the task
                head alone, ULMFiT section 3.3's "last layer"), or ``top_layer`` (the head and the
                top LM layer: elmoc's order before issue 47).
        """

        decay: float = 2.6
        slanted: bool = True
        cut_frac: float = 0.1
        ratio: float = 32.0
        gradual_unfreeze: bool = True
        first_unfrozen: str = "head"

        OPTION_RANGES = {"decay": "> 0", "ratio": "> 0"}
        CHOICES = {"first_unfrozen": tuple(FIRST_UNFROZEN)}

        def check(self, name: str) -> None:
            check_fraction(self.cut_frac, f"{name}.cut_frac")

    def layer_divisor(self, layer: int, top: int) -> float:
        return self.options.decay ** (top - layer)

    def multiplier(self, total_steps: int) -> Callable[[int], float] | None:
        o = self.options
        if not o.slanted:
            return None
        return lambda step: slanted_triangular(step, total_steps, o.cut_frac, o.ratio)

    def lowest_layer(self, epoch: int, top: int) -> int:
        if not self.options.gradual_unfreeze:
            return 0
        return top + 1 - (epoch - 1) - FIRST_UNFROZEN[self.options.first_unfrozen]
