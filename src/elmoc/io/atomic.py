"""Atomic writes: a file or a directory appears complete or not at all.

Every data stage writes its outputs through these helpers, so an interrupted or
failed run never leaves a half-written file that a later stage (or Snakemake)
would mistake for a finished one.  The temporary lives in the destination's own
directory so that the final ``os.replace`` is a rename on one filesystem.  A writer
holds an ``flock`` on its temporary until it is renamed or deleted, so that the next
run's :func:`elmoc.io.output_paths.remove_stale_temps` removes only the temporaries of
killed runs, never one being written.

A full disk (``ENOSPC``, ``EDQUOT``, or the serializer failure it causes inside
``torch.save``: ``RuntimeError: ... unexpected pos``) while writing is turned into one
:class:`~elmoc.errors.DiskFullError` naming the file and the space left on its
filesystem; the temporary is removed and the previous file is untouched
(:func:`disk_full_as_error`).
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Iterator

from elmoc.errors import DiskFullError

try:
    import fcntl
except ImportError:  # not POSIX: temporaries are not held, and none is ever called stale
    fcntl = None




class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's cancel, ``kill``) raised as an interrupt, so the cleanup of
    the atomic writers runs as for Ctrl-C; the command exits with :attr:`exit_status`."""

    exit_status = 128 + signal.SIGTERM


# set by sigterm_as_interrupt's handler; read before every rename onto a final path
_terminated = threading.Event()


def raise_if_terminated() -> None:
    """Raise :class:`Terminated` if a SIGTERM arrived inside :func:`sigterm_as_interrupt`.

    The handler raises at once, but Python swallows an exception raised while it runs a
    finalizer or a weakref callback ("Exception ignored in ..."), and the work would go
    on to write its output as if no signal had come.  The atomic writers call this
    before they rename a temporary onto its final path, and long loops may call it per
    step, so a swallowed SIGTERM still ends the command with exit 143 and no output.
    """
    if _terminated.is_set():
        raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated` (a KeyboardInterrupt) in the
    main thread, so ``finally``/``except BaseException`` cleanups delete the command's
    temporaries; the signal is also remembered (:func:`raise_if_terminated`) in case the
    exception lands where Python ignores it.  Outside the main thread nothing is
    installed.  The handler before is restored.  While the block runs, a Terminated that
    Python could only report as unraisable is not printed (it is raised later)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        _terminated.set()
        raise Terminated()

    hook_before = sys.unraisablehook

    def _quiet(unraisable):
        # a Terminated that Python could not raise (finalizer, weakref callback) is
        # remembered above and raised at the next rename or step: no "Exception
        # ignored" traceback for it on stderr
        if isinstance(unraisable.exc_value, Terminated):
            return
        hook_before(unraisable)

    _terminated.clear()
    previous = signal.signal(signal.SIGTERM, _raise)
    sys.unraisablehook = _quiet
    try:
        yield
        raise_if_terminated()
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = hook_before
        _terminated.clear()


def hold(fd: int) -> None:
    """Take an exclusive ``flock`` on ``fd`` (a temporary being written): while the
    writer lives, :func:`elmoc.io.output_paths.remove_stale_temps` of another run leaves
    the file alone."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def held_temp(parent: str | Path, prefix: str, suffix: str = "", directory: bool = False) -> tuple[int, str]:
    """A new temporary file (``mkstemp``) or folder (``mkdtemp``) in ``parent``, held
    (:func:`hold`); returns the descriptor holding it (the file's own, read-write; the
    folder's, read-only) and its path. The caller closes the descriptor.

    Another process's :func:`elmoc.io.output_paths.remove_stale_temps` may find the new
    name before it is held and remove it (under its own lock): then the path no longer
    names what this process locked, or the lock is taken, and another name is tried. Two
    jobs starting at once in one cache folder met that window (CI, 2026-11-27).
    """
    for _ in range(100):
        if directory:
            tmp = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=suffix)
            try:
                fd = os.open(tmp, os.O_RDONLY)
            except FileNotFoundError:  # removed by a sweep before it was opened
                continue
        else:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=prefix, suffix=suffix)
        try:
            hold(fd)
            if os.path.samestat(os.fstat(fd), os.stat(tmp)):
                return fd, tmp
        except (BlockingIOError, FileNotFoundError):  # a sweep holds it, or removed it while unheld
            pass
        os.close(fd)
    raise OSError(errno.EAGAIN, f"could not hold a new temporary in {parent}: another process kept removing them")


# torch.save's messages when its writer's file write fails (a full disk gives the first)
_TORCH_WRITE_FAILURES = ("unexpected pos", "PytorchStreamWriter failed", "file write failed")
_SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` is a write failing for want of space: ``ENOSPC``/``EDQUOT``, or
    torch's serializer failure that a full disk causes."""
    if "errno = 28," in str(exc) or "errno = 122," in str(exc):  # HDF5's text (h5py raises it as OSError,
        return isinstance(exc, (OSError, RuntimeError, ValueError))  # RuntimeError or ValueError)
    if isinstance(exc, OSError):
        return (exc.errno in (errno.ENOSPC, errno.EDQUOT)
                or _SHORT_WRITE.search(str(exc)) is not None)  # numpy's tofile: a write cut short
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _TORCH_WRITE_FAILURES)


