"""The one fastText ``.bin`` reader: same vectors as the fasttext package, bad files refused.

A good model is trained with the fasttext package (in a child process, as
``train_fasttext`` does); the reader must give its exact words, matrices and
``get_word_vector`` for dictionary words, out-of-vocabulary words (n-grams only),
multi-byte UTF-8 words and fastText's ``</s>``.  Truncated, tiny and garbage
files must be one InputFileError naming the file, through the library and
through every command and task that reads a ``.bin``.
"""
from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from elmoc.cli import main
from elmoc.data.vectors.fasttext_bin import FastTextModel, average_rows, fnv1a_32, ngram_buckets
from elmoc.data.vectors.fasttext_model import FastTextTrainConfig, evaluate_fasttext, train_fasttext
from elmoc.data.vectors.tables import fasttext_table
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import InputFileError
from elmoc.tasks.word_vectors import load_word_vectors

WORDS = "the cat sat on mat <unk> dog log a and ran to house mouse big small café naïve 日本語 élan".split()
QUERIES = ["cats", "xyzzy", "caféine", "日本", "a", "", "</s>", "<", "ab cd", "supercalifragilisticexpialidocious"]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("ftbin")
    rng = np.random.default_rng(0)
    text = "".join(" ".join(rng.choice(WORDS, size=8)) + "\n" for _ in range(300))
    (d / "shard_000.txt").write_text(text, encoding="utf-8")
    out = d / "m.bin"
    train_fasttext([d / "shard_000.txt"], out, FastTextTrainConfig(
        dim=16, lr=0.025, epoch=2, minCount=1, bucket=20000, minn=2, maxn=4, thread=1, seed=1))
    return out


def test_reader_matches_the_fasttext_package(model_path):
    import fasttext

    ref = fasttext.load_model(str(model_path))
    model = FastTextModel.load(model_path)
    assert (model.dim, model.minn, model.maxn, model.bucket) == (16, 2, 4, 20000)
    assert model.words == ref.words and model.nwords == len(ref.words)
    np.testing.assert_array_equal(model.input_matrix, ref.get_input_matrix())
    np.testing.assert_array_equal(model.output_matrix, ref.get_output_matrix())
    queries = list(model.words) + QUERIES
    batched = model.word_vectors(queries)
    assert batched.dtype == np.float32 and batched.shape == (len(queries), 16)
    for word, vec in zip(queries, batched):
        expected = ref.get_word_vector(word)
        assert np.array_equal(vec, expected), word  # bit for bit, in and out of vocabulary
        assert np.array_equal(model.word_vector(word), expected), word
        assert model.subword_ids(word).tolist() == ref.get_subwords(word)[1].tolist(), word
        assert model.word_id(word) == ref.get_word_id(word)
    assert batched[len(model.words):].any(axis=1)[:4].all()  # OOV words composed from n-grams


def test_composition_without_the_bin(model_path):
    """What an exporter needs: the bucket table, minn/maxn/bucket, and the word rows."""
    model = FastTextModel.load(model_path)
    buckets = np.asarray(model.input_matrix[model.nwords:])
    for word in ["cats", "caféine", "日本"]:  # not in the dictionary
        rows = buckets[ngram_buckets(word, model.minn, model.maxn, model.bucket)]
        assert np.array_equal(average_rows(rows), model.word_vector(word))
    word = "café"
    rows = np.vstack([model.input_matrix[model.word_id(word)],
                      buckets[ngram_buckets(word, model.minn, model.maxn, model.bucket)]])
    assert np.array_equal(average_rows(rows), model.word_vector(word))
    assert average_rows(np.zeros((0, 3), np.float32)).tolist() == [0, 0, 0]
    assert ngram_buckets("</s>", 3, 6, 100) == [] and ngram_buckets("abc", 3, 6, 0) == []


