"""What a fine-tuning recipe is (``fine_tune.recipe``; registers nothing).

A recipe is one file in this package (or a plug-in, ``ELMOC_PLUGINS``) with a class registered
as kind ``"recipe"``: its ``Options`` dataclass is its typed section (the keys of ``fine_tune``
it adds to the shared ones, :class:`elmoc.tasks.fine_tune.FineTuneSettings`; read by
:func:`elmoc.config.typed_options`), and :class:`elmoc.tasks.fine_tune.FineTuner` asks it, by LM
layer ``l`` of ``0`` (the input layer) .. ``top``:

=================================  ===========================================================
``trainable``                      whether the LM trains at all (False: the feature path's LM)
``lm_lr(lm_lr, head_lr)``          the top LM layer's rate (``lm_lr``: the section's, or None)
``layer_divisor(layer, top)``      layer ``l`` trains at the top rate divided by this
``multiplier(total_steps)``        every rate's per-step factor (``step -> float``, 0-based), or None
``lowest_layer(epoch, top)``       the lowest LM layer that trains in ``epoch`` (1-based); a
                                   function of the epoch alone, so a resumed run needs no state
=================================  ===========================================================

The task head (every trainable parameter outside the LM) trains at ``trainer.lr`` from the start.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from elmoc.errors import ConfigError
from elmoc.train.schedule import slanted_triangular  # noqa: F401 (the recipes' schedule; re-exported)


class Recipe:
    """The defaults: every LM layer trains at one rate (``lm_lr``, else the head's), with no
    schedule, from the first epoch."""

    @dataclass(frozen=True)
    class Options:
        """No options of its own."""

    trainable = True

    def __init__(self, options: "Recipe.Options | None" = None):
        self.options = self.Options() if options is None else options

    def lm_lr(self, lm_lr: float | None, head_lr: float) -> float:
        return head_lr if lm_lr is None else lm_lr

    def layer_divisor(self, layer: int, top: int) -> float:
        return 1.0

    def multiplier(self, total_steps: int) -> Callable[[int], float] | None:
        return None

    def lowest_layer(self, epoch: int, top: int) -> int:
        return 0


def linear_warmup_decay(step: int, total: int, warmup_frac: float) -> float:
    """BERT's multiplier of the base rate at ``step`` (0-based) of ``total``: a linear rise from
    0 over the first ``warmup_frac`` of the steps (the first step at 1/warmup, the peak at the
    last warmup step), then a linear decay to zero at ``total``."""
    warmup = max(1, math.floor(total * warmup_frac))
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / (total - warmup + 1))


def check_fraction(value: float, name: str) -> None:
    """A fraction of the run's steps: in (0, 1), else one ConfigError line."""
    if not 0 < value < 1:
        raise ConfigError(f"config {name} must be in (0, 1), got {value!r}")
