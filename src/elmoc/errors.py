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
