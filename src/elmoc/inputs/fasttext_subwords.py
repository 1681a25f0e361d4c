"""FastText vectors of words outside the LM vocabulary (open vocabulary at extraction).

A FastText-input LM reads a frozen table with one row per vocabulary word.  A task
word outside that vocabulary must read the vector fastText itself gives it
(paper sec. 3.2): its dictionary row plus its character n-gram buckets when
fastText knows the word, the n-gram buckets alone otherwise (fastText's
``get_word_vector``).  :class:`SubwordVectors` computes exactly those vectors from
either source:

* a fastText ``.bin`` (:class:`elmoc.data.vectors.fasttext_bin.FastTextModel`, memory-mapped);
* the arrays an exported model directory holds instead of the whole ``.bin``
  (:meth:`save` / :meth:`load`): the n-gram bucket table, the n-gram settings, and
  the composed vectors of the fastText dictionary words that are not in the LM
  vocabulary.  Both give identical numbers (same float32 composition).

Files written by :meth:`save` (in one directory)::

    fasttext.json             {"format": "elmoc-fasttext-subwords-v1", "dim", "minn", "maxn", "bucket"}
    fasttext_buckets.npy      float32 (bucket, dim)
    fasttext_words.txt        one word per line: dictionary words outside the LM vocabulary
    fasttext_word_vectors.npy float32 (len(words), dim), their composed vectors
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Container, Sequence

import numpy as np

from elmoc.errors import InputFileError
from elmoc.io.atomic import atomic_file

log = logging.getLogger(__name__)

FORMAT = "elmoc-fasttext-subwords-v1"
FILES = ("fasttext.json", "fasttext_buckets.npy", "fasttext_words.txt", "fasttext_word_vectors.npy")
EOS = "</s>"  # fastText gives its end-of-sentence word no n-grams


class SubwordVectors:
    """Compose fastText vectors of arbitrary words.

    Construct with :meth:`from_bin` (:meth:`from_source`) or :meth:`load`; the composer of
    a frozen table made from a fastText model (the contract: :mod:`elmoc.inputs.base`).

    Attributes:
        dim: vector size; source: where the vectors come from (for messages).
    """

    NAME = "fasttext"
    OPTION = "--fasttext-model"
    SOURCE = "fastText model"
    NOTE = "fastText vectors composed from character n-grams (fasttext_buckets.npy)"

    def __init__(self, dim: int, source: str, model=None, buckets: np.ndarray | None = None,
                 minn: int = 0, maxn: int = 0, known: dict[str, int] | None = None,
                 known_vectors: np.ndarray | None = None):
        self.dim = int(dim)
        self.source = source
        self._model = model
        self._buckets = buckets
        self.minn, self.maxn = int(minn), int(maxn)
        self._known = known or {}
        self._known_vectors = known_vectors

    @classmethod
    def from_bin(cls, path: str | Path) -> "SubwordVectors":
        from elmoc.data.vectors.fasttext_bin import FastTextModel

        model = FastTextModel.load(path)
        return cls(model.dim, str(path), model=model, minn=model.minn, maxn=model.maxn)

    from_source = from_bin

    @staticmethod
    def source_beside(vectors: str | Path) -> Path | None:
        """The fastText ``.bin`` a workflow table was made from, if it exists.

        ``results/vectors/{name}.npy`` and ``results/open_vocab/vectors/{name}.npy`` come
        from ``results/fasttext/{name}.bin`` (workflow/rules/data.smk, variants.smk).
        Tables without a fastText source (``random.npy``, ``cnn.npy``) have none.
        """
        vectors = Path(vectors)
        for root in (vectors.parent.parent, vectors.parent.parent.parent):
            candidate = root / "fasttext" / f"{vectors.stem}.bin"
            if candidate.is_file():
                return candidate
        return None

    def vectors(self, words: Sequence[str]) -> np.ndarray:
        """fastText vectors of ``words``.  Shape: returns float32 (len(words), dim)."""
        if self._model is not None:
            return np.asarray(self._model.word_vectors(list(words)), dtype=np.float32).reshape(len(words), self.dim)
        from elmoc.data.vectors.fasttext_bin import average_rows, ngram_buckets

        out = np.zeros((len(words), self.dim), dtype=np.float32)
        bucket = self._buckets.shape[0]
        for i, word in enumerate(words):
            row = self._known.get(word)
            if row is not None:
                out[i] = self._known_vectors[row]
            elif word != EOS:
                out[i] = average_rows(self._buckets[ngram_buckets(word, self.minn, self.maxn, bucket)])
        return out

    def save(self, directory: str | Path, lm_vocabulary: Container[str]) -> None:
        """Write the arrays that replace the ``.bin`` (needs a :meth:`from_bin` instance)."""
        if self._model is None:
            raise ValueError("save() needs vectors loaded from a .bin")
        directory = Path(directory)
        model = self._model
        extra = [w for w in model.words if w not in lm_vocabulary]
        with atomic_file(directory / "fasttext.json") as f:
            json.dump({"format": FORMAT, "dim": self.dim, "minn": self.minn, "maxn": self.maxn,
                       "bucket": int(model.bucket), "source": Path(self.source).name}, f, indent=1)
            f.write("\n")
        with atomic_file(directory / "fasttext_buckets.npy", "wb", encoding=None) as f:
            np.save(f, np.asarray(model.input_matrix[model.nwords:], dtype=np.float32))
        with atomic_file(directory / "fasttext_words.txt") as f:
            f.write("".join(w + "\n" for w in extra))
        with atomic_file(directory / "fasttext_word_vectors.npy", "wb", encoding=None) as f:
            np.save(f, self.vectors(extra) if extra else np.zeros((0, self.dim), np.float32))
        log.info("fastText subwords: %d buckets, %d dictionary words outside the LM vocabulary",
                 model.bucket, len(extra))

    @classmethod
    def load(cls, directory: str | Path) -> "SubwordVectors":
        """Read what :meth:`save` wrote; every problem names the file."""
        directory = Path(directory)
        for name in FILES:
            if not (directory / name).is_file():
                raise InputFileError(directory / name, "missing from the model directory; export the model again "
                                     "with `elmoc export`")
        meta_path = directory / "fasttext.json"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputFileError(meta_path, f"not valid JSON ({e}); export the model again") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise InputFileError(meta_path, f"not format {FORMAT!r} (another elmoc version?); export the model "
                                 "again with this version")
        buckets = _load_npy(directory / "fasttext_buckets.npy", (int(meta["bucket"]), int(meta["dim"])))
        words = (directory / "fasttext_words.txt").read_text(encoding="utf-8").split("\n")[:-1]
        vectors = _load_npy(directory / "fasttext_word_vectors.npy", (len(words), int(meta["dim"])))
        return cls(int(meta["dim"]), str(directory), buckets=buckets, minn=meta["minn"], maxn=meta["maxn"],
                   known={w: i for i, w in enumerate(words)}, known_vectors=vectors)


def _load_npy(path: Path, shape: tuple[int, int]) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r")
    except (ValueError, OSError) as e:
        raise InputFileError(path, f"not a readable .npy file ({e}); export the model again") from None
    if tuple(array.shape) != shape or array.dtype not in (np.float32, np.float16):  # float16: a compressed copy
        raise InputFileError(path, f"has {array.dtype} {list(array.shape)}, expected float32 {list(shape)}; "
                             "export the model again")
    return array
