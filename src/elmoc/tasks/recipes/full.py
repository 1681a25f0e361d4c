"""``full``: BERT's fine-tuning (Devlin et al. 2019, section 4 and appendix A.3): every LM layer
at one small rate ``lm_lr`` (None: :data:`BERT_LM_LR`, chosen on SST-5 dev from BERT's grid
{5e-5, 3e-5, 2e-5}, unscaled: docs/downstream.md), the task head at ``trainer.lr`` [inferred:
BERT's head is one linear layer, elmoc's heads are networks trained from scratch], and every rate
following a linear warmup over the first ``warmup_frac`` of the run's steps (0.1, BERT's released
fine-tuning code) then a linear decay to zero."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from elmoc.registry import register
from elmoc.tasks.recipes.base import Recipe, check_fraction, linear_warmup_decay

BERT_LM_LR = 3e-5  # the LM's rate when lm_lr is None: one of Devlin et al.'s {5e-5, 3e-5, 2e-5}


@register("recipe", "full")
class FullRecipe(Recipe):

    @dataclass(frozen=True)
    class Options:
        """Attributes:
            warmup_frac: the fraction of the run's steps of the linear warmup (BERT: 0.1).
        """

        warmup_frac: float = 0.1

        def check(self, name: str) -> None:
            check_fraction(self.warmup_frac, f"{name}.warmup_frac")

    def lm_lr(self, lm_lr: float | None, head_lr: float) -> float:
        return BERT_LM_LR if lm_lr is None else lm_lr

    def multiplier(self, total_steps: int) -> Callable[[int], float] | None:
        warmup_frac = self.options.warmup_frac
        return lambda step: linear_warmup_decay(step, total_steps, warmup_frac)
