"""Stop training cleanly when the scheduler asks: SIGTERM or SIGUSR1.

SLURM sends SIGTERM when a job is cancelled or reaches its time limit (and, with
``--signal=USR1@<seconds>``, SIGUSR1 that long before); the job is killed for good
``KillWait`` seconds later.  Inside :class:`StopSignals` those signals only set a flag;
the trainer finishes the step it is in, writes ``checkpoint.pt`` atomically and returns,
and ``elmoc train`` exits with :data:`EXIT_INTERRUPTED` (75, ``EX_TEMPFAIL``: "try
again"), so a rerun of the same command resumes from that checkpoint.

Under ``torchrun`` the signal may reach some processes and not others, or between
two of their steps; :meth:`StopSignals.agreed` all-reduces the flag (MAX) once per
step, so every process stops after the same step and none is left waiting in a
collective operation.
"""
from __future__ import annotations

import functools
import logging
import signal
import threading
from types import FrameType
from typing import Callable, TypeVar

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 75  # os.EX_TEMPFAIL
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
T = TypeVar("T")


class StopSignals:
    """Context manager that turns :data:`STOP_SIGNALS` into a "stop after this step" flag.

    Outside the main thread (where Python cannot install handlers) it installs nothing
    and the signals keep their previous effect.  The previous handlers are restored on exit.
    """

    def __init__(self, signals: tuple[signal.Signals, ...] = STOP_SIGNALS):
        self.signals = signals
        self.received: str | None = None  # name of the first stop signal received
        self._previous: dict[signal.Signals, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name
            log.warning("%s received: stopping after the current step and saving a checkpoint", self.received)

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def agreed(self, distributed: bool = False, device: torch.device | None = None) -> bool:
        """True when this process, or with ``distributed`` any process, got a stop signal.

        With ``distributed`` every process must call this once per step (it is a collective).
        """
        if not distributed:
            return self.received is not None
        flag = torch.tensor([1 if self.received else 0], dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stop = bool(flag.item())
        if stop and self.received is None:
            self.received = "peer"  # another process got the signal
        return stop


def stoppable(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorator: run ``fn`` inside :class:`StopSignals`, passed as its ``stop`` argument
    (unless the caller passes one)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs.get("stop") is not None:
            return fn(*args, **kwargs)
        with StopSignals() as stop:
            kwargs["stop"] = stop
            return fn(*args, **kwargs)

    return wrapper