def free_bytes(path: str | Path) -> int | None:
    """Bytes free to this user on the filesystem of ``path`` (or of its nearest existing parent)."""
    path = Path(path).absolute()
    for candidate in (path, *path.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


@contextlib.contextmanager
def disk_full_as_error(path: str | Path) -> Iterator[None]:
    """Run the block; an out-of-space failure in it (:func:`out_of_space`) becomes one
    :class:`~elmoc.errors.DiskFullError` naming ``path`` and the space left."""
    try:
        yield
    except (OSError, RuntimeError, ValueError) as e:
        if out_of_space(e):
            kept = "its previous version is untouched" if Path(path).exists() else "nothing was written"
            raise DiskFullError(path, free_bytes(path), f"{kept}; free some space and run the command again") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def public_mode(path: str | Path, directory: bool = False) -> None:
    """Give a mkstemp/mkdtemp result (0600/0700) the usual umask-based mode."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temp file beside ``path``; rename it onto ``path`` when the block succeeds.

    On any exception the temp file is removed and ``path`` is untouched.
    """
    with atomic_path(path) as tmp:
        if "b" in mode:
            f = open(tmp, mode)
        else:
            f = open(tmp, mode, encoding=encoding, newline="\n")
        with f:
            yield f


@contextlib.contextmanager
def atomic_path(path: str | Path, held: bool = True) -> Iterator[Path]:
    """A temp *path* (not opened) beside ``path``, renamed onto ``path`` on success.

    For writers that insist on a file name (``np.save``, fastText ``save_model``).
    The temp name keeps ``path``'s suffix, because some writers append one.
    ``held=False`` for a writer that takes an exclusive ``flock`` on the file itself
    (HDF5 does, while the file is open), which ours would block.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    name = {"prefix": f".{path.stem}.", "suffix": f".tmp{path.suffix}"}
    fd, tmp = held_temp(path.parent, **name) if held else tempfile.mkstemp(dir=path.parent, **name)
    try:
        public_mode(tmp)
        with disk_full_as_error(path):
            yield Path(tmp)
            raise_if_terminated()
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """A fresh temp directory beside ``path``; it replaces ``path`` when the block succeeds.

    An existing ``path`` is removed only after the new content is complete.  On
    failure the temp directory is deleted and ``path`` is left as it was.
    """
    path = Path(os.path.abspath(path))  # "." or "dir/.." have no name to put beside them
    path.parent.mkdir(parents=True, exist_ok=True)
    lock, tmp = held_temp(path.parent, f".{path.name}.", ".tmp", directory=True)
    held, tmp = [lock], Path(tmp)
    try:
        with disk_full_as_error(path):
            public_mode(tmp, directory=True)
            yield tmp
        raise_if_terminated()
        if path.exists():
            lock, old = held_temp(path.parent, f".{path.name}.", ".old", directory=True)
            held.append(lock)
            old = Path(old)
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        for fd in held:
            os.close(fd)
