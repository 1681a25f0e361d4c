"""Stop training cleanly when the scheduler or the user asks (SIGTERM, SIGUSR1, SIGINT),
or before the job's time limit.

SLURM sends SIGTERM when a job is cancelled or reaches its time limit (and, with
``--signal=USR1@<seconds>``, SIGUSR1 that long before); the job is killed for good
``KillWait`` seconds later.  Inside :class:`StopSignals` those signals only set a flag;
the trainer finishes the step it is in, writes ``checkpoint.pt`` atomically and returns,
and ``elmoc train`` exits with :data:`EXIT_INTERRUPTED` (75, ``EX_TEMPFAIL``: "try
again"), so a rerun of the same command resumes from that checkpoint.

Ctrl-C (SIGINT) is a stop signal too: the first one stops after the step and saves.
Further signals are ignored (under ``torchrun`` a Ctrl-C reaches each worker twice:
from the terminal and forwarded by the agent); the log says how to abort at once
without saving (Ctrl-\\, SIGQUIT, or SIGKILL).

Signals can be lost (a launcher that does not forward them, a lead shorter than a
checkpoint write), so the trainer also stops on its own before the SLURM job's end
time (:class:`Deadline`: ``SLURM_JOB_END_TIME``, else ``squeue``), with
``interrupted = "time-limit"``, exactly as on a signal.

Under ``torchrun`` the signal may reach some processes and not others, or between
two of their steps; :meth:`StopSignals.decide` all-reduces the flags (MAX) once per
step: the signal flag, rank 0's "the time limit is near" and rank 0's "a time-based
checkpoint is due", so every process stops (or saves) after the same step and none is
left waiting in a collective operation.
"""
from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import threading
from datetime import datetime
from types import FrameType
from typing import Callable, TypeVar

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 75  # os.EX_TEMPFAIL
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
TIME_LIMIT = "time-limit"  # RunResult.interrupted when the Deadline, not a signal, stopped the run
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
        name = signal.Signals(signum).name
        if self.received is None:
            self.received = name
            log.warning("%s received: stopping after the current step and saving a checkpoint (to abort at once "
                        "without saving: Ctrl-\\ (SIGQUIT) or kill -9)", name)
        else:
            log.warning("%s received while already stopping: still saving the checkpoint (to abort without "
                        "saving: Ctrl-\\ (SIGQUIT) or kill -9)", name)

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

    def decide(self, distributed: bool = False, device: torch.device | None = None, *, time_up: bool = False,
               checkpoint_due: bool = False) -> tuple[str | None, bool]:
        """This step's agreed decision: (why to stop, or None; whether to save a checkpoint now).

        Args:
            distributed: all-reduce the flags (MAX) over processes: one collective, which
                every process must call once per step.
            device: where the flags tensor lives (the process group's device).
            time_up: this process (rank 0) sees the job's time limit coming (:class:`Deadline`).
            checkpoint_due: this process (rank 0) wants a time-based checkpoint.

        Returns:
            The stop reason (the signal's name, "peer" for a signal another process got,
            :data:`TIME_LIMIT`) or None, and the agreed "save now".
        """
        flags = [1 if self.received else 0, int(time_up), int(checkpoint_due)]
        if distributed:
            tensor = torch.tensor(flags, dtype=torch.int32, device=device)
            dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
            flags = tensor.tolist()
        got_signal, time_flag, save_flag = flags
        if got_signal and self.received is None:
            self.received = "peer"
        reason = self.received if got_signal else TIME_LIMIT if time_flag else None
        return reason, bool(save_flag)


class Deadline:
    """When to stop before the SLURM job's time limit, whether or not a signal comes.

    Args:
        end_time: the job's end time (epoch seconds), None for no limit.
        margin_s: stop once ``now + margin`` passes ``end_time``.  None: the default,
            ``max(300 s, 2 x the longest checkpoint write so far + one step)``, time
            for the step in progress and a save before SLURM kills the job.  0 stops
            at the end time itself (in effect off: SLURM's signal and kill decide).
        source: where ``end_time`` came from (for the log).
    """

    DEFAULT_MARGIN_S = 300.0

    def __init__(self, end_time: float | None = None, margin_s: float | None = None, source: str = ""):
        if margin_s is not None and margin_s < 0:
            raise ValueError(f"the stop margin must be >= 0 seconds, got {margin_s}")
        self.end_time, self.margin_s, self.source = end_time, margin_s, source

    @classmethod
    def from_slurm(cls, margin_s: float | None = None, environ: dict[str, str] | None = None) -> "Deadline":
        """The job's end time from ``SLURM_JOB_END_TIME`` (epoch seconds), or, when only
        ``SLURM_JOB_ID`` is set, from ``squeue -h -j <id> -o %e`` (local time,
        ``SLURM_TIME_FORMAT=standard``).  Outside SLURM: no deadline; a value that cannot
        be read: no deadline and one warning."""
        env = os.environ if environ is None else environ
        text, source = env.get("SLURM_JOB_END_TIME", "").strip(), "SLURM_JOB_END_TIME"
        if not text and env.get("SLURM_JOB_ID"):
            text, source = _squeue_end_time(env["SLURM_JOB_ID"], env), f"squeue -j {env['SLURM_JOB_ID']}"
        if not text:
            return cls(None, margin_s)
        end = _parse_end_time(text)
        if end is None:
            log.warning("cannot read the job's end time from %s (%r): no stop before the time limit unless "
                        "a signal comes", source, text)
            return cls(None, margin_s)
        log.info("the job ends at %s (%s): training stops and saves before then",
                 datetime.fromtimestamp(end).isoformat(timespec="seconds"), source)
        return cls(end, margin_s, source)

    def margin(self, longest_save_s: float = 0.0, step_s: float = 0.0) -> float:
        """Seconds before the end time at which to stop."""
        if self.margin_s is not None:
            return self.margin_s
        return max(self.DEFAULT_MARGIN_S, 2.0 * longest_save_s + step_s)

    def reached(self, now: float, longest_save_s: float = 0.0, step_s: float = 0.0) -> bool:
        """Whether a run at ``now`` (epoch seconds) must stop now to save in time."""
        return self.end_time is not None and now + self.margin(longest_save_s, step_s) >= self.end_time


def _squeue_end_time(job_id: str, env: dict[str, str]) -> str:
    """``squeue``'s end time of a job (empty when squeue fails; the caller warns)."""
    try:
        done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%e"], capture_output=True, text=True,
                              timeout=60, env={**env, "SLURM_TIME_FORMAT": "standard"})
    except (OSError, subprocess.SubprocessError) as e:
        return f"<squeue failed: {e}>"
    if done.returncode != 0:
        return f"<squeue exited {done.returncode}: {done.stderr.strip()[:200]}>"
    return done.stdout.strip()


def _parse_end_time(text: str) -> float | None:
    """Epoch seconds of ``SLURM_JOB_END_TIME`` (a number) or squeue's ``%e`` (local time,
    ``YYYY-MM-DDTHH:MM:SS``); None for anything else (``N/A``, ``Unknown``, errors)."""
    try:
        value = float(text)
        return value if value > 0 else None
    except ValueError:
        pass
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return None


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
