"""``ulmfit`` (Howard & Ruder 2018): discriminative learning rates (LM layer ``l`` of ``L`` at
``lm_lr / decay ** (L - l)``; the LM's input layer is layer 0, its encoder layers 1..L), the
slanted triangular schedule over the run's steps and gradual unfreezing (epoch 1 trains the top
LM layer only, each later epoch one more layer down; the task head trains from the start)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from elmoc.registry import register
from elmoc.tasks.recipes.base import Recipe, check_fraction, slanted_triangular


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
        """

        decay: float = 2.6
        slanted: bool = True
        cut_frac: float = 0.1
        ratio: float = 32.0
        gradual_unfreeze: bool = True

        OPTION_RANGES = {"decay": "> 0", "ratio": "> 0"}

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
        return top - epoch + 1 if self.options.gradual_unfreeze else 0
