"""The one reader of fastText binary models (``.bin``), in numpy.

Every ``.bin`` in elmoc (word-vector tables, the FastText task baseline, the
intrinsic evaluation, the check after training) is read here, never with
``fasttext.load_model``: that loader trusts the file, so a truncated model loads
with missing rows, a garbage one raises from C++, and a short one loops forever
looking for the end of a word (memory growing without bound).

Layout of a model saved by fastText 0.9 (little-endian, version 12; 11 is the
same layout):

====================  =====================================================
int32 x 2             magic 793712314, version
args (56 bytes)       int32 dim, ws, epoch, minCount, neg, wordNgrams, loss,
                      model, bucket, minn, maxn, lrUpdateRate; float64 t
dictionary            int32 size, nwords, nlabels; int64 ntokens, pruneidx_size;
                      ``size`` entries (NUL-terminated bytes, int64 count,
                      int8 type: 0 word, 1 label; words first);
                      ``pruneidx_size`` (int32, int32) pairs
bool                  input matrix quantized
int64 rows, cols      input matrix: rows = nwords + bucket, cols = dim,
float32 rows x cols   then the row-major values
bool, int64 x 2, ...  the output matrix, same form (rows = nlabels for
                      supervised models, nwords otherwise)
====================  =====================================================

:meth:`FastTextModel.load` checks every field against the file size *before*
touching the matrices (which are read-only ``np.memmap`` views, so a 7 GB model
costs no memory until rows are used); any problem is one
:class:`~elmoc.errors.InputFileError` line naming the file.  Quantized models
(``.ftz``) and pruned dictionaries are refused.

Word vectors follow fastText's ``getWordVector`` exactly (tested bit for bit):
the input rows of the word itself (when in the dictionary) and of the hash
buckets of its character n-grams of ``"<" + word + ">"`` (lengths ``minn..maxn``,
UTF-8 characters kept whole, FNV-1a over the bytes read as signed chars), summed
in order in float32 and multiplied by ``float32(1 / count)``; no rows = zeros.
:func:`ngram_buckets` and :func:`average_rows` do the same without a ``.bin``
(e.g. for a table of bucket vectors exported elsewhere).
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
from pathlib import Path
from typing import Sequence

import numpy as np

from elmoc.errors import InputFileError

log = logging.getLogger(__name__)

MAGIC = 793712314
VERSIONS = (11, 12)
EOS = "</s>"
_HEAD = struct.Struct("<2i")
_ARGS = struct.Struct("<12id")
_DICT = struct.Struct("<3i2q")
_ENTRY = struct.Struct("<qb")  # after the word's NUL: count, type
_MATRIX = struct.Struct("<?2q")  # quantized flag, rows, cols
_SUPERVISED = 3  # fastText's model_name::sup
_FNV_OFFSET, _FNV_PRIME = 2166136261, 16777619
_CHUNK = 4096  # words composed per batch in word_vectors


def fnv1a_32(data: bytes) -> int:
    """fastText's string hash: FNV-1a 32-bit over the bytes taken as *signed* chars.

    (``h ^= uint32(int8(byte)); h *= 16777619``: bytes >= 0x80 are sign-extended.)
    """
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ (b | 0xFFFFFF00 if b >= 0x80 else b)) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def _hash_many(ngrams: Sequence[bytes]) -> np.ndarray:
    """:func:`fnv1a_32` of every byte string, vectorized: uint32 (len(ngrams),)."""
    if not ngrams:
        return np.zeros(0, dtype=np.uint32)
    lengths = np.fromiter(map(len, ngrams), dtype=np.int64, count=len(ngrams))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    signed = np.frombuffer(b"".join(ngrams), dtype=np.int8).astype(np.int32).astype(np.uint32)
    h = np.full(len(ngrams), _FNV_OFFSET, dtype=np.uint32)
    prime = np.uint32(_FNV_PRIME)
    for k in range(int(lengths.max())):
        live = np.flatnonzero(lengths > k)
        h[live] = (h[live] ^ signed[starts[live] + k]) * prime  # uint32 arithmetic wraps mod 2**32
    return h


def _ngrams(word: str, minn: int, maxn: int) -> list[bytes]:
    """Character n-grams of ``"<" + word + ">"`` as fastText's ``computeSubwords`` lists them.

    Lengths count UTF-8 characters (continuation bytes stay with their character);
    the lone ``"<"`` and ``">"`` are not n-grams.  Order: by start, then by length.
    """
    data = b"<" + word.encode("utf-8", "surrogateescape") + b">"
    size = len(data)
    out = []
    for i in range(size):
        if data[i] & 0xC0 == 0x80:
            continue
        j, n = i, 1
        while j < size and n <= maxn:
            j += 1
            while j < size and data[j] & 0xC0 == 0x80:
                j += 1
            if n >= minn and not (n == 1 and (i == 0 or j == size)):
                out.append(data[i:j])
            n += 1
    return out


def ngram_buckets(word: str, minn: int, maxn: int, bucket: int) -> list[int]:
    """Hash buckets ``[0, bucket)`` of ``word``'s character n-grams, in fastText's order.

    Duplicates are kept (fastText averages them twice).  Empty when ``maxn`` is 0,
    ``bucket`` is 0, or the word is fastText's end-of-sentence token ``</s>``.
    """
    if word == EOS or bucket <= 0 or maxn <= 0:
        return []
    return (_hash_many(_ngrams(word, minn, maxn)) % np.uint32(bucket)).astype(np.int64).tolist()


def average_rows(rows: np.ndarray) -> np.ndarray:
    """fastText's composition of ``rows`` (k, dim): the float32 sum in order, times
    ``float32(1 / k)``; zeros (dim,) when ``k`` is 0.  Returns float32 (dim,)."""
    rows = np.asarray(rows, dtype=np.float32)
    vec = np.zeros(rows.shape[1], dtype=np.float32)
    for row in rows:
        vec += row
    if len(rows):
        vec *= np.float32(1.0 / len(rows))
    return vec


class FastTextModel:
    """A fastText ``.bin`` read by :meth:`load` (use that, not the constructor).

    Attributes:
        path: the file.  dim: vector size.  minn, maxn: n-gram lengths.
        bucket: number of n-gram hash buckets.  nwords: dictionary words.
        version: the file's format version (11 or 12).  model: fastText's model
        code (1 cbow, 2 skipgram, 3 supervised).
        words: dictionary words in id order (labels excluded).
        input_matrix: float32 (nwords + bucket, dim), read-only memmap; row
            ``nwords + b`` is n-gram bucket ``b``.
        output_matrix: float32 (rows, dim), read-only memmap.
    """

    def __init__(self, path: Path, args: dict, words: list[str], input_offset: int, output_offset: int,
                 output_rows: int):
        self.path = path
        self.version: int = args["version"]
        self.model: int = args["model"]
        self.dim: int = args["dim"]
        self.minn: int = args["minn"]
        self.maxn: int = args["maxn"]
        self.bucket: int = args["bucket"]
        self.words = words
        self.nwords = len(words)
        self._index = {w: i for i, w in enumerate(words)}
        if len(self._index) != self.nwords:
            raise _bad(path, "the dictionary lists a word twice; the file is corrupt")
        self.input_matrix = np.memmap(path, dtype="<f4", mode="r", offset=input_offset,
                                      shape=(self.nwords + self.bucket, self.dim))
        self.output_matrix = np.memmap(path, dtype="<f4", mode="r", offset=output_offset,
                                       shape=(output_rows, self.dim))

    @classmethod
    def load(cls, path: str | Path) -> "FastTextModel":
        """Read and validate a ``.bin``; any problem is an InputFileError naming ``path``."""
        path = Path(path)
        if not path.is_file():
            raise InputFileError(path, "fastText model not found; run `elmoc fasttext` first")
        try:
            with open(path, "rb") as f:
                file_size = os.fstat(f.fileno()).st_size
                if file_size < _HEAD.size + _ARGS.size + _DICT.size:
                    raise _bad(path, f"only {file_size} bytes, shorter than a fastText header")
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    return cls._parse(path, mm, file_size)
        except OSError as e:
            raise InputFileError(path, f"cannot read the fastText model: {e.strerror or e}") from None

    @classmethod
    def _parse(cls, path: Path, mm: mmap.mmap, file_size: int) -> "FastTextModel":
        magic, version = _HEAD.unpack_from(mm, 0)
        if magic != MAGIC:
            raise _bad(path, f"not a fastText binary model (magic number {magic}, expected {MAGIC})")
        if version not in VERSIONS:
            raise _bad(path, f"fastText format version {version} is not supported (expected one of {VERSIONS})")
        names = ("dim", "ws", "epoch", "minCount", "neg", "wordNgrams", "loss", "model", "bucket", "minn", "maxn",
                 "lrUpdateRate", "t")
        args = dict(zip(names, _ARGS.unpack_from(mm, _HEAD.size)), version=version)
        if version == 11 and args["model"] == _SUPERVISED:
            args["maxn"] = 0  # fastText: version-11 supervised models have no character n-grams
        if args["dim"] < 1:
            raise _bad(path, f"header says dim = {args['dim']}; the file is corrupt")
        for key in ("bucket", "minn", "maxn"):
            if args[key] < 0:
                raise _bad(path, f"header says {key} = {args[key]}; the file is corrupt")
        pos = _HEAD.size + _ARGS.size
        size, nwords, nlabels, _ntokens, pruneidx_size = _DICT.unpack_from(mm, pos)
        pos += _DICT.size
        if min(size, nwords, nlabels) < 0 or nwords + nlabels != size:
            raise _bad(path, f"dictionary header is corrupt (size {size}, words {nwords}, labels {nlabels})")
        # each entry takes at least 10 bytes (NUL + int64 count + int8 type)
        if size * (1 + _ENTRY.size) > file_size - pos:
            raise _truncated(path, file_size, pos + size * (1 + _ENTRY.size), "the dictionary")
        if pruneidx_size != -1:
            raise _bad(path, "pruned dictionary (a quantized model); use the full, unquantized .bin")
        words = []
        for i in range(size):
            end = mm.find(b"\0", pos)
            if end < 0 or end + 1 + _ENTRY.size > file_size:
                raise _truncated(path, file_size, None, f"dictionary entry {i + 1} of {size}")
            word = mm[pos:end]
            _count, kind = _ENTRY.unpack_from(mm, end + 1)
            if kind != (0 if i < nwords else 1):
                raise _bad(path, f"dictionary entry {i + 1} has type {kind} (words first, then labels); "
                                 "the file is corrupt")
            if i < nwords:
                words.append(word.decode("utf-8", "surrogateescape"))
            pos = end + 1 + _ENTRY.size
        input_offset, pos = _matrix(path, mm, file_size, pos, "input", nwords + args["bucket"], args["dim"])
        out_rows = nlabels if args["model"] == _SUPERVISED else nwords
        output_offset, pos = _matrix(path, mm, file_size, pos, "output", out_rows, args["dim"])
        if pos != file_size:
            raise _bad(path, f"{file_size - pos} unexpected bytes after the output matrix; the file is corrupt")
        return cls(path, args, words, input_offset, output_offset, out_rows)

    def word_id(self, word: str) -> int:
        """Dictionary id of ``word``, -1 if absent."""
        return self._index.get(word, -1)

    def subword_ids(self, word: str) -> np.ndarray:
        """Input-matrix rows fastText averages for ``word``: int64 (k,).

        ``[word_id] + [nwords + b ...]`` for a dictionary word, the bucket rows only
        otherwise (possibly none).
        """
        own = self.word_id(word)
        buckets = [self.nwords + b for b in ngram_buckets(word, self.minn, self.maxn, self.bucket)]
        return np.array(([own] if own >= 0 else []) + buckets, dtype=np.int64)

    def word_vector(self, word: str) -> np.ndarray:
        """fastText's ``get_word_vector(word)``: float32 (dim,)."""
        return self.word_vectors([word])[0]

    def word_vectors(self, words: Sequence[str]) -> np.ndarray:
        """Vectors of ``words``: float32 (len(words), dim), the same numbers as
        :meth:`word_vector` (hashing and summation batched)."""
        out = np.empty((len(words), self.dim), dtype=np.float32)
        for start in range(0, len(words), _CHUNK):
            chunk = words[start:start + _CHUNK]
            out[start:start + len(chunk)] = self._compose(chunk)
        return out

    def _compose(self, words: Sequence[str]) -> np.ndarray:
        use_ngrams = self.bucket > 0 and self.maxn > 0
        ngrams: list[bytes] = []
        counts = np.zeros(len(words), dtype=np.int64)
        for i, word in enumerate(words):
            if use_ngrams and word != EOS:
                grams = _ngrams(word, self.minn, self.maxn)
                ngrams.extend(grams)
                counts[i] = len(grams)
        bucket_rows = self.nwords + (_hash_many(ngrams) % np.uint32(max(self.bucket, 1))).astype(np.int64)
        own = np.array([self._index.get(w, -1) for w in words], dtype=np.int64)
        total = counts + (own >= 0)
        ids = np.full((len(words), int(total.max(initial=0))), -1, dtype=np.int64)
        if ids.shape[1]:
            ids[own >= 0, 0] = own[own >= 0]
        # bucket rows go after the word's own row (when it has one)
        first = (own >= 0).astype(np.int64)
        word_of = np.repeat(np.arange(len(words)), counts)
        slot = np.arange(len(ngrams)) - np.repeat(np.cumsum(counts) - counts, counts) + first[word_of]
        ids[word_of, slot] = bucket_rows
        vec = np.zeros((len(words), self.dim), dtype=np.float32)
        for k in range(ids.shape[1]):
            live = np.flatnonzero(total > k)
            vec[live] += self.input_matrix[ids[live, k]]
        has = total > 0
        vec[has] *= (1.0 / total[has]).astype(np.float32)[:, None]
        return vec


