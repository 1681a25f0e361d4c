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
  Errors are compared with their numbers masked (:func:`error_pattern`), so a
  collective's "connection closed by peer [127.0.0.1]:40211" is the same error on the
  next attempt's port.

Who writes the record: ``elmoc train`` run on its own (one process) writes its attempt's
outcome itself. Under ``elmoc with-gpus`` (every pretraining job of the workflow, in one
process or under torchrun) rank 0 only announces the attempt (:func:`announce_attempt`,
a file in the job's exit folder) and ``with-gpus`` writes the *job's* outcome once every
process has ended (:func:`record_job_attempt`), from every rank's exit record: a crash
on rank 1, or a worker killed by the kernel (out of memory, a segfault, an NCCL abort)
that wrote no record at all, counts as a crash there too.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Any, Callable

from elmoc.errors import ElmocError
from elmoc.process_tree import EXIT_SIGINT, EXIT_STOPPED, exit_records

log = logging.getLogger(__name__)

LOCK_NAME = ".train.lock"
ATTEMPTS_NAME = "attempts.jsonl"
EXIT_BUSY = 73  # os.EX_CANTCREAT: another trainer writes this output folder
ANNOUNCE_NAME = "attempt.json"  # in the job's exit folder: where with-gpus records the outcome
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
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                # a file system without flock (Lustre mounted without -o flock, some NFS):
                # train unguarded rather than fail every attempt
                log.warning("%s: cannot lock (%s); this file system has no flock, so a second trainer"
                            " on this folder would not be refused: make sure only one runs", self.path,
                            e.strerror or e)
                self.fd = fd
                return self
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


def error_pattern(error: str | None) -> str:
    """``error`` with every number masked: what stays the same when a crash repeats
    (ports, addresses, pids, sizes and times change from one attempt to the next)."""
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "#", error or "")


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
        if a.get("exit") == b.get("exit") == CRASHED and error_pattern(a.get("error")) == error_pattern(b.get("error")) \
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as e:  # a full disk: the command's own error (what survived, what to do) is the one
            # that counts; an append failing here must not replace it with a line naming no file
            log.warning("%s: could not record this attempt (%s)", self.path, e.strerror or e)


def announce_attempt(exit_dir: str | Path, log_: AttemptLog) -> None:
    """Tell ``elmoc with-gpus`` (whose exit folder is ``exit_dir``) which attempt log the
    job's outcome goes to; written by rank 0 once :meth:`AttemptLog.check` let it train."""
    record = {"log": str(log_.path.resolve()), "spec": log_.fingerprint}
    tmp = Path(exit_dir) / f".{ANNOUNCE_NAME}.tmp"
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, Path(exit_dir) / ANNOUNCE_NAME)


def job_outcome(status: int, ranks: list[dict[str, Any]]) -> tuple[str, str]:
    """How a job ended, from its status (:func:`elmoc.process_tree.job_status`) and the
    exit records its processes wrote: ``(exit kind, error)``.

    A crash names every rank that did not end cleanly: its error line, or "ended without
    an exit record" for a process killed before it could write one (the kernel's OOM
    killer, a segfault, an NCCL abort).
    """
    if status == 0:
        return DONE, ""
    if status in (EXIT_STOPPED, EXIT_SIGINT):
        return STOPPED, "interrupted" if status == EXIT_SIGINT else ""
    world = max([int(r.get("world_size", 1)) for r in ranks] or [1])
    by_rank = {int(r.get("rank", 0)): r for r in ranks}
    # a node of a multi-node job (elmoc.multinode) has the records of its own workers only:
    # torchrun numbers them group_rank * local_world_size + local rank
    local = max([int(r.get("local_world_size", world)) for r in ranks] or [world])
    first = int(ranks[0].get("group_rank", 0)) * local if ranks and local < world else 0
    parts = []
    for rank in range(first, first + min(local, world)):
        who = f"rank {rank}" if world > 1 else "the process"
        r = by_rank.get(rank)
        if r is None:
            parts.append(f"{who} ended without an exit record (killed, out of memory or crashed in native code)")
        elif int(r.get("status", 1)) not in (0, EXIT_STOPPED):
            reason = r.get("reason") or f"exit status {r.get('status')}"
            parts.append(f"rank {rank}: {reason}" if world > 1 else reason)
    return CRASHED, "; ".join(parts) or f"the launcher exited {status}"


def checkpoint_step(out_dir: str | Path) -> int | None:
    """The step of ``out_dir``'s checkpoint.pt (metadata only, memory-mapped), or None: an LM's
    (``elmoc train``) or a downstream task run's (``elmoc task``).  Without one, nothing heavy is
    imported: ``elmoc with-gpus`` asks after every job it ran."""
    path = Path(out_dir) / "checkpoint.pt"  # = elmoc.train.checkpoint.CHECKPOINT (tests/core/test_cli_startup.py)
    if not path.is_file():
        return None
    from elmoc.model_file import FORMAT, TASK_FORMAT, load_checkpoint

    try:
        return int(load_checkpoint(path, mmap=True, formats=(FORMAT, TASK_FORMAT))["step"])
    except Exception:  # noqa: BLE001 (unreadable or foreign: the resume says why; here it is "no step")
        return None


def record_job_attempt(exit_dir: str | Path, status: int, checkpoint_step: Callable[[Path], int | None]) -> None:
    """Append the job's outcome to the attempt log rank 0 announced in ``exit_dir``
    (nothing when none was announced: a refused or non-training command).

    Args:
        exit_dir: the job's exit folder (rank records ``rank<N>.json`` and the announcement).
        status: the job's exit status.
        checkpoint_step: reads the step of an output folder's checkpoint (None: none).
    """
    exit_dir = Path(exit_dir)
    try:
        announced = json.loads((exit_dir / ANNOUNCE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    kind, error = job_outcome(status, exit_records(exit_dir) or [])
    log_path = Path(announced["log"])
    attempts = AttemptLog(log_path.parent, lambda: checkpoint_step(log_path.parent), announced["spec"])
    attempts.record(kind, status, error)
