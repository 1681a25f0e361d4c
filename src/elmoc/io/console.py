"""Progress lines on the workflow's console, one per job every 30 s (issue 52).

Snakemake sends each job's output into its log file (``> {log} 2>&1``), so a long job's own
log lines never reach the person watching ``make demo``. The Snakefile's shell prefix keeps
the console open for every job as file descriptor 3 (``exec 3>&2``) and names it in
``ELMOC_PROGRESS_FD`` as ``3:<device>:<inode>`` (:func:`console_env`): a process that did not
inherit the descriptor (a launcher closed it) and opened another file as 3 never writes there.
Launchers of elmoc (``elmoc with-gpus``) pass it on (:func:`console_fds`). The ranks of a
``torch.distributed.run`` job do not get it (the agent starts them with every descriptor but 0-2
closed): a process whose descriptor is gone opens its parent's, ``/proc/<parent>/fd/<fd>``, when
that names the same console (the agent keeps it open), so rank 0 of a torchrun job writes the same
lines (:func:`parent_console`). :class:`ConsoleProgress` writes a short line there (``[train
elmo-c/forward] step 120/300, loss 0.4123, ETA 1.2 min``) at most every
``ELMOC_PROGRESS_SECONDS`` seconds (default 30), besides the full log lines in the log file.
Without ``ELMOC_PROGRESS_FD`` (``elmoc`` run by hand, whose log lines are on stderr anyway)
it writes nothing.
"""
from __future__ import annotations

import os
from time import monotonic
from typing import TextIO

__all__ = ["ConsoleProgress", "FD_ENV", "SECONDS_ENV", "console_env", "console_fds", "eta_text", "parent_console"]

FD_ENV = "ELMOC_PROGRESS_FD"
SECONDS_ENV = "ELMOC_PROGRESS_SECONDS"
DEFAULT_SECONDS = 30.0


def console_env(fd: int) -> str:
    """The ``ELMOC_PROGRESS_FD`` value naming open descriptor ``fd``: ``fd:device:inode``."""
    stat = os.fstat(fd)
    return f"{fd}:{stat.st_dev}:{stat.st_ino}"


def console_fds() -> tuple[int, ...]:
    """The console's descriptor when this process has it (for a launcher's ``pass_fds``), else ()."""
    try:
        fd = int(os.environ.get(FD_ENV, "").split(":")[0])
        return (fd,) if console_env(fd) == os.environ[FD_ENV] else ()
    except (ValueError, OSError):
        return ()


def parent_console() -> TextIO | None:
    """The console ``ELMOC_PROGRESS_FD`` names opened again through the parent process's descriptor
    (``/proc/<parent>/fd/<fd>``, Linux), when it names the same file there: a torchrun rank, whose
    agent holds the console; None otherwise. Opened for appending (a console redirected to a file
    is written at its end)."""
    try:
        fd, device, inode = (int(v) for v in os.environ.get(FD_ENV, "").split(":"))
        path = f"/proc/{os.getppid()}/fd/{fd}"
        stat = os.stat(path)
        if (stat.st_dev, stat.st_ino) != (device, inode):
            return None
        return open(path, "a", buffering=1)
    except (ValueError, OSError):
        return None


def _console() -> TextIO | None:
    """The console stream ``ELMOC_PROGRESS_FD`` names, or None (unset, malformed, closed, or
    the number now names another file, in this process and in its parent)."""
    fds = console_fds()
    if not fds:
        return parent_console()
    try:
        return open(fds[0], "w", buffering=1, closefd=False)
    except OSError:
        return None


def eta_text(seconds: float) -> str:
    """A remaining time, never negative: ``ETA 40 s``, ``ETA 3.5 min``, ``ETA 2.1 h``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"ETA {seconds:.0f} s"
    if seconds < 5400:
        return f"ETA {seconds / 60:.1f} min"
    return f"ETA {seconds / 3600:.1f} h"


class ConsoleProgress:
    """Writes ``[label] text`` to the workflow's console when ``every_s`` seconds passed since
    the start or the last line (``every_s`` None: ``$ELMOC_PROGRESS_SECONDS`` or 30)."""

    def __init__(self, label: str, every_s: float | None = None):
        self.label = label
        self.stream = _console()
        self.every_s = float(os.environ.get(SECONDS_ENV) or DEFAULT_SECONDS) if every_s is None else every_s
        self.last = monotonic()
        self.lines = 0

    def due(self) -> bool:
        """Whether a line is due (and there is a console to write it to)."""
        return self.stream is not None and monotonic() - self.last >= self.every_s

    def write(self, text: str) -> None:
        """``[label] text`` on the console now (nothing without one)."""
        if self.stream is None:
            return
        try:
            self.stream.write(f"[{self.label}] {text}\n")
        except OSError:  # the console went away (snakemake stopped): keep training
            self.stream = None
        self.last = monotonic()
        self.lines += 1
