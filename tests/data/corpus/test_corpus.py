"""Corpus readers, tokenizer and preparation (elmoc.data.corpus.readers/tokenize/corpus)."""
from __future__ import annotations

import json

import pytest

from elmoc.cli import main
from elmoc.data.corpus.prepare import CorpusConfig, prepare_corpus, shard_paths
from elmoc.data.corpus.readers import CONTROL_CHARACTERS, read_sentences
from elmoc.data.corpus.tokenize import split_sentences, tokenize
from elmoc.data.vocab.vocabulary import build_vocabulary
from elmoc.errors import ConfigError, InputFileError


def test_lines_format(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("The cat sat .\n\nA  dog\tran .\n", encoding="utf-8")
    assert list(read_sentences(f, "lines")) == ["The cat sat .", "", "A  dog\tran ."]


def test_wikitext_format(tmp_path):
    f = tmp_path / "w.txt"
    f.write_text(
        " \n = Valkyria Chronicles = \n \n = = Gameplay = = \n"
        " The game is good . Is it ? Yes ! And 3 @.@ 5 more\n \n",
        encoding="utf-8",
    )
    assert list(read_sentences(f, "wikitext")) == ["The game is good .", "Is it ?", "Yes !", "And 3 @.@ 5 more"]


def test_raw_format_splits_and_tokenizes(tmp_path):
    f = tmp_path / "r.cor"
    f.write_text("Mr. Smith didn't go. He's home, isn't he? Yes!\n\nA new line.\n", encoding="utf-8")
    assert list(read_sentences(f, "raw")) == [
        "Mr. Smith did n't go .",
        "He 's home , is n't he ?",
        "Yes !",
        "A new line .",
    ]


def test_tokenizer_rules():
    assert tokenize("The U.S. can't pay $3.5 billion (1,000 units) -- at 4:00pm.") == [
        "The", "U.S.", "ca", "n't", "pay", "$", "3.5", "billion", "(", "1,000", "units", ")", "--", "at", "4:00pm", ".",
    ]
    assert tokenize("O'Neill's bio-identical \"view\"...") == [
        "O'Neill", "'s", "bio-identical", '"', "view", '"', "...",
    ]
    assert split_sentences("I met Dr. Who. Then J. Smith left! \"Why?\" Because.") == [
        "I met Dr. Who.", "Then J. Smith left!", '"Why?"', "Because.",
    ]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_prepare_pooled_is_deterministic_and_complete(tmp_path):
    lines = [f"sentence number {i} ." for i in range(40)]
    src = _write(tmp_path, "src.txt", "\n".join(lines) + "\n\n   \n")
    raw = _write(tmp_path, "raw.cor", "First one. Second one.\n")
    cfg = CorpusConfig(sources=[("lines", str(src)), ("raw", str(raw))], num_shards=3, heldout=0.1, seed=5)
    stats = prepare_corpus(cfg, tmp_path / "out1")
    prepare_corpus(cfg, tmp_path / "out2")
    shards = shard_paths(tmp_path / "out1" / "train")
    assert [p.name for p in shards] == ["shard_000.txt", "shard_001.txt", "shard_002.txt"]
    train = [s for p in shards for s in p.read_text(encoding="utf-8").splitlines()]
    held = (tmp_path / "out1" / "heldout.txt").read_text(encoding="utf-8").splitlines()
    assert len(held) == 4 and stats["heldout_sentences"] == 4  # round(0.1 * 42)
    assert sorted(train + held) == sorted(lines + ["First one .", "Second one ."])
    assert train != (lines + ["First one .", "Second one ."])[4:]  # shuffled
    assert stats["dropped_empty"] == 2 and stats["train_sentences"] == 38
    for p in shards:
        assert p.read_bytes() == (tmp_path / "out2" / "train" / p.name).read_bytes()
    assert json.loads((tmp_path / "out1" / "stats.json").read_text())["train_tokens"] == sum(
        len(s.split()) for s in train
    )


def test_prepare_cleaning_options(tmp_path):
    src = _write(tmp_path, "s.txt", "Hello   World .\nthis one is far too long for the limit\nOK\n")
    stats = prepare_corpus(
        CorpusConfig(sources=[("lines", str(src))], num_shards=1, heldout=1, lowercase=True, max_length=3),
        tmp_path / "o",
    )
    everything = (tmp_path / "o" / "train" / "shard_000.txt").read_text() + (tmp_path / "o" / "heldout.txt").read_text()
    assert sorted(everything.splitlines()) == ["hello world .", "ok"]
    assert stats["dropped_too_long"] == 1


def test_prepare_streamed_mode_one_shard_per_file(tmp_path):
    _write(tmp_path, "a.txt", "a1\na2\n")
    _write(tmp_path, "b.txt", "b1\n")
    h = _write(tmp_path, "h.txt", "h1\n")
    prepare_corpus(
        CorpusConfig(sources=[("lines", str(tmp_path / "[ab].txt"))], heldout_sources=[("lines", str(h))],
                     num_shards=None, heldout=0),
        tmp_path / "o",
    )
    assert (tmp_path / "o" / "train" / "shard_000.txt").read_text() == "a1\na2\n"
    assert (tmp_path / "o" / "train" / "shard_001.txt").read_text() == "b1\n"
    assert (tmp_path / "o" / "heldout.txt").read_text() == "h1\n"


@pytest.mark.parametrize(
    "content, match, line",
    [(b"", "empty", None), (b"good line\n\xff\xfe bad\n", "UTF-8", 2), (b"\n  \n", "no sentences", None)],
)
def test_bad_input_errors_leave_nothing(tmp_path, content, match, line):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    out = tmp_path / "out"
    with pytest.raises(InputFileError, match=match) as e:
        prepare_corpus(CorpusConfig(sources=[("lines", str(bad))], num_shards=1, heldout=0.5), out)
    assert e.value.path == str(bad) and e.value.line == line
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["bad.txt"]


@pytest.mark.parametrize("fmt", ["lines", "wikitext", "raw"])
def test_control_characters_never_become_tokens(tmp_path, caplog, fmt):
    # issue 20 item 8: a NUL byte became a token (and then a vocabulary entry)
    src = tmp_path / f"s.{fmt}"
    src.write_bytes(b"The cat sat on the mat .\nThe cat\x00sat on a \x07 mat .\n\x00\x00\x00\nA dog ran\x7f .\n")
    with caplog.at_level("WARNING", logger="elmoc.data.corpus.readers"):
        prepare_corpus(CorpusConfig(sources=[(fmt, str(src))], num_shards=1, heldout=1), tmp_path / "o")
    written = (tmp_path / "o" / "train" / "shard_000.txt").read_text(encoding="utf-8") + (
        tmp_path / "o" / "heldout.txt").read_text(encoding="utf-8")
    assert CONTROL_CHARACTERS.search(written) is None
    tokens = written.split()
    assert tokens.count("cat") == 2 and tokens.count("sat") == 2 and "ran" in tokens  # a separator, not a glue
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith(f"{src}:2: replaced 6 control character(s)")
    assert "U+0000 (NUL)" in warnings[0]
    vocab = build_vocabulary(tmp_path / "v.txt", corpus=tmp_path / "o" / "train")
    assert not any(CONTROL_CHARACTERS.search(t) for t in vocab.tokens)


def test_missing_source_and_bad_config(tmp_path):
    with pytest.raises(InputFileError, match="not found"):
        prepare_corpus(CorpusConfig(sources=[("lines", str(tmp_path / "nope.txt"))]), tmp_path / "o")
    with pytest.raises(InputFileError, match="glob matches no file"):
        prepare_corpus(CorpusConfig(sources=[("lines", str(tmp_path / "nope*"))]), tmp_path / "o")
    with pytest.raises(ConfigError, match="unknown corpus format"):
        CorpusConfig(sources=[("xml", "a")])
    with pytest.raises(ConfigError, match="heldout_sources"):
        CorpusConfig(sources=[("lines", "a")], num_shards=None, heldout=0)
    src = _write(tmp_path, "s.txt", "a\nb\n")
    with pytest.raises(ConfigError, match="num_shards"):
        prepare_corpus(CorpusConfig(sources=[("lines", str(src))], num_shards=5, heldout=1), tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_failed_rerun_keeps_previous_output(tmp_path):
    src = _write(tmp_path, "s.txt", "a b\nc d\ne f\n")
    prepare_corpus(CorpusConfig(sources=[("lines", str(src))], num_shards=1, heldout=1), tmp_path / "o")
    before = (tmp_path / "o" / "train" / "shard_000.txt").read_text()
    src.write_bytes(b"\xff\n")
    with pytest.raises(InputFileError):
        prepare_corpus(CorpusConfig(sources=[("lines", str(src))], num_shards=1, heldout=1), tmp_path / "o")
    assert (tmp_path / "o" / "train" / "shard_000.txt").read_text() == before


def test_cli_corpus(tmp_path, capsys):
    src = _write(tmp_path, "s.txt", "".join(f"w{i} x .\n" for i in range(20)))
    assert main(["corpus", "--source", f"lines:{src}", "--output-dir", str(tmp_path / "c"), "--shards", "2",
                 "--heldout", "5", "--seed", "3"]) == 0
    assert len((tmp_path / "c" / "heldout.txt").read_text().splitlines()) == 5
    assert main(["corpus", "--source", f"lines:{tmp_path / 'missing.txt'}", "--output-dir", str(tmp_path / "d")]) == 1
    assert "missing.txt" in capsys.readouterr().err


def test_real_wikitext_and_lee(shared_data, tmp_path):
    stats = prepare_corpus(
        CorpusConfig(sources=[("wikitext", str(shared_data / "corpus_sample/wikitext2/valid.txt")),
                              ("raw", str(shared_data / "corpus_sample/lee_background.cor"))],
                     num_shards=2, heldout=0.02),
        tmp_path / "c",
    )
    assert stats["train_tokens"] > 200_000
    first = (tmp_path / "c" / "train" / "shard_000.txt").read_text(encoding="utf-8").splitlines()
    assert not any(line.startswith("=") and line.endswith("=") for line in first)
