"""Corpus source formats -> tokenized sentences (one string, tokens joined by spaces).

Formats (the ``format`` of a corpus source):

* ``lines``: one tokenized sentence per line (1B Word Benchmark shards).
* ``wikitext``: WikiText raw-tokenized text: blank lines and ``= Heading =`` lines
  (any number of ``=``) are dropped; each remaining line is a paragraph that is
  split into sentences after every ``.``, ``?`` or ``!`` *token*.
* ``raw``: untokenized text, one document or paragraph per line (gensim's
  ``lee_background.cor``): sentence-split and tokenized by
  :mod:`elmoc.data.corpus.tokenize`.

Files are read as bytes and decoded line by line, so undecodable input is
reported with its 1-based line number; a missing or empty file is an error.

Control characters (NUL and the other Unicode ``Cc`` characters that
``str.split()`` does not count as whitespace, :data:`CONTROL_CHARACTERS`) are
replaced by a space before any format is parsed, so they separate tokens and can
never become (part of) a token or a vocabulary entry; the reader logs one warning
per file with their count and the first line holding one.
"""
from __future__ import annotations

import glob
import logging
import re
from pathlib import Path
from typing import Callable, Iterator

from elmoc.data.corpus.tokenize import split_sentences, tokenize
from elmoc.errors import ConfigError, InputFileError

log = logging.getLogger(__name__)

FORMATS = ("lines", "wikitext", "raw")
# Unicode category Cc minus the characters str.split() treats as whitespace
# (tab, LF, VT, FF, CR, FS, GS, RS, US, NEL): NUL, the other C0 controls, DEL, C1.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_WIKITEXT_ENDS = frozenset((".", "?", "!"))


def read_lines(
    path: str | Path, encoding: str = "utf-8", fix: str = "re-encode the file as UTF-8", empty_ok: bool = False
) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` of every line of a text file, newline stripped.

    The one line reader of elmoc: the file is read as bytes and decoded line by
    line, so a line that is not valid ``encoding`` is an InputFileError naming the
    file, the 1-based line and the byte, followed by ``fix`` (how to repair it).
    A missing file is an error, and so is an empty one unless ``empty_ok``.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "file not found; check the path in the config or run `elmoc fetch`")
    if not empty_ok and path.stat().st_size == 0:
        raise InputFileError(path, "file is empty; it must contain text")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as e:
                raise InputFileError(path, f"byte {raw[e.start]:#04x} is not valid {encoding}; {fix}", lineno) from None
            yield lineno, text.rstrip("\r\n")


def control_character_message(char: str) -> str:
    """How an error names a control character: ``control character U+0000 (NUL)``."""
    return f"control character U+{ord(char):04X}" + (" (NUL)" if char == "\x00" else "")


def _text_lines(path: Path) -> Iterator[str]:
    """Lines of a corpus source with control characters replaced by a space (module docstring)."""
    count, first = 0, None
    for lineno, text in read_lines(path):
        found = CONTROL_CHARACTERS.search(text)
        if found is not None:
            first = first or (lineno, found.group())
            text, n = CONTROL_CHARACTERS.subn(" ", text)
            count += n
        yield text
    if first is not None:
        log.warning("%s:%d: replaced %d control character(s) by spaces in this file, the first a %s on this line; "
                    "they never become tokens, but check the file for damage", path, first[0], count,
                    control_character_message(first[1]))


def _lines_format(path: Path) -> Iterator[str]:
    yield from _text_lines(path)


def _is_wikitext_heading(tokens: list[str]) -> bool:
    return len(tokens) >= 3 and tokens[0].startswith("=") and tokens[-1].startswith("=") and set(tokens[0]) == {"="}


def _wikitext_format(path: Path) -> Iterator[str]:
    for text in _text_lines(path):
        tokens = text.split()
        if not tokens or _is_wikitext_heading(tokens):
            continue
        start = 0
        for i, tok in enumerate(tokens):
            if tok in _WIKITEXT_ENDS:
                yield " ".join(tokens[start:i + 1])
                start = i + 1
        if start < len(tokens):
            yield " ".join(tokens[start:])


def _raw_format(path: Path) -> Iterator[str]:
    for text in _text_lines(path):
        if not text.strip():
            continue
        for sentence in split_sentences(text):
            yield " ".join(tokenize(sentence))


_READERS: dict[str, Callable[[Path], Iterator[str]]] = {
    "lines": _lines_format,
    "wikitext": _wikitext_format,
    "raw": _raw_format,
}


def read_sentences(path: str | Path, fmt: str) -> Iterator[str]:
    """Sentences of one file in format ``fmt`` (uncleaned: may be empty or untidy)."""
    if fmt not in _READERS:
        raise ConfigError(f"unknown corpus format {fmt!r}; use one of {', '.join(FORMATS)}")
    return _READERS[fmt](Path(path))


def expand_source(pattern: str) -> list[Path]:
    """Files matching a path or glob, sorted; an error if nothing matches."""
    if glob.has_magic(pattern):
        files = sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_file())
        if not files:
            raise InputFileError(pattern, "glob matches no file; check the corpus source or run `elmoc fetch`")
        return files
    path = Path(pattern)
    if not path.is_file():
        raise InputFileError(path, "file not found; check the corpus source path or run `elmoc fetch`")
    return [path]


def parse_source(text: str) -> tuple[str, str]:
    """``"FORMAT:PATH_OR_GLOB"`` -> ``(format, pattern)``."""
    fmt, sep, pattern = text.partition(":")
    if not sep or fmt not in FORMATS or not pattern:
        raise ConfigError(f"corpus source must be FORMAT:PATH_OR_GLOB with FORMAT in {FORMATS}, got {text!r}")
    return fmt, pattern
