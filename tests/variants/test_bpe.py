from elmoc.cli import main
from elmoc.data.vocab.subword import SubwordEncoder
from elmoc.data.vocab.vocabulary import Vocabulary


def test_bpe_command_writes_vocab_and_first_subwords(tmp_path):
    corpus = tmp_path / "train"
    corpus.mkdir()
    (corpus / "shard_000.txt").write_text("the unbelievable cats sat .\nthe cats ran .\n" * 5)
    assert main(["bpe", "--corpus", str(corpus), "--num-merges", "10", "--min-frequency", "1",
                 "--output-dir", str(tmp_path / "bpe")]) == 0
    vocab = Vocabulary.load(tmp_path / "bpe" / "vocab.txt")
    assert vocab.tokens[:4] == ["<pad>", "<s>", "</s>", "<unk>"]
    enc = SubwordEncoder(tmp_path / "bpe" / "tokenizer.json")
    assert len(vocab) == enc.tokenizer.get_vocab_size()
    ids, first = enc.encode_words(["the", "unbelievable", "zebra"])
    assert len(first) == 3 and first[0] == 0
    pieces = [vocab.tokens[i] for i in ids]
    assert all(not pieces[f].startswith("##") for f in first)
    assert all(p.startswith("##") or p == "<unk>" for i, p in enumerate(pieces) if i not in first)
    assert max(ids) < len(vocab)  # unseen characters map to <unk>, never out of range
    assert enc.encode_line("the cats .") == enc.encode_lines(["the cats ."])[0]
    stream = enc.stream(["the cats .", "the ."])
    assert stream.dtype.name == "int64"
    assert stream.tolist() == [1, *enc.encode_line("the cats ."), 2, 1, *enc.encode_line("the ."), 2]
    # counts come from the corpus
    assert vocab.counts[vocab.index["the"]] == 10


def test_bpe_missing_corpus_is_an_error(tmp_path, capsys):
    assert main(["bpe", "--corpus", str(tmp_path / "none"), "--output-dir", str(tmp_path / "bpe")]) == 1
    assert "not found" in capsys.readouterr().err


def _tie_corpus(path):
    """Many words with equally frequent character pairs: merge order depends on tie-breaking."""
    import random

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 8))) for _ in range(400)]
    path.write_text("\n".join(" ".join(words[i : i + 8]) for i in range(0, len(words), 8)) + "\n")
    return path


def test_bpe_training_is_deterministic(tmp_path):
    """tokenizers' own trainer numbers `##` symbols in hash order and breaks ties with those
    numbers, so its merge order changed from run to run; ours must not."""
    from elmoc.data.vocab.subword import train_bpe

    corpus = _tie_corpus(tmp_path / "ties.txt")
    runs = [train_bpe([corpus], num_merges=300, min_frequency=1).to_str() for _ in range(4)]
    assert all(r == runs[0] for r in runs[1:])


def test_bpe_merges_use_the_continuation_prefix(tmp_path):
    import json

    from elmoc.data.vocab.subword import train_bpe

    corpus = tmp_path / "c.txt"
    corpus.write_text("banana bandana cabana\n" * 3)
    tok = train_bpe([corpus], num_merges=6, min_frequency=1)
    model = json.loads(tok.to_str())["model"]
    assert model["continuing_subword_prefix"] == "##"
    assert len(model["merges"]) == 6
    for a, b in (m if isinstance(m, list) else m.split(" ") for m in model["merges"]):
        assert b.startswith("##")  # the right side of a merge is never word-initial
        assert a + b[2:] in model["vocab"] or "##" + (a[2:] if a.startswith("##") else a) + b[2:] in model["vocab"]
    pieces = tok.encode("banana cabana").tokens
    assert "".join(p.removeprefix("##") for p in pieces) == "bananacabana"
    assert pieces[0] != "" and not pieces[0].startswith("##")
    assert all(ord(c) < 0xF0000 for token in model["vocab"] for c in token)  # no private-use marks leak out


def test_bpe_rejects_private_use_characters(tmp_path):
    import pytest

    from elmoc.data.vocab.subword import train_bpe
    from elmoc.errors import InputFileError

    corpus = tmp_path / "c.txt"
    corpus.write_text("ab\U000f0001c d\n")
    with pytest.raises(InputFileError, match="private-use"):
        train_bpe([corpus], num_merges=2, min_frequency=1)


def test_bpe_corpus_words_spelled_like_specials(tmp_path):
    """WikiText writes rare words as the literal token <unk>: BPE learns it from its
    characters, and it must map back to the special <unk> (id 3), not take another id."""
    from elmoc.data.vocab.subword import train_bpe

    corpus = tmp_path / "wiki.txt"
    corpus.write_text("the <unk> sat on the <unk> mat .\nthe cat </s> ran .\n" * 20)
    tok = train_bpe([corpus], num_merges=40, min_frequency=1)
    vocab = tok.get_vocab()
    assert [tok.token_to_id(s) for s in ("<pad>", "<s>", "</s>", "<unk>")] == [0, 1, 2, 3]
    assert sorted(vocab.values()) == list(range(len(vocab)))  # consecutive ids, no gap
    assert tok.encode(["<unk>"], is_pretokenized=True).ids == [3]
