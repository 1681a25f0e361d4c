"""Errors raised by elmoc.

Every error a user can trigger is an :class:`ElmocError`; its message says what was
expected, what was found, and how to fix it.  Errors about a file carry the path
(and the 1-based line number when one applies) so the message points at the spot.
"""
from __future__ import annotations

from pathlib import Path


class ElmocError(Exception):
    """Base class of all user-facing elmoc errors."""


class ConfigError(ElmocError):
    """A configuration value is missing, unknown or out of range."""


class InputFileError(ElmocError):
    """An input file is missing, empty, undecodable or malformed.

    Args:
        path: the offending file.
        message: what is wrong and, when possible, how to fix it.
        line: 1-based line number, when the problem is on a given line.
    """

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}")


class DiskFullError(ElmocError):
    """A file could not be written because its filesystem is out of space (or quota).

    Raised by the atomic writers of :mod:`elmoc.io.atomic` (whose temporary is removed, so
    the file's previous version, if any, is untouched); a caller may add what survived
    (``note``, e.g. the trainer's "the previous checkpoint (step 200) is intact").

    Args:
        path: the file (or folder) that could not be written.
        free: bytes free on its filesystem now (None: unknown).
        note: what survived and what to do, appended to the message.
    """

    def __init__(self, path: str | Path, free: int | None, note: str = ""):
        self.path, self.free, self.note = str(path), free, note
        room = "unknown space" if free is None else f"{_size(free)}"
        super().__init__(f"{self.path}: could not be written: no space left on its filesystem ({room} free)"
                         + (f"; {note}" if note else "; free some space and run the command again"))

    def with_note(self, note: str) -> "DiskFullError":
        """The same error with ``note`` (what survived, what to do) in the message."""
        return DiskFullError(self.path, self.free, note)


def _size(n: int) -> str:
    """``n`` bytes as ``512 B``, ``12.0 KiB``, ``3.4 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError(n)


class OutputError(ElmocError):
    """An output path the command must not write: the same file as one of its inputs,
    or a folder it would replace that it did not write (see :mod:`elmoc.io.output_paths`).

    Args:
        path: the output path.
        message: why it is refused and what to give instead.
    """

    def __init__(self, path: str | Path, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")
