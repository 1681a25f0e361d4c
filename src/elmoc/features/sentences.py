"""The sentences file of ``elmoc extract`` / ``elmoc embed``: one sentence per line."""
from __future__ import annotations

from pathlib import Path

from elmoc.errors import InputFileError


def read_sentences(path: str | Path, tokenize: bool = False) -> list[list[str]]:
    """One sentence per line, whitespace-tokenized (or raw text split by
    :func:`elmoc.data.corpus.tokenize.tokenize` with ``tokenize``); a blank line is an error."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "sentences file not found")
    if tokenize:
        from elmoc.data.corpus.tokenize import tokenize as split_words
    from elmoc.data.corpus.readers import read_lines

    sentences = []
    for lineno, line in read_lines(path, empty_ok=True):
        tokens = split_words(line.strip()) if tokenize else line.split()
        if not tokens:
            raise InputFileError(path, "blank line: every line must hold one sentence (remove empty lines)", lineno)
        sentences.append(tokens)
    if not sentences:
        raise InputFileError(path, "no sentences in file")
    return sentences
