"""The contract every downstream metric follows (kept here, not in elmoc.tasks, so
metric modules import without pulling in every task model)."""
from __future__ import annotations

from typing import Any


class Metric:
    """Accumulates predictions against the gold labels stored in the batch."""

    def reset(self) -> None:
        raise NotImplementedError

    def update(self, predictions: Any, batch: dict) -> None:
        raise NotImplementedError

    def compute(self) -> dict[str, float]:
        raise NotImplementedError
