"""One trainer per output folder, and the record of its attempts.

A pretraining job is retried many times (the paper config: 30 retries of 24 h jobs),
and after a preemption a retry may start while the killed job's processes still exit.
Two guards live in the output folder:

* :class:`OutputLock`: ``<output-dir>/.train.lock``, an ``flock`` the writing process
  (rank 0) holds for as long as it lives. A second trainer on the same folder is refused
  at once with one line naming the holder (:class:`OutputFolderBusy`, exit status
  :data:`EXIT_BUSY`), so two trainers never write one checkpoint.
* :class:`AttemptLog`: ``<output-dir>/attempts.jsonl``, one line per finished attempt
  (how it ended: done, stopped, crashed; the error line; the checkpoint step then).
  When the last two attempts crashed with the same error at the same checkpoint step
  and the checkpoint has not moved since, a new attempt is refused at once
  (:meth:`AttemptLog.check`): the remaining retries then each end in a second instead
  of spending a day on the same crash. Deleting the file (after fixing the cause) clears it.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable

from elmoc.errors import ElmocError

LOCK_NAME = ".train.lock"
ATTEMPTS_NAME = "attempts.jsonl"
EXIT_BUSY = 73  # os.EX_CANTCREAT: another trainer writes this output folder
DONE, STOPPED, CRASHED = "done", "stopped", "crashed"


class OutputFolderBusy(ElmocError):
    """Another trainer holds the output folder's lock."""

    exit_status = EXIT_BUSY


class RepeatedCrash(ElmocError):
    """The last attempts crashed the same way without progress: retrying is pointless."""


class OutputLock:
    """``flock`` on ``<out_dir>/.train.lock``, held until :meth:`release` or process exit.

    Args:
        out_dir: the training output folder (created if missing).
    """

    def __init__(self, out_dir: str | Path):
        self.path = Path(out_dir) / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> "OutputLock":
        """Take the lock, or raise :class:`OutputFolderBusy` (one line: who holds it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "an unknown process"
            os.close(fd)
            raise OutputFolderBusy(
                f"{self.path.parent} is being written by another trainer ({holder}); wait for it to end, or stop it,"
                " before training into this folder again"
            ) from None
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {stamp}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def spec_fingerprint(*parts: str) -> str:
    """A short hash of what an attempt trains (the spec text and overriding flags)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def error_line(exc: BaseException) -> str:
    """The first line of an exception's message, with its type for non-elmoc errors."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text if isinstance(exc, ElmocError) else f"{type(exc).__name__}: {text}".rstrip(": ")


class AttemptLog:
    """``<out_dir>/attempts.jsonl``: one record per finished training attempt.

    Args:
        out_dir: the training output folder.
        checkpoint_step: reads the step of the folder's checkpoint (None: none there).
        fingerprint: what is trained (:func:`spec_fingerprint`); attempts of another
            spec do not count.
    """

    def __init__(self, out_dir: str | Path, checkpoint_step: Callable[[], int | None], fingerprint: str):
        self.path = Path(out_dir) / ATTEMPTS_NAME
        self.checkpoint_step = checkpoint_step
        self.fingerprint = fingerprint

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash mid-write
            if isinstance(record, dict):
                out.append(record)
        return out

    def check(self) -> None:
        """Raise :class:`RepeatedCrash` when the last two attempts of this spec crashed
        with the same error at the same checkpoint step, and the checkpoint is still there."""
        mine = [r for r in self.records() if r.get("spec") == self.fingerprint]
        if len(mine) < 2:
            return
        a, b = mine[-2:]
        if a.get("exit") == b.get("exit") == CRASHED and a.get("error") == b.get("error") \
                and a.get("step") == b.get("step") == self.checkpoint_step():
            where = "before the first checkpoint" if b.get("step") is None else f"at checkpoint step {b['step']}"
            raise RepeatedCrash(
                f"the last two attempts crashed {where} with the same error ({b.get('error')}), so a retry would"
                f" too; fix the cause, then delete {self.path} to train again"
            )

    def record(self, exit_kind: str, status: int, error: str = "") -> None:
        """Append this attempt's outcome (one line; a partial line is skipped when read)."""
        record = {"exit": exit_kind, "status": int(status), "error": error, "step": self.checkpoint_step(),
                  "spec": self.fingerprint, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid(),
                  "host": socket.gethostname()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
