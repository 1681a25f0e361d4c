"""Building vocabularies: counts from shards, external lists (P8), `elmoc vocab`."""
from __future__ import annotations

import pytest

from elmoc.cli import main
from elmoc.data.vocab import SPECIALS, Vocabulary, count_tokens
from elmoc.errors import InputFileError


def _shards(tmp_path, *texts):
    d = tmp_path / "train"
    d.mkdir()
    for i, t in enumerate(texts):
        (d / f"shard_{i:03d}.txt").write_text(t, encoding="utf-8")
    return d


def test_corpus_vocab_order_specials_and_caps(tmp_path):
    d = _shards(tmp_path, "b a c a\nb a <unk>\n", "d c b a\n")
    assert count_tokens(sorted(d.iterdir()))["a"] == 4
    out = tmp_path / "v.txt"
    assert main(["vocab", "--corpus", str(d), "--out", str(out)]) == 0
    v = Vocabulary.load(out)
    assert v.tokens == list(SPECIALS) + ["a", "b", "c", "d"]  # a:4 b:3 c:2 d:1; <unk> not duplicated
    assert v.counts[4:] == [4, 3, 2, 1]
    assert main(["vocab", "--corpus", str(d), "--out", str(out), "--max-size", "6"]) == 0
    assert Vocabulary.load(out).tokens[4:] == ["a", "b"]
    assert main(["vocab", "--corpus", str(d), "--out", str(out), "--min-count", "2"]) == 0
    assert Vocabulary.load(out).tokens[4:] == ["a", "b", "c"]


def test_empty_vocabulary_names_the_corpus(tmp_path, capsys):
    d = _shards(tmp_path, "a b\n")
    out = tmp_path / "v.txt"
    assert main(["vocab", "--corpus", str(d), "--out", str(out), "--min-count", "5"]) == 1
    err = capsys.readouterr().err
    assert str(d) in err and "empty vocabulary" in err
    assert not out.exists()


def test_external_file_paper_semantics(tmp_path):
    ext = tmp_path / "vocab-2016-09-10.txt"
    ext.write_text("<S>\n</S>\n<UNK>\nthe 120\n<unk>\n,\t99\nthe\n!!!MAXTERMID\n", encoding="utf-8")  # trailing \n
    v = Vocabulary.from_external_file(ext)
    assert v.tokens == list(SPECIALS) + ["<S>", "</S>", "<UNK>", "the", ",", "!!!MAXTERMID"]
    assert "" not in v.index  # deliberate fix of P8
    assert v.counts[v.index["the"]] == 120 and v.counts[v.index[","]] == 99
    assert len(Vocabulary.from_external_file(ext, max_size=6)) == 6
    out = tmp_path / "v.txt"
    assert main(["vocab", "--from-file", str(ext), "--out", str(out)]) == 0
    assert Vocabulary.load(out).tokens == v.tokens


def test_external_file_errors(tmp_path):
    only_specials = tmp_path / "s.txt"
    only_specials.write_text("<unk>\n\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="no tokens"):
        Vocabulary.from_external_file(only_specials)
    bad = tmp_path / "b.txt"
    bad.write_bytes(b"ok\n\xc3\x28\n")
    with pytest.raises(InputFileError) as e:
        Vocabulary.from_external_file(bad)
    assert e.value.line == 2
