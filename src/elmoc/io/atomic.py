"""Atomic writes: a file or a directory appears complete or not at all.

Every data stage writes its outputs through these helpers, so an interrupted or
failed run never leaves a half-written file that a later stage (or Snakemake)
would mistake for a finished one.  The temporary lives in the destination's own
directory so that the final ``os.replace`` is a rename on one filesystem.  A writer
holds an ``flock`` on its temporary until it is renamed or deleted, so that the next
run's :func:`elmoc.io.output_paths.remove_stale_temps` removes only the temporaries of
killed runs, never one being written.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterator

from elmoc.io.output_paths import hold


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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    try:
        if held:
            hold(fd)
        public_mode(tmp)
        yield Path(tmp)
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
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    held = [os.open(tmp, os.O_RDONLY)]
    try:
        hold(held[0])
        public_mode(tmp, directory=True)
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
            held.append(os.open(old, os.O_RDONLY))
            hold(held[-1])
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
