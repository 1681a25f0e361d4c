"""Building vocabularies: counts from shards, external lists (P8), `elmoc vocab`."""
from __future__ import annotations

import pytest

from elmoc.cli import main
from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary, count_tokens
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
    assert main(["vocab", "--corpus", str(d), "--output", str(out)]) == 0
    v = Vocabulary.load(out)
    assert v.tokens == list(SPECIALS) + ["a", "b", "c", "d"]  # a:4 b:3 c:2 d:1; <unk> not duplicated
    assert v.counts[4:] == [4, 3, 2, 1]
    assert main(["vocab", "--corpus", str(d), "--output", str(out), "--max-size", "6"]) == 0
    assert Vocabulary.load(out).tokens[4:] == ["a", "b"]
    assert main(["vocab", "--corpus", str(d), "--output", str(out), "--min-count", "2"]) == 0
    assert Vocabulary.load(out).tokens[4:] == ["a", "b", "c"]


def test_empty_vocabulary_names_the_corpus(tmp_path, capsys):
    d = _shards(tmp_path, "a b\n")
    out = tmp_path / "v.txt"
    assert main(["vocab", "--corpus", str(d), "--output", str(out), "--min-count", "5"]) == 1
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
    assert main(["vocab", "--from-file", str(ext), "--output", str(out)]) == 0
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


def test_duplicate_token_names_the_file_and_both_lines(tmp_path, capsys):
    # issue 20 item 8: "duplicate vocabulary token 'the'" named no line
    path = tmp_path / "v.txt"
    path.write_text("<pad>\t0\n<s>\t0\n</s>\t0\n<unk>\t0\nthe\t5\ncat\t3\nthe\t1\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"token 'the' is listed twice, on lines 5 and 7; ") as e:
        Vocabulary.load(path)
    assert e.value.path == str(path) and e.value.line == 7
    assert str(e.value).startswith(f"{path}:7: ")
    with pytest.raises(ValueError, match=r"duplicate vocabulary token 'the' \(ids 4 and 6\)"):
        Vocabulary(list(SPECIALS) + ["the", "cat", "the"])


def test_control_character_is_never_a_vocabulary_entry(tmp_path, caplog):
    # issue 20 item 8: a NUL in a shard or a list became a vocabulary entry
    shards = _shards(tmp_path, "a b\nc d\ne\x00f g\n")
    with pytest.raises(InputFileError, match=r"control character U\+0000 \(NUL\) in the text; `elmoc corpus`") as e:
        count_tokens(sorted(shards.iterdir()))
    assert e.value.line == 3 and e.value.path.endswith("shard_000.txt")
    ext = tmp_path / "list.txt"
    ext.write_text("the 10\nca\x01t 3\n\x00\ncat 2\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="elmoc.data.vocab.vocabulary"):
        assert Vocabulary.from_external_file(ext).tokens == list(SPECIALS) + ["the", "cat"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{ext}:2: skipped 2 token(s) holding a control character, the first a control character U+0001 on this line"]
    saved = tmp_path / "v.txt"
    saved.write_text("<pad>\t0\n<s>\t0\n</s>\t0\n<unk>\t0\nthe\t5\n\x00\t3\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="U\\+0000 \\(NUL\\) in a vocabulary token") as e:
        Vocabulary.load(saved)
    assert e.value.line == 6
    for bad in ("a\x00", "", "a b"):
        with pytest.raises(ValueError, match=r"\(id 5\) is empty or holds whitespace or a control character"):
            Vocabulary(list(SPECIALS) + ["ok", bad])
