"""The fixture's written fastText model (conftest.write_fasttext_bin): the stand-in that lets
the GPU machine, which has no ``fasttext`` package, run the tests of tests/pretrained."""
from __future__ import annotations

import numpy as np
from conftest import write_fasttext_bin

from elmoc.data.vectors.fasttext_bin import load_fasttext, ngram_buckets


def test_written_bin_reads_back_through_the_one_reader(tmp_path):
    words = ["the", "cat", "zebra"]
    model = load_fasttext(write_fasttext_bin(tmp_path / "m.bin", words, dim=4, bucket=50, minn=2, maxn=3))
    assert (model.dim, model.bucket, model.minn, model.maxn) == (4, 50, 2, 3)
    assert [model.word_id(w) for w in words] == [0, 1, 2] and model.word_id("dog") == -1
    rows = np.asarray(model.input_matrix)
    assert rows.shape == (3 + 50, 4) and np.abs(rows).max() > 0
    # an in-vocabulary word: its own row and its n-gram buckets' rows, averaged (fastText's getWordVector)
    ids = [1] + [3 + b for b in ngram_buckets("cat", 2, 3, 50)]
    np.testing.assert_allclose(model.word_vectors(["cat"])[0], rows[ids].mean(axis=0), rtol=1e-6)
