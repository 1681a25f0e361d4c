"""A newcomer's fine-tuning recipe in one file: "linear probe, then fine-tune" (Kumar et al. 2022,
LP-FT): the first ``probe_epochs`` epochs train the task head alone on the frozen LM, later epochs
train every LM layer too, at one rate."""
from __future__ import annotations

from dataclasses import dataclass

from elmoc.registry import register
from elmoc.tasks.recipes.base import Recipe


@register("recipe", "linear_probe")
class LinearProbeRecipe(Recipe):

    @dataclass(frozen=True)
    class Options:
        """Attributes:
            probe_epochs: the epochs that train the head alone.
        """

        probe_epochs: int = 1

        OPTION_RANGES = {"probe_epochs": "int > 0"}

    def lowest_layer(self, epoch: int, top: int) -> int:
        return top + 1 if epoch <= self.options.probe_epochs else 0
