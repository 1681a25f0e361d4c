"""Give each job of a workflow its own GPUs on a shared machine.

Snakemake counts GPUs (``resources: gpu=N`` against ``--resources gpu=M``) but never
sets ``CUDA_VISIBLE_DEVICES``, so every job would start on GPU 0. ``elmoc with-gpus N
-- CMD ...`` picks N free devices, exports them in ``CUDA_VISIBLE_DEVICES`` and runs
CMD, so ``cuda`` (= ``cuda:0``) inside CMD is the job's first own device and
``torchrun --nproc-per-node N`` spreads its ranks over exactly those N.

Slots are lock files, one per device, in a folder every job shares (the workflow uses
``.snakemake/gpu-slots`` in its working directory; point several workflows at one
folder to keep them apart too). A job takes its slots with ``fcntl.flock``. ``with-gpus``
stays the parent of CMD (:func:`elmoc.process_tree.run_tree`): it forwards stop signals
to every process of CMD's tree and holds the slots until the **last** process of that
tree has exited (torchrun's workers included, even when the agent itself was killed);
CMD inherits the locked descriptors too, so the slots stay taken if ``with-gpus`` itself
is killed. The kernel drops a flock lock when the last descriptor of the file closes,
so slots are freed however the job ends (exit, crash, SIGKILL). A job that finds too
few free slots waits for them. A short guard lock makes "take N slots" atomic, so two
jobs never split the devices between them and both wait forever.

The devices on offer are the entries of ``CUDA_VISIBLE_DEVICES`` when it is set (so a
user can restrict a workflow to some GPUs, and tests can fake a 4-GPU machine with
``CUDA_VISIBLE_DEVICES=0,1,2,3``), otherwise ``torch.cuda.device_count()`` indices.
Inside a SLURM job (``SLURM_JOB_ID`` set) whose own allocation is exactly the N GPUs
asked for (the SLURM executor: one SLURM job per Snakemake job) the environment passes
through. Inside a larger allocation (``salloc --gpus=4`` and then ``snakemake
--resources gpu=4``: several Snakemake jobs in one SLURM job) the jobs share the
allocation's devices through slots in a folder keyed by host and SLURM job id. A job
asking for 0 GPUs gets ``CUDA_VISIBLE_DEVICES=""``, so it cannot touch a device another
job owns.
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Mapping, Sequence

from elmoc.errors import ConfigError

log = logging.getLogger(__name__)

GUARD = "allocator.lock"


def visible_devices(environ: Mapping[str, str] | None = None) -> list[str]:
    """Device ids on offer: ``CUDA_VISIBLE_DEVICES`` entries (indices or UUIDs), else
    ``0 .. torch.cuda.device_count()-1``."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        return [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def in_slurm_job(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return bool(environ.get("SLURM_JOB_ID"))


def slurm_gpus_allocated(environ: Mapping[str, str]) -> int | None:
    """GPUs SLURM gave this job on this node: ``SLURM_GPUS_ON_NODE``, else the entries of
    ``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS``, else ``SLURM_GPUS`` (``[type:]count``); None
    when SLURM says nothing (then the visible devices count)."""
    if environ.get("SLURM_GPUS_ON_NODE", "").strip().isdigit():
        return int(environ["SLURM_GPUS_ON_NODE"])
    for key in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        if environ.get(key, "").strip():
            return len([d for d in environ[key].split(",") if d.strip()])
    count = environ.get("SLURM_GPUS", "").strip().rsplit(":", 1)[-1]
    return int(count) if count.isdigit() else None