def test_fnv_hash_sign_extends_bytes():
    assert fnv1a_32(b"") == 2166136261
    assert fnv1a_32(b"a") == 0xE40C292C  # FNV-1a reference value for "a"
    # fastText casts bytes to int8 first, so 0xC3 hashes as 0xFFFFFFC3, not as 0xC3
    assert fnv1a_32(b"\xc3") == ((2166136261 ^ 0xFFFFFFC3) * 16777619) & 0xFFFFFFFF


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def bad_models(model_path, tmp_path):
    data = model_path.read_bytes()
    header = struct.pack("<2i", 793712314, 12)
    return {
        "truncated": (_write(tmp_path / "truncated.bin", data[:-1000]), "truncated"),
        "dictionary cut": (_write(tmp_path / "dict.bin", data[:400]), "truncated"),
        "100 bytes": (_write(tmp_path / "hundred.bin", data[:100]), "truncated"),
        "garbage": (_write(tmp_path / "garbage.bin", np.random.default_rng(0).bytes(5000)), "not a fastText"),
        "empty": (_write(tmp_path / "empty.bin", b""), "shorter than a fastText header"),
        "trailing bytes": (_write(tmp_path / "trailing.bin", data + b"\0"), "unexpected bytes"),
        "version": (_write(tmp_path / "version.bin", struct.pack("<2i", 793712314, 99) + data[8:]), "version 99"),
        # a header that declares 2**31-1 words in a 100-byte file must not loop or allocate
        "huge dictionary": (_write(tmp_path / "huge.bin", header + data[8:64] + struct.pack("<3i2q", 2**31 - 1, 2**31 - 1, 0, 0, -1)
                                   + b"x" * 16), "truncated"),
    }


@pytest.mark.parametrize("case", ["truncated", "dictionary cut", "100 bytes", "garbage", "empty", "trailing bytes",
                                  "version", "huge dictionary"])
def test_bad_bin_is_one_line_naming_the_file(model_path, tmp_path, case):
    path, match = bad_models(model_path, tmp_path)[case]
    with pytest.raises(InputFileError, match=match) as e:
        FastTextModel.load(path)
    message = str(e.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


def test_quantized_model_refused(model_path, tmp_path):
    model = FastTextModel.load(model_path)
    data = bytearray(model_path.read_bytes())
    flag = model.input_matrix.offset - struct.calcsize("<?2q")
    data[flag] = 1
    with pytest.raises(InputFileError, match="quantized"):
        FastTextModel.load(_write(tmp_path / "q.bin", bytes(data)))


def test_every_bin_reader_refuses_a_truncated_model(model_path, tmp_path):
    path, _ = bad_models(model_path, tmp_path)["truncated"]
    vocab = Vocabulary(["<pad>", "<s>", "</s>", "<unk>", "cat"])
    with pytest.raises(InputFileError, match="truncated"):
        fasttext_table(vocab, path)
    with pytest.raises(InputFileError, match="truncated"):
        load_word_vectors(["cat"], path)
    with pytest.raises(InputFileError, match="truncated"):
        evaluate_fasttext(path, {}, tmp_path / "eval.json")
    assert not (tmp_path / "eval.json").exists()


@pytest.mark.parametrize("case", ["100 bytes", "garbage"])
def test_cli_vectors_with_a_bad_bin_is_one_line(model_path, tmp_path, case, capsys):
    path, match = bad_models(model_path, tmp_path)[case]
    vocab = tmp_path / "vocab.txt"
    Vocabulary(["<pad>", "<s>", "</s>", "<unk>", "cat"]).save(vocab)
    assert main(["vectors", "--vocab", str(vocab), "--model", str(path), "--output", str(tmp_path / "v.npy")]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and str(path) in errors[0] and "Traceback" not in err
    assert not (tmp_path / "v.npy").exists()


def test_good_model_through_the_three_call_sites(model_path, tmp_path):
    import fasttext

    ref = fasttext.load_model(str(model_path))
    words = ["cat", "cats", "日本"]
    table = load_word_vectors(words, model_path)
    np.testing.assert_array_equal(table, np.stack([ref.get_word_vector(w) for w in words]))
    vocab = Vocabulary(["<pad>", "<s>", "</s>", "<unk>"] + words)
    vt, stats = fasttext_table(vocab, model_path)
    np.testing.assert_array_equal(vt[4:], table)
    assert stats["oov"] == 2 + sum(1 for t in ["<pad>", "<s>", "</s>", "<unk>"] if t not in ref.words)
    ws = tmp_path / "ws.tsv"
    ws.write_text("cat\tdog\t8\ncat\tmat\t3\nsat\tzebra\t1\n", encoding="utf-8")
    res = evaluate_fasttext(model_path, {"ws": ws}, tmp_path / "e.json")
    assert res["words"] == len(ref.words) and res["datasets"]["ws"]["covered"] == 2
    assert os.path.getsize(tmp_path / "e.json") > 0


def test_unpinned_pretrained_url_is_refused_in_one_line(model_path, tmp_path, capsys):
    out = tmp_path / "cc.bin"
    assert main(["fasttext", "--pretrained", model_path.as_uri(), "--output", str(out), "--sha256", "none"]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and model_path.as_uri() in errors[0] and "not pinned" in errors[0]
    assert not out.exists()
