"""Run a job's command as one process tree: signals reach every process, the job ends
when the last process ends, and its exit status tells a stop from a crash.

``elmoc with-gpus`` runs the job's command (``elmoc train``, or the ``torchrun`` agent
with its workers) through :func:`run_tree`:

* the command runs as a child in a process group of its own; SIGTERM, SIGINT, SIGUSR1
  and SIGHUP sent to the job are forwarded to that group **and** to every other process
  of the tree (torchrun starts each worker in a session of its own, out of the agent's
  group). A trainer only sets a flag on these, so a signal that arrives twice (from the
  scheduler, and forwarded) changes nothing;
* this process is a *child subreaper* (Linux): a worker whose parent dies is reparented
  here, not to init, and :func:`run_tree` returns only when every process of the tree
  has exited, so the GPU slots the caller holds are freed after the last worker, never
  while one still writes. Processes left behind by the command get ``grace_s`` seconds
  to end, then SIGKILL;
* ``elmoc train`` writes its exit status into the folder named by :data:`EXIT_DIR_ENV`
  (:func:`record_exit`), and :func:`job_status` maps "every worker stopped on a signal
  (75)" to 75, whatever the torchrun agent returned (it exits 1 for any worker's non-zero
  status), so a stop reads as a stop and a crash as a crash.

Workers also ask the kernel for SIGTERM when their parent dies (:func:`die_with_parent`):
a killed agent's workers stop after their step and save, instead of running on. The
command itself gets the same from ``with-gpus``: when ``with-gpus`` is SIGKILLed (Snakemake
killed hard, a job step cancelled), its command (the agent, or a single trainer) is sent
SIGTERM and passes it on, so no part of the job trains on unseen; the GPU slot locks,
which the command's processes hold too, are freed only when the last of them exits.
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from elmoc.io.console import console_fds  # the workflow console's descriptor, passed on to the job

log = logging.getLogger(__name__)

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)
EXIT_DIR_ENV = "ELMOC_EXIT_DIR"
EXIT_STOPPED = 75  # os.EX_TEMPFAIL: `elmoc train` saved a checkpoint on a stop signal or deadline
EXIT_SIGINT = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C
# signals the torchrun agent catches and passes to its workers (SLURM's --signal=USR1@... included)
TORCHRUN_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """Linux ``prctl(option, value)``; False (nothing done) on other systems or on failure."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> bool:
    """Have the kernel send ``sig`` to this process when its parent exits (Linux
    ``PR_SET_PDEATHSIG``; elsewhere nothing happens). Returns whether it is armed."""
    return _prctl(_PR_SET_PDEATHSIG, int(sig))


def ignore_stop_signal_in_slurm_job(environ: Mapping[str, str] | None = None) -> bool:
    """In a SLURM job (``SLURM_JOB_ID`` set), ignore SIGUSR1 in this process; the commands
    it starts inherit that. Returns whether it did so.

    SLURM's ``--signal=USR1@N`` (and ``scancel --signal=USR1``) reaches every process of a
    job step: the step's own Snakemake (the task ``srun`` started), the rule's shell,
    ``elmoc with-gpus`` and the trainers. Snakemake and the shell have no handler for it,
    and its default action ends them. The step then ends by the signal while the trainer
    is still saving, and SLURM's process tracking may kill what is left of it (cgroup). A
    job whose command had just finished is reported FAILED, and the Snakemake that
    submitted it deletes the finished output and runs the whole job again. Ignored here,
    the signal is left to the processes that handle it: ``with-gpus`` forwards it, a
    trainer stops after its step, saves and exits 75. The rule's shell inherits the
    ignore through ``exec`` and cannot undo it. A Python command resets it by installing
    its own handler, as ``with-gpus`` and the trainers do.
    """
    environ = os.environ if environ is None else environ
    if not environ.get("SLURM_JOB_ID"):
        return False
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    return True


def torchrun_options(processes: int, shutdown_timeout_s: int) -> list[str]:
    """``torch.distributed.run`` options for ``processes`` workers on this node.

    Args:
        processes: workers (one per GPU, or gloo processes on CPU).
        shutdown_timeout_s: how long the agent waits for its workers to save and exit
            after a stop signal before it SIGKILLs them (torch's default is 30 s, less
            than a large checkpoint write).
    """
    return ["--standalone", f"--signals-to-handle={TORCHRUN_SIGNALS}", f"--shutdown-timeout={int(shutdown_timeout_s)}",
            f"--nproc-per-node={int(processes)}"]


