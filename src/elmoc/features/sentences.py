"""The sentences file of ``elmoc extract`` / ``elmoc embed``: one sentence per line.

:func:`iter_sentences` streams it (constant memory, for a file of any size);
:func:`check_sentences` reads it once without keeping it, so a bad line is refused
before any model runs; :func:`read_sentences` keeps the whole list (small files).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from elmoc.errors import InputFileError

BLANK = "blank line: every line must hold one sentence (remove empty lines)"


def iter_sentences(path: str | Path, tokenize: bool = False) -> Iterator[list[str]]:
    """The token lists of the file's lines, one at a time: whitespace-tokenized, or raw
    text split by :func:`elmoc.data.corpus.tokenize.tokenize` with ``tokenize``; a
    blank line (or an empty file) is an :class:`InputFileError` naming the line."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "sentences file not found")
    if tokenize:
        from elmoc.data.corpus.tokenize import tokenize as split_words
    from elmoc.data.corpus.readers import read_lines

    count = 0
    for lineno, line in read_lines(path, empty_ok=True):
        tokens = split_words(line.strip()) if tokenize else line.split()
        if not tokens:
            raise InputFileError(path, BLANK, lineno)
        count += 1
        yield tokens
    if not count:
        raise InputFileError(path, "no sentences in file")


def check_sentences(path: str | Path) -> int:
    """How many sentences the file holds, after refusing a missing, empty or
    non-UTF-8 file and a blank line (one pass, nothing kept)."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "sentences file not found")
    from elmoc.data.corpus.readers import read_lines

    count = 0
    for lineno, line in read_lines(path, empty_ok=True):
        if not line.strip():
            raise InputFileError(path, BLANK, lineno)
        count += 1
    if not count:
        raise InputFileError(path, "no sentences in file")
    return count


def read_sentences(path: str | Path, tokenize: bool = False) -> list[list[str]]:
    """Every sentence of the file as a list (see :func:`iter_sentences`)."""
    return list(iter_sentences(path, tokenize))
