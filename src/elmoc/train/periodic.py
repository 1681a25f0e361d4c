"""When the trainer saves ``checkpoint.pt`` on its own: every N steps and/or every M minutes.

``train.checkpoint_every`` (steps) is the same on every process, so every process
knows when it is due.  ``train.checkpoint_minutes`` (wall time) is measured on rank 0
only (:class:`CheckpointTimer`) and agreed through the trainer's one per-step
collective (:meth:`elmoc.train.signals.StopSignals.decide`), so all processes save
after the same step.  A time-based checkpoint bounds the work a lost signal or a
SIGKILL can cost when steps are slow (a paper-size step can take seconds, and 1000
steps an hour).
"""
from __future__ import annotations

from time import monotonic


class CheckpointTimer:
    """Says when ``minutes`` of wall time have passed since the last checkpoint.

    Args:
        minutes: the period (None or 0: never due, step-based checkpoints only).
    """

    def __init__(self, minutes: float | None):
        if minutes is not None and minutes < 0:
            raise ValueError(f"train.checkpoint_minutes must be >= 0, got {minutes}")
        self.minutes = minutes
        self.last = monotonic()

    def due(self) -> bool:
        """Whether a checkpoint is due (``minutes`` passed since :meth:`saved` or the start)."""
        return bool(self.minutes) and monotonic() - self.last >= self.minutes * 60.0

    def saved(self) -> None:
        """Restart the period (call after every checkpoint, whatever triggered it)."""
        self.last = monotonic()