def record_exit(status: int, reason: str = "", environ: Mapping[str, str] | None = None) -> None:
    """Write this process's exit status for :func:`job_status` (when :data:`EXIT_DIR_ENV`
    is set: the process runs under ``elmoc with-gpus``). One file per rank."""
    environ = os.environ if environ is None else environ
    folder = environ.get(EXIT_DIR_ENV)
    if not folder:
        return
    rank = environ.get("RANK", "0")
    world = int(environ.get("WORLD_SIZE", "1"))
    # a node of a multi-node job sees its own workers' records only (torchrun: LOCAL_WORLD_SIZE, GROUP_RANK)
    record = {"status": int(status), "reason": reason, "rank": int(rank), "world_size": world,
              "local_world_size": int(environ.get("LOCAL_WORLD_SIZE", world)),
              "group_rank": int(environ.get("GROUP_RANK", "0")), "pid": os.getpid()}
    try:
        tmp = Path(folder) / f".rank{rank}.json.tmp"
        tmp.write_text(json.dumps(record))
        os.replace(tmp, Path(folder) / f"rank{rank}.json")
    except OSError as e:  # the job's status then falls back to the command's own
        log.warning("cannot record the exit status in %s: %s", folder, e)


def exit_records(exit_dir: str | Path) -> list[dict] | None:
    """The exit records (:func:`record_exit`) of a job's processes, in rank order; None
    when one of them cannot be read (a process died while writing it)."""
    records = []
    for path in sorted(Path(exit_dir).glob("rank*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None
    return records


def job_status(command_status: int, exit_dir: str | Path) -> int:
    """The job's exit status: 0 when the command succeeded; 75 when every worker of the
    job (of this node, for a multi-node job) recorded 75 (stopped and saved); else the
    command's status (non-zero)."""
    if command_status == 0:
        return 0
    records = exit_records(exit_dir)
    if records and all(r.get("status") == EXIT_STOPPED for r in records) \
            and len(records) >= max(int(r.get("local_world_size", r.get("world_size", 1))) for r in records):
        return EXIT_STOPPED
    return command_status


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc; [] elsewhere)."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) "
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(name))
    return found


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` in the process tree (Linux /proc)."""
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _signal_tree(child: subprocess.Popen, sig: int) -> None:
    """``sig`` to the command's process group and to every other process of the tree."""
    try:
        os.killpg(child.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in descendants(os.getpid()):
        try:
            if os.getpgid(pid) != child.pid:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap_all(grace_s: float) -> None:
    """Wait for every remaining child (orphans reparented to this subreaper); SIGKILL
    those still running ``grace_s`` seconds after the command ended."""
    deadline = time.monotonic() + grace_s
    killed = False
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        if not killed and time.monotonic() > deadline:
            left = descendants(os.getpid())
            log.warning("processes %s outlived the command by %.0f s: killing them", left, grace_s)
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed = True
        time.sleep(0.1)


def _arm_parent_death_signal() -> None:
    """In the command's process, before it runs: SIGTERM when ``with-gpus`` dies."""
    die_with_parent(signal.SIGTERM)


def run_tree(command: Sequence[str], environ: Mapping[str, str], *, pass_fds: Sequence[int] = (),
             grace_s: float = 600.0, on_exit: Callable[[Path, int], None] | None = None) -> int:
    """Run ``command`` as described in the module docstring; returns the job's status.

    Args:
        command: program and arguments.
        environ: its environment (:data:`EXIT_DIR_ENV` is added).
        pass_fds: descriptors the command inherits (the GPU slot locks: also held by
            the command, so they stay taken even if this process is killed).
        grace_s: how long processes left behind by the command may run on before SIGKILL.
        on_exit: called with (exit folder, job status) after every process has ended,
            before the folder is removed (``with-gpus`` records the attempt from it).

    Returns:
        0, 75 (every worker stopped and saved), 128 + N for a command killed by signal
        N, else the command's own status.
    """
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    exit_dir = tempfile.mkdtemp(prefix="elmoc-exit-")
    env = {**environ, EXIT_DIR_ENV: exit_dir}
    previous = {}
    child = None
    try:
        try:
            child = subprocess.Popen(list(command), env=env, pass_fds=tuple(pass_fds) + console_fds(), process_group=0,
                                     preexec_fn=_arm_parent_death_signal)
        except OSError as e:
            from elmoc.errors import ConfigError

            raise ConfigError(f"cannot run {command[0]!r}: {e.strerror}") from None

        def forward(signum, frame):
            log.info("%s received: passing it to the job's processes", signal.Signals(signum).name)
            _signal_tree(child, signum)

        for sig in FORWARDED:
            previous[sig] = signal.signal(sig, forward)
        status = child.wait()
        _reap_all(grace_s)
        if status < 0:
            status = 128 - status
        status = job_status(status, exit_dir)
        if on_exit is not None:
            try:
                on_exit(Path(exit_dir), status)
            except Exception as e:  # a record not written must not change the job's status
                log.warning("cannot record the job's outcome: %s", e)
        return status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(exit_dir, ignore_errors=True)
