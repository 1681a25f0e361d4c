"""Static word vectors (the FastText baseline, and GloVe's stand-in) for a task's words.

Two sources:

* a fastText binary model (``results/fasttext/{name}.bin``, read by
  :mod:`elmoc.data.vectors.fasttext_bin`): every word gets a vector, out-of-vocabulary
  words from their character n-grams (best coverage);
* a ``.npy`` table aligned with a vocabulary file (``results/vectors/{name}.npy`` +
  ``results/vocab/vocab.txt``): words outside the vocabulary get the ``<unk>`` row.

The result is a small table over the task's own words (row 0 = padding, zeros),
so downstream models never hold the pretraining vocabulary.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from elmoc.errors import ConfigError, InputFileError

log = logging.getLogger(__name__)


def load_word_vectors(words: Sequence[str], path: str | Path, vocab_path: str | Path | None = None) -> np.ndarray:
    """Vectors of ``words`` in order.

    Args:
        words: distinct task words.
        path: a fastText ``.bin`` model or a ``.npy`` [V, dim] table.
        vocab_path: the vocabulary the ``.npy`` rows follow (required for ``.npy``).

    Returns:
        float32 array (len(words), dim).
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "word-vector file not found; build it with `elmoc fasttext` / `elmoc vectors`")
    if path.suffix == ".bin":
        from elmoc.data.vectors.fasttext_bin import FastTextModel

        model = FastTextModel.load(path)
        table = model.word_vectors(list(words))
        known = sum(1 for w in words if model.word_id(w) >= 0)
        log.info("%s: %d/%d task words in the fastText vocabulary (others from subwords)", path, known, len(words))
        return table
    if path.suffix == ".npy":
        if vocab_path is None:
            raise ConfigError(f"{path} is a .npy table: also give the vocabulary it follows (--vocab results/vocab/vocab.txt)")
        from elmoc.data.vocab.vocabulary import UNK_ID, Vocabulary

        vocab = Vocabulary.load(vocab_path)
        try:
            matrix = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise InputFileError(path, f"not a readable .npy table ({e}); rebuild it with `elmoc vectors`") from None
        if matrix.ndim != 2 or matrix.shape[0] != len(vocab):
            raise InputFileError(path, f"shape {matrix.shape} does not match the {len(vocab)}-word vocabulary {vocab_path}")
        ids = np.array([vocab.id(w) for w in words], dtype=np.int64)
        log.info("%s: %d/%d task words in the vocabulary (others get <unk>)", path, int((ids != UNK_ID).sum()), len(words))
        return np.asarray(matrix[ids], dtype=np.float32)
    raise ConfigError(f"word vectors {path}: expected a fastText .bin model or a .npy table")
