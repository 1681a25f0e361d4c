"""Text files that are not UTF-8: one line naming the file and the line, never a traceback.

All text is read through :func:`elmoc.data.corpus.readers.read_lines` (vocabularies,
corpus sources, word-similarity sets, task data).
"""
from __future__ import annotations

import pytest

from elmoc.cli import main
from elmoc.data.corpus.readers import read_lines
from elmoc.data.vectors.word_similarity import read_similarity_file
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import InputFileError
from elmoc.tasks.base import read_lines as task_read_lines

LATIN1 = "<pad>\t0\n<s>\t0\n</s>\t0\n<unk>\t0\ncaf\xe9\t3\n".encode("latin-1")  # line 5 is not UTF-8


def _one_error_line(err: str) -> str:
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err
    return errors[0]


def test_vocabulary_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(LATIN1)
    with pytest.raises(InputFileError) as e:
        Vocabulary.load(path)
    assert e.value.line == 5 and str(e.value).startswith(f"{path}:5: byte 0xe9 is not valid utf-8")
    with pytest.raises(InputFileError, match=r":5: byte 0xe9"):
        Vocabulary.from_external_file(path)


def test_cli_with_a_non_utf8_vocabulary_is_one_line(tmp_path, capsys):
    path = tmp_path / "vocab.txt"
    path.write_bytes(LATIN1)
    assert main(["vectors", "--vocab", str(path), "--random", "--dim", "4", "--output", str(tmp_path / "v.npy")]) == 1
    assert f"{path}:5:" in _one_error_line(capsys.readouterr().err)
    assert main(["vocab", "--from-file", str(path), "--output", str(tmp_path / "v.txt")]) == 1
    assert f"{path}:5:" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "v.npy").exists() and not (tmp_path / "v.txt").exists()


def test_one_line_reader_for_every_text_input(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"ok\r\nbad \xff\n")
    lines = read_lines(path)
    assert next(lines) == (1, "ok")
    with pytest.raises(InputFileError, match=r"x.txt:2: byte 0xff is not valid utf-8; re-encode the file as UTF-8"):
        next(lines)
    with pytest.raises(InputFileError, match=r":2: byte 0xff .*set the task's encoding option"):
        list(task_read_lines(path))
    assert list(task_read_lines(path, "latin-1")) == [(1, "ok"), (2, "bad \xff")]
    sim = tmp_path / "ws.tsv"
    sim.write_bytes(b"cat\tdog\t8\nna\xefve\tx\t1\n")
    with pytest.raises(InputFileError, match="ws.tsv:2: byte 0xef"):
        read_similarity_file(sim)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputFileError, match="empty"):
        list(read_lines(empty))
    assert list(read_lines(empty, empty_ok=True)) == []
    with pytest.raises(InputFileError, match="not found"):
        list(read_lines(tmp_path / "missing.txt"))