def slurm_lock_dir(lock_dir: str | Path, environ: Mapping[str, str]) -> Path:
    """Slot folder for the jobs that share one SLURM allocation on this host."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", environ.get("SLURMD_NODENAME") or socket.gethostname())
    return Path(lock_dir) / f"slurm-{host}-{re.sub(r'[^A-Za-z0-9_.-]', '_', environ['SLURM_JOB_ID'])}"


class GpuSlots:
    """Lock-file slots for ``devices`` in ``lock_dir``.

    Args:
        lock_dir: folder shared by every job that competes for these devices.
        devices: device ids (``CUDA_VISIBLE_DEVICES`` entries).
    """

    def __init__(self, lock_dir: str | Path, devices: Sequence[str]):
        self.lock_dir = Path(lock_dir)
        self.devices = list(devices)

    def _slot_path(self, device: str) -> Path:
        return self.lock_dir / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.lock"

    def try_acquire(self, n: int) -> list[tuple[str, int]] | None:
        """Take ``n`` free slots at once: ``[(device, locked fd), ...]``, or None (nothing
        taken) when fewer than ``n`` are free. Close the fds (or end the process) to free them."""
        if n > len(self.devices):
            raise ConfigError(
                f"a job asks for {n} GPU(s) but this machine offers {len(self.devices)}"
                f" ({'CUDA_VISIBLE_DEVICES=' + ','.join(self.devices) if self.devices else 'no CUDA device visible'});"
                " lower the GPU counts under `resources:` in the config, or run on a machine with more GPUs"
            )
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        guard = os.open(self.lock_dir / GUARD, os.O_RDWR | os.O_CREAT, 0o666)
        taken: list[tuple[str, int]] = []
        try:
            fcntl.flock(guard, fcntl.LOCK_EX)
            for device in self.devices:
                if len(taken) == n:
                    break
                fd = os.open(self._slot_path(device), os.O_RDWR | os.O_CREAT, 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                taken.append((device, fd))
            if len(taken) < n:
                for _, fd in taken:
                    os.close(fd)
                return None
            return taken
        finally:
            os.close(guard)  # closing drops the guard lock

    def acquire(self, n: int, poll_seconds: float = 1.0) -> list[tuple[str, int]]:
        """Like :meth:`try_acquire`, but wait until ``n`` slots are free."""
        waited = None
        while True:
            taken = self.try_acquire(n)
            if taken is not None:
                if waited is not None:
                    log.info("got GPU(s) %s after waiting %.0f s", ",".join(d for d, _ in taken), time.monotonic() - waited)
                return taken
            if waited is None:
                waited = time.monotonic()
                log.info("waiting for %d free GPU(s) of %s (slots in %s)", n, ",".join(self.devices), self.lock_dir)
            time.sleep(poll_seconds)


def job_environment(n: int, lock_dir: str | Path,
                    environ: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[int]]:
    """The environment for a job that needs ``n`` GPUs, and the locked slot fds it must
    keep open while it runs (empty when nothing is locked: ``n == 0``, or a SLURM job
    whose own allocation is exactly ``n`` GPUs)."""
    environ = dict(os.environ if environ is None else environ)
    if n < 0:
        raise ConfigError(f"the number of GPUs must be >= 0, got {n}")
    if n == 0:
        environ["CUDA_VISIBLE_DEVICES"] = ""
        return environ, []
    offered = visible_devices(environ)
    if in_slurm_job(environ):
        if len(offered) < n:
            raise ConfigError(
                f"this SLURM job asks for {n} GPU(s) but sees {len(offered)}"
                f" (CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES', 'unset')});"
                " check the rule's `gpu` resource and the partition's GRES"
            )
        allocated = slurm_gpus_allocated(environ)
        if (len(offered) if allocated is None else allocated) == n:
            return environ, []  # the job's own allocation (the SLURM executor)
        lock_dir = slurm_lock_dir(lock_dir, environ)  # jobs sharing one allocation
    taken = GpuSlots(lock_dir, offered).acquire(n)
    environ["CUDA_VISIBLE_DEVICES"] = ",".join(device for device, _ in taken)
    log.info("CUDA_VISIBLE_DEVICES=%s", environ["CUDA_VISIBLE_DEVICES"])
    return environ, [fd for _, fd in taken]


def run_with_gpus(n: int, command: Sequence[str], lock_dir: str | Path, grace_s: float = 600.0,
                  on_exit=None) -> int:
    """Run ``command`` with ``n`` GPUs of its own and return the job's exit status; the
    slots are freed only after every process of the command's tree has exited
    (:func:`elmoc.process_tree.run_tree`, which calls ``on_exit(exit folder, status)``)."""
    from elmoc.process_tree import run_tree

    if not command:
        raise ConfigError("no command given: elmoc with-gpus N -- COMMAND [ARGS...]")
    environ, fds = job_environment(n, lock_dir)
    try:
        return run_tree(command, environ, pass_fds=fds, grace_s=grace_s, on_exit=on_exit)
    finally:
        for fd in fds:
            os.close(fd)  # the slots are free once the command's copies are closed too


def resolve_device(device):
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (cuda when available) -> ``torch.device``;
    a CUDA device without CUDA is a ConfigError (one line)."""
    import torch

    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"--device must be cpu, cuda, cuda:N or auto, got {device!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {device} asked for, but CUDA is not available here; use --device cpu")
    return device


def check_device(device: str) -> str:
    """``--device`` as a command passes it on: ``auto`` becomes ``cuda`` or ``cpu``; a malformed
    name, or a CUDA device without CUDA, is a ConfigError (one line)."""
    resolved = resolve_device(device)
    return str(resolved) if str(device) == "auto" else str(device)
