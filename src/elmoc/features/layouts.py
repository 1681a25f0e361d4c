"""The two layouts of a feature file, each a writer and a reader (:mod:`elmoc.features.store`
picks them by name and sniffs which one a file holds).

``allennlp`` (the default, ``allennlp elmo --all``): one dataset per input line, keyed
``str(i)``, of shape ``(layers, tokens, dim)``.  Any HDF5 reader of AllenNLP's files reads it;
a task reads one dataset per sentence (opening a dataset by name costs more than copying a
short sentence's rows).

``contiguous`` (``elmoc extract --layout contiguous``): the file attribute ``layout`` is
``"contiguous"``, every sentence's rows lie in one dataset ``features`` of shape
``(layers, total_tokens, dim)`` (layer-major: ``features[k]`` is layer ``k`` of the whole
file, one ``(total_tokens, dim)`` block, as if one dataset per layer), sentence ``i`` is
``features[:, offsets[i]:offsets[i + 1]]`` and ``offsets`` is an int64 dataset of shape
``(sentences + 1,)`` starting at 0.  It is stored unchunked and uncompressed, so the reader maps
it into memory (``numpy.memmap`` at the dataset's byte offset): a batch of sentences is one
``numpy.take`` of its token rows, already in the ``(layers, batch, time, dim)`` order the task
models read, with no HDF5 call per sentence; the operating system keeps what fits of the file
in its page cache.  Layer-major rather than token-major because the batch comes out in the
models' order without a transpose; a sentence is then ``layers`` runs of rows instead of one,
which costs nothing once the pages are cached.

Both layouts hold the ``sentence_to_index`` JSON and the attributes ``num_layers``, ``dim``,
``boundaries``, ``open_vocabulary``, and either dtype: ``float32``, or ``float16`` (half the
bytes; a value outside float16's range is refused at writing).  Readers hand arrays back in the
stored dtype; the task models compute in float32 (:class:`~elmoc.tasks.embedder.TokenEmbedder`).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from elmoc.errors import ConfigError, InputFileError

log = logging.getLogger(__name__)

INDEX_KEY = "sentence_to_index"
LAYOUT_ATTR = "layout"  # absent: allennlp
FEATURES_KEY, OFFSETS_KEY = "features", "offsets"
DTYPES = {"float32": np.dtype("<f4"), "float16": np.dtype("<f2")}


def dtype_of(name: str) -> np.dtype:
    """The numpy dtype of ``float32`` / ``float16`` (ConfigError for another name)."""
    if name not in DTYPES:
        raise ConfigError(f"feature dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return DTYPES[name]


def stored(value: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    """``value`` as ``dtype``; a finite value that float16 cannot hold is refused (ConfigError)."""
    with np.errstate(over="ignore"):
        out = value.astype(dtype, copy=False)
    if out.dtype != value.dtype and not np.isfinite(out).all() and np.isfinite(value).all():
        biggest = float(np.abs(value).max())
        raise ConfigError(f"{what}: a feature of magnitude {biggest:.4g} overflows {dtype.name} (largest "
                          f"{float(np.finfo(dtype).max):.0f}); write this model's features as float32")
    return out


class PerSentenceWriter:
    """Dataset ``str(i)`` per sentence (the ``allennlp`` layout)."""

    name = "allennlp"

    def __init__(self, h5, dtype: np.dtype, lengths: Sequence[int] | None, layers: int, dim: int):
        self.h5, self.dtype = h5, dtype

    def add(self, i: int, value: np.ndarray):
        """Returns the new dataset: the caller keeps it open until its next flush (a full disk
        raises there, not in a finaliser)."""
        return self.h5.create_dataset(str(i), data=stored(value, self.dtype, f"sentence {i}"))

    def finish(self) -> None:
        pass


class ContiguousWriter:
    """Every sentence's rows in ``features`` (layers, total_tokens, dim) at ``offsets`` (the
    ``contiguous`` layout); needs every sentence's token count before the first one."""

    name = "contiguous"

    def __init__(self, h5, dtype: np.dtype, lengths: Sequence[int] | None, layers: int, dim: int):
        if lengths is None:
            raise ValueError("the contiguous layout needs the sentence lengths before writing")
        self.offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(np.asarray(lengths, dtype=np.int64), out=self.offsets[1:])
        self.dtype, self.layers, self.dim = dtype, layers, dim
        # unchunked, uncompressed: readers map it (HDF5 allocates it at the first write)
        self.features = h5.create_dataset(FEATURES_KEY, (layers, int(self.offsets[-1]), dim), dtype=dtype)
        h5.create_dataset(OFFSETS_KEY, data=self.offsets)
        h5.attrs[LAYOUT_ATTR] = self.name
        self.written = np.zeros(len(lengths), dtype=bool)

    def add(self, i: int, value: np.ndarray) -> None:
        """Writes into the one ``features`` dataset (returns None: nothing to keep open)."""
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        if value.shape != (self.layers, b - a, self.dim):
            raise ValueError(f"sentence {i}: features of shape {value.shape}, expected {(self.layers, b - a, self.dim)}")
        self.features[:, a:b] = stored(value, self.dtype, f"sentence {i}")
        self.written[i] = True

    def finish(self) -> None:
        if not self.written.all():
            raise ValueError(f"sentence {int(np.argmin(self.written))} was never written")


