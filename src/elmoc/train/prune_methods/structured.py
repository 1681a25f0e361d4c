"""``structured``: ``levels`` are the fractions of the encoder's units removed (LSTM cells, or a
Transformer's feed-forward units; :mod:`elmoc.train.structured`): the round's spec names the
smaller size, so its ``model.pt`` is an ordinary, smaller LM (no masks, no ticket)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from elmoc.nn.pruning import Masks
from elmoc.registry import register
from elmoc.train.hooks.base import StartFrom
from elmoc.train.prune_methods.base import Build, PruneMethod, Round
from elmoc.train.structured import shrink, unit_count


@register("prune_method", "structured")
class StructuredPrune(PruneMethod):

    def prepare(self, source: dict[str, Any], build: Build) -> None:
        _, self.units = unit_count(build(source))  # levels are fractions of these

    def round(self, previous: dict[str, Any], level: float, out: Path, masks: Masks | None, build: Build) -> Round:
        spec, state = shrink(build(previous), previous["spec"], max(1, round(self.units * (1 - level))))
        return spec, [StartFrom(state)], None
