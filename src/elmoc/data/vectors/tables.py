"""Word-vector tables aligned with the vocabulary (spec 2.5, P5).

``fasttext_table``: row ``i`` is fastText's ``get_word_vector(vocab.tokens[i])``
(computed by :mod:`elmoc.data.vectors.fasttext_bin`, the one ``.bin`` reader).
For a word outside the model's vocabulary fastText composes the vector from the
word's character n-grams, so every string gets one; a row that is still exactly
zero (no n-grams, e.g. a model trained with ``maxn=0``) is replaced by the
vector of ``"<unk>"``, which keeps the cosine loss away from 0/0 (P5).  If the
``<unk>`` vector is zero too the row stays zero and is counted.  The specials
``<pad> <s> </s> <unk>`` get fastText's vectors for those literal strings, as in
the paper's code.

``random_table``: N(0, 1) entries (the ELMo-C-RND target table), seeded.

Tables are float32 ``(vocab, dim)`` ``.npy`` files, written atomically.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from elmoc.data.vectors.fasttext_bin import FastTextModel
from elmoc.data.vocab.vocabulary import UNK, Vocabulary
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.atomic import atomic_file

log = logging.getLogger(__name__)


def fasttext_table(vocab: Vocabulary, model_path: str | Path) -> tuple[np.ndarray, dict]:
    """Vectors of every vocabulary token from a fastText ``.bin``
    (read by :mod:`elmoc.data.vectors.fasttext_bin`, which refuses a truncated or corrupt file).

    Returns:
        table: float32 (vocab, dim).
        stats: ``oov`` (tokens not in the model's own vocabulary, composed from
        n-grams), ``zero`` (all-zero rows before the fallback), ``zero_after_fallback``.
    """
    return table_from_model(vocab, FastTextModel.load(model_path))


def table_from_model(vocab: Vocabulary, model: FastTextModel) -> tuple[np.ndarray, dict]:
    """:func:`fasttext_table` for a loaded model (anything with ``word_vectors(list)``,
    ``word_vector(str)`` and ``word_id(str)``, as :class:`FastTextModel`)."""
    table = np.asarray(model.word_vectors(vocab.tokens), dtype=np.float32)
    zero = ~table.any(axis=1)
    unk_vector = np.asarray(model.word_vector(UNK), dtype=np.float32)
    n_zero = int(zero.sum())
    if n_zero and unk_vector.any():
        table[zero] = unk_vector
    stats = {
        "oov": sum(1 for t in vocab.tokens if model.word_id(t) < 0),
        "zero": n_zero,
        "zero_after_fallback": int((~table.any(axis=1)).sum()),
    }
    log.info("%d of %d tokens are outside the fastText vocabulary (vectors composed from n-grams); "
             "%d all-zero rows, %d still zero after the <unk> fallback",
             stats["oov"], len(vocab), stats["zero"], stats["zero_after_fallback"])
    return table, stats


def random_table(vocab_size: int, dim: int, seed: int) -> np.ndarray:
    """float32 (vocab_size, dim) N(0, 1) table from numpy's PCG64 seeded with ``seed``."""
    if vocab_size < 1 or dim < 1:
        raise ConfigError(f"random table needs vocab_size >= 1 and dim >= 1, got {vocab_size} x {dim}")
    return np.random.default_rng(seed).standard_normal((vocab_size, dim), dtype=np.float32)


def save_table(path: str | Path, table: np.ndarray) -> None:
    """Write a float32 (vocab, dim) table as ``.npy``, atomically."""
    if table.ndim != 2 or table.dtype != np.float32:
        raise ValueError(f"expected a float32 (vocab, dim) table, got {table.dtype} {table.shape}")
    with atomic_file(path, "wb") as f:
        np.save(f, table)


def load_table(path: str | Path, vocab_size: int | None = None) -> np.ndarray:
    """Read a table; with ``vocab_size``, check it is aligned with the vocabulary (P8)."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "vector table not found; run `elmoc vectors` first")
    try:
        table = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise InputFileError(path, f"not a readable .npy table ({e}); rebuild it with `elmoc vectors`") from None
    if table.ndim != 2:
        raise InputFileError(path, f"expected a (vocab, dim) table, got shape {table.shape}")
    if vocab_size is not None and table.shape[0] != vocab_size:
        raise InputFileError(
            path, f"table has {table.shape[0]} rows but the vocabulary has {vocab_size}; rebuild it with `elmoc vectors`"
        )
    return table