def _gather_each(reader, keys: Sequence[str], lengths: Sequence[int], time: int) -> np.ndarray:
    """(layers, batch, time, dim) in the stored dtype, zero past each length: sentence by sentence."""
    out = np.zeros((reader.num_layers, len(keys), time, reader.dim), dtype=reader.dtype)
    for i, key in enumerate(keys):
        out[:, i, : lengths[i]] = reader.array(key)
    return out


def _shape_error(path: Path, key: str, shape: tuple) -> InputFileError:
    return InputFileError(path, f"dataset {key!r} has shape {shape}; expected (layers, tokens, dim)")


class PerSentenceReader:
    """The ``allennlp`` layout: one dataset per sentence, loaded into memory when the indexed
    ones total at most ``max_memory_bytes``, else read dataset by dataset."""

    name = "allennlp"

    def __init__(self, h5, path: Path, index: dict[str, str], max_memory_bytes: int):
        self.path, self._file = path, h5
        shapes, dtypes, total = set(), set(), 0
        for key in set(index.values()):
            if key not in h5:
                raise InputFileError(path, f"{INDEX_KEY!r} names dataset {key!r}, which is missing")
            ds = h5[key]
            if len(ds.shape) != 3:
                raise _shape_error(path, key, ds.shape)
            shapes.add((ds.shape[0], ds.shape[2]))
            dtypes.add(ds.dtype)
            total += int(np.prod(ds.shape)) * ds.dtype.itemsize
        if len(shapes) > 1:
            raise InputFileError(path, f"datasets disagree on (layers, dim): {sorted(shapes)}")
        if not shapes:
            raise InputFileError(path, "the feature file holds no sentences")
        self.num_layers, self.dim = shapes.pop()
        self.dtype = _one_dtype(path, dtypes)
        self.count = sum(1 for k in h5 if k != INDEX_KEY)
        self._memory: dict[str, np.ndarray] | None = None
        if total <= max_memory_bytes:
            self._memory = {k: np.asarray(h5[k][()], dtype=self.dtype) for k in set(index.values())}
            self._file.close()
            self._file = None
        else:
            log.info("%s: %.1f GB of features, reading lazily", path, total / 1024**3)

    def rows(self, key: str) -> int:
        return self._memory[key].shape[1] if self._memory is not None else self._file[key].shape[1]

    def array(self, key: str) -> np.ndarray:
        """(layers, tokens, dim) in the stored dtype; any dataset of the file by key."""
        if self._memory is not None and key in self._memory:
            return self._memory[key]
        if self._file is None:  # loaded into memory: reopen for a dataset outside the index
            import h5py

            with h5py.File(self.path, "r") as h5:
                return self._checked(key, h5)
        return self._checked(key, self._file)

    def _checked(self, key: str, h5) -> np.ndarray:
        if key not in h5:
            raise InputFileError(self.path, f"dataset {key!r} is missing")
        value = np.asarray(h5[key][()])
        if value.ndim != 3 or (value.shape[0], value.shape[2]) != (self.num_layers, self.dim):
            raise _shape_error(self.path, key, value.shape)
        return value.astype(self.dtype, copy=False)

    def gather(self, keys: Sequence[str], lengths: Sequence[int], time: int) -> np.ndarray:
        return _gather_each(self, keys, lengths, time)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ContiguousReader:
    """The ``contiguous`` layout, mapped into memory (a file HDF5 stored chunked or compressed,
    as ``h5repack`` may leave it, is read into memory when it fits, else sentence by sentence)."""

    name = "contiguous"

    def __init__(self, h5, path: Path, index: dict[str, str], max_memory_bytes: int):
        self.path, self._file = path, h5
        for key in (FEATURES_KEY, OFFSETS_KEY):
            if key not in h5:
                raise InputFileError(path, f"layout 'contiguous' without the {key!r} dataset; "
                                     "extract the features again")
        ds, offsets = h5[FEATURES_KEY], h5[OFFSETS_KEY]
        if len(ds.shape) != 3:
            raise InputFileError(path, f"{FEATURES_KEY!r} has shape {ds.shape}; expected (layers, total_tokens, dim)")
        self.num_layers, total, self.dim = (int(n) for n in ds.shape)
        self.dtype = _one_dtype(path, {ds.dtype})
        self.offsets = np.asarray(offsets[()])
        if (self.offsets.ndim != 1 or self.offsets.dtype.kind not in "iu" or len(self.offsets) < 1
                or self.offsets[0] != 0 or self.offsets[-1] != total or np.any(np.diff(self.offsets) < 0)):
            raise InputFileError(path, f"{OFFSETS_KEY!r} must rise from 0 to {total} (the token rows of "
                                 f"{FEATURES_KEY!r}) with one entry per sentence and one more; extract the features again")
        self.offsets = self.offsets.astype(np.int64)
        self.count = len(self.offsets) - 1
        if self.count == 0 or not index:
            raise InputFileError(path, "the feature file holds no sentences")
        for key in set(index.values()):
            if not (key.isdigit() and int(key) < self.count and str(int(key)) == key):
                raise InputFileError(path, f"{INDEX_KEY!r} names sentence {key!r}, but the file holds "
                                     f"sentences 0-{self.count - 1}")
        self._data: Any = None
        offset = ds.id.get_offset()
        if ds.chunks is None and ds.compression is None and offset is not None and ds.dtype.isnative:
            self._data = np.asarray(np.memmap(path, dtype=ds.dtype, mode="r", offset=offset, shape=ds.shape))
        elif ds.size * ds.dtype.itemsize <= max_memory_bytes:
            self._data = ds[()]
        if self._data is not None:
            self._file.close()
            self._file = None
        else:
            log.info("%s: %.1f GB of chunked features, reading sentence by sentence", path,
                     ds.size * ds.dtype.itemsize / 1024**3)

    def rows(self, key: str) -> int:
        i = int(key)
        return int(self.offsets[i + 1] - self.offsets[i])

    def array(self, key: str) -> np.ndarray:
        i = int(key)
        rows = slice(int(self.offsets[i]), int(self.offsets[i + 1]))
        return self._data[:, rows] if self._data is not None else self._file[FEATURES_KEY][:, rows]

    def gather(self, keys: Sequence[str], lengths: Sequence[int], time: int) -> np.ndarray:
        if self._data is None:
            return _gather_each(self, keys, lengths, time)
        starts = self.offsets[np.fromiter((int(k) for k in keys), dtype=np.int64, count=len(keys))]
        steps = np.arange(time, dtype=np.int64)
        pad = steps[None, :] >= np.asarray(lengths, dtype=np.int64)[:, None]  # (batch, time)
        rows = np.where(pad, 0, starts[:, None] + steps[None, :]).ravel()
        out = np.take(self._data, rows, axis=1)  # (layers, batch * time, dim): one copy, no per-sentence call
        if pad.any():
            out[:, pad.ravel()] = 0
        return out.reshape(self.num_layers, len(keys), time, self.dim)

    def close(self) -> None:
        self._data = None
        if self._file is not None:
            self._file.close()
            self._file = None


def _one_dtype(path: Path, dtypes: set) -> np.dtype:
    known = {d.name for d in DTYPES.values()}
    names = sorted({np.dtype(d).name for d in dtypes})
    if len(names) != 1 or names[0] not in known:
        raise InputFileError(path, f"features stored as {', '.join(names)}; expected one of {', '.join(sorted(known))}")
    return np.dtype(names[0])


WRITERS = {w.name: w for w in (PerSentenceWriter, ContiguousWriter)}
READERS = {r.name: r for r in (PerSentenceReader, ContiguousReader)}
LAYOUTS = tuple(WRITERS)


def writer_of(name: str):
    """The writer class of layout ``name`` (ConfigError for another name)."""
    if name not in WRITERS:
        raise ConfigError(f"feature layout must be one of {', '.join(WRITERS)}, got {name!r}")
    return WRITERS[name]