def load_fasttext(path: str | Path) -> FastTextModel:
    """:meth:`FastTextModel.load`."""
    return FastTextModel.load(path)


def _matrix(path: Path, mm: mmap.mmap, file_size: int, pos: int, name: str, rows: int, cols: int) -> tuple[int, int]:
    """Check one dense matrix header at ``pos``; return (offset of the values, end)."""
    if pos + _MATRIX.size > file_size:
        raise _truncated(path, file_size, pos + _MATRIX.size, f"the {name} matrix header")
    quantized, m, n = _MATRIX.unpack_from(mm, pos)
    if mm[pos] > 1:
        raise _bad(path, f"{name} matrix flag is {mm[pos]}; the file is corrupt")
    if quantized:
        raise _bad(path, "quantized model (.ftz) is not supported; use the full .bin")
    if (m, n) != (rows, cols):
        raise _bad(path, f"{name} matrix is {m} x {n} but the header implies {rows} x {cols}; the file is corrupt")
    start = pos + _MATRIX.size
    end = start + rows * cols * 4
    if end > file_size:
        raise _truncated(path, file_size, None, f"the {name} matrix ({rows} x {cols} floats)")
    return start, end


def _bad(path: Path, message: str) -> InputFileError:
    return InputFileError(path, f"{message}; re-create it (`elmoc fasttext`) or fetch it again")


def _truncated(path: Path, file_size: int, needed: int | None, what: str) -> InputFileError:
    need = f", at least {needed} are needed" if needed is not None else ""
    return InputFileError(
        path, f"truncated fastText model: the file ends inside {what} ({file_size} bytes{need}); "
        "the download or write was cut short: fetch or train it again"
    )
