from collections import Counter

import pytest

from elmoc.data.vocab.vocabulary import SPECIALS, UNK_ID, Vocabulary
from elmoc.errors import InputFileError


def test_order_is_specials_then_count_then_string(tmp_path):
    v = Vocabulary.from_counts(Counter({"b": 2, "a": 2, "c": 5, "d": 1}), max_size=6)
    assert v.tokens == list(SPECIALS) + ["c", "a"]
    assert v.encode(["c", "zzz"]) == [4, UNK_ID]
    path = tmp_path / "v.txt"
    v.save(path)
    assert Vocabulary.load(path).tokens == v.tokens


def test_load_errors_name_file_and_line(tmp_path):
    p = tmp_path / "v.txt"
    p.write_text("<pad>\t0\n<s>\t0\n</s>\t0\n<unk>\t0\nword\tmany\n")
    with pytest.raises(InputFileError, match=r"v.txt:5: count 'many'"):
        Vocabulary.load(p)
    p.write_text("<pad>\n<s>\n</s>\n<unk>\n")
    with pytest.raises(InputFileError, match="no words"):
        Vocabulary.load(p)
    with pytest.raises(InputFileError, match="not found"):
        Vocabulary.load(tmp_path / "missing.txt")
