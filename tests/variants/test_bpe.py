from elmoc.cli import main
from elmoc.data.subword import SubwordEncoder
from elmoc.data.vocab import Vocabulary


def test_bpe_command_writes_vocab_and_first_subwords(tmp_path):
    corpus = tmp_path / "train"
    corpus.mkdir()
    (corpus / "shard_000.txt").write_text("the unbelievable cats sat .\nthe cats ran .\n" * 5)
    assert main(["bpe", "--corpus", str(corpus), "--num-merges", "10", "--min-frequency", "1",
                 "--out-dir", str(tmp_path / "bpe")]) == 0
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
    assert main(["bpe", "--corpus", str(tmp_path / "none"), "--out-dir", str(tmp_path / "bpe")]) == 1
    assert "not found" in capsys.readouterr().err
