"""The sentences file of extract/embed."""
import pytest

from elmoc.errors import InputFileError
from elmoc.features.sentences import read_sentences


def test_one_sentence_per_line(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text("a b\nc\n")
    assert read_sentences(p) == [["a", "b"], ["c"]]


def test_blank_line_is_an_error(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text("a b\n\nc\n")
    with pytest.raises(InputFileError, match=r"s.txt:2: blank line"):
        read_sentences(p)


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(InputFileError, match="sentences file not found"):
        read_sentences(tmp_path / "none.txt")
