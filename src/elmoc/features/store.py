"""The feature file: contextual features in HDF5 (spec 5.3), written by :func:`write_features`
(``elmoc extract``, ``elmoc embed``), converted by :func:`convert_features` (``elmoc
convert-features``) and read by :class:`FeatureStore` (the downstream tasks).

Two layouts (:mod:`elmoc.features.layouts`): ``allennlp`` (the default, as ``allennlp elmo
--all``: one dataset per input line, keyed ``str(i)``, of shape ``(num_layers, num_tokens,
dim)``, ``(num_tokens, dim)`` with ``--top``/``--average``) and ``contiguous`` (one dataset
``features`` of shape ``(num_layers, total_tokens, dim)`` and the ``offsets`` of each sentence's
rows, which the tasks read without an HDF5 call per sentence); float32 or float16.  Both hold a
dataset ``sentence_to_index``: a one-element variable-length string holding a JSON object that
maps the sentence text (tokens joined by single spaces) to its key, and attributes
``num_layers``, ``dim``, ``boundaries``, ``open_vocabulary``.  A task looks up each instance's
tokens by their text, so the order of the sentences file does not matter and a features file
can serve any task whose sentences it contains, but every looked-up sentence must be present
and have exactly as many feature rows as tokens: anything else is an
:class:`~elmoc.errors.InputFileError`, never a silent misalignment.

:class:`FeatureStore` sniffs the layout (the file attribute ``layout``; absent in AllenNLP's
files).  Small ``allennlp`` files are loaded into memory once; bigger ones are read dataset by
dataset on demand (the SST all-subtrees case); ``contiguous`` files are mapped into memory.
"""
from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import numpy as np

from elmoc.errors import ConfigError, InputFileError
from elmoc.features.layouts import INDEX_KEY, LAYOUT_ATTR, READERS, dtype_of, writer_of

if TYPE_CHECKING:
    import torch

    from elmoc.features.bilm import BiLM

log = logging.getLogger(__name__)

INDEX_SUFFIX = ".index"  # the sentence index is built in TMP.index beside the temp HDF5 file, then stored
FLUSH_EVERY = 256  # sentences written between two flushes of the feature file (a full disk raises there)
ATTRIBUTES = ("num_layers", "dim", "boundaries", "open_vocabulary")  # copied by convert_features


def sentence_key(tokens: Sequence[str]) -> str:
    """The text under which a token list is stored: tokens joined by one space."""
    return " ".join(tokens)


def write_features(bilm: "BiLM", sentences: Iterable[Sequence[str]], output: str | Path, batch_size: int = 64,
                   boundaries: bool | None = None, device: "str | torch.device" = "cpu",
                   layers: str = "all", max_tokens: int | None = None, total: int | None = None,
                   forget_sentences: bool = False, layout: str = "allennlp", dtype: str = "float32") -> int:
    """Write the feature file of ``sentences`` (line ``i`` -> dataset ``str(i)``, or rows
    ``offsets[i]:offsets[i + 1]`` of the ``contiguous`` layout) atomically; returns how many
    sentences it holds.

    ``sentences``: a list, or any iterable (a file being read with
    :func:`~elmoc.features.sentences.iter_sentences`): it is consumed in chunks, and what
    stays in memory is one chunk, one batch's features and the ``sentence_to_index``
    text, gathered in a temporary file beside the output and read back once at the end
    (``forget_sentences`` leaves that index out, as ``allennlp elmo --forget-sentences``;
    :class:`FeatureStore` then refuses the file); the ``contiguous`` layout needs every
    sentence's length first, so an iterable is read into a list.  ``layers``: ``all`` (dataset
    ``(layers, words, dim)``), ``top`` (``(words, dim)``, the last layer) or ``average``
    (``(words, dim)``, the mean of the layers), as the ``--all/--top/--average`` flags of
    ``allennlp elmo``; the ``contiguous`` layout holds ``all``.  ``batch_size`` / ``max_tokens``:
    sentences and padded tokens per batch (:func:`~elmoc.features.embed.length_batches`);
    ``total``: the sentence count for the progress bar.  ``boundaries`` overrides the model's
    setting.  ``layout``: ``allennlp`` or ``contiguous`` (:mod:`elmoc.features.layouts`);
    ``dtype``: ``float32`` or ``float16`` (half the bytes).
    """
    from elmoc.devices import resolve_device
    from elmoc.features.embed import check_batching, iter_features, select_layers

    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name and sizes before any work
    check_batching(batch_size, max_tokens)
    writer_of(layout), dtype_of(dtype)
    lengths = None
    if layout != "allennlp":
        if layers != "all":
            raise ConfigError(f"the {layout} layout holds every layer; write --{layers} features in the allennlp layout")
        sentences = sentences if isinstance(sentences, list) else list(sentences)
        lengths = [len(s) for s in sentences]
    if boundaries is not None:
        bilm.boundaries = boundaries
    bilm = bilm.to(resolve_device(device)).eval()
    if total is None and hasattr(sentences, "__len__"):
        total = len(sentences)
    count = 0
    attrs = {"num_layers": bilm.num_layers, "dim": bilm.output_dim, "boundaries": bilm.boundaries,
             "open_vocabulary": bilm.open_vocabulary}
    with feature_writer(output, layout, dtype, lengths, bilm.num_layers, bilm.output_dim, attrs,
                        forget_sentences) as add:
        # identical sentences have equal lengths and the length sort is stable, so they come
        # in input order and the last one's key wins in the index, as in a dict over the input
        for i, tokens, value in iter_features(bilm, sentences, layers, batch_size, max_tokens,
                                              progress=True, total=total):
            add(i, tokens, value)
            count += 1
    log.info("wrote %d sentences x %d layers x %d dims (%s, %s) to %s", count, bilm.num_layers, bilm.output_dim,
             layout, dtype, output)
    return count


@contextlib.contextmanager
def feature_writer(output: str | Path, layout: str, dtype: str, lengths: Sequence[int] | None, layers: int,
                   dim: int, attrs: dict, forget_sentences: bool = False, index_text: str | None = None) -> Iterator:
    """``add(i, tokens, value)`` writing sentence ``i`` into a temporary beside ``output``, which
    becomes ``output`` when the block ends without an error (the index and ``attrs`` stored).
    ``lengths``: every sentence's token count (the ``contiguous`` layout needs them);
    ``index_text``: the ``sentence_to_index`` JSON to store as is instead of building it."""
    import h5py

    from elmoc.io.atomic import atomic_path, raise_if_terminated
    from elmoc.io.output_paths import remove_stale_temps

    kind, numpy_dtype = writer_of(layout), dtype_of(dtype)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    for stale in remove_stale_temps(output, companions=(INDEX_SUFFIX,)):
        log.warning("removed %s, left behind by an interrupted run", stale)
    # HDF5 holds the temp file (an exclusive flock) while it is open: a concurrent run's
    # remove_stale_temps leaves it alone, and our own flock would block HDF5's
    with atomic_path(output, held=False) as tmp, \
            open(f"{tmp}{INDEX_SUFFIX}", "w+", encoding="utf-8") as index:
        h5 = h5py.File(tmp, "w")
        written = []  # datasets since the last flush: HDF5 writes them when they are closed, where a
        # full disk would only be "Exception ignored" (and a crash at exit), so they are flushed here
        try:
            writer = kind(h5, numpy_dtype, lengths, layers, dim)
            count = 0

            def add(i: int, tokens: Sequence[str], value: np.ndarray) -> None:
                nonlocal count
                raise_if_terminated()  # a SIGTERM whose exception Python swallowed (io/atomic.py)
                written.append(writer.add(i, value))
                if len(written) >= FLUSH_EVERY:
                    h5.flush()
                    written.clear()
                if not forget_sentences and index_text is None:
                    index.write(f"{',' if count else ''}{json.dumps(sentence_key(tokens))}:{json.dumps(str(i))}")
                count += 1

            yield add
            writer.finish()
            if index_text is not None or not forget_sentences:
                index.seek(0)
                ds = h5.create_dataset(INDEX_KEY, (1,), dtype=h5py.string_dtype())
                ds[0] = index_text if index_text is not None else "{" + index.read() + "}"
                written.append(ds)
            for key, value in attrs.items():
                h5.attrs[key] = value
            h5.flush()  # every write happens here, in this block: none is left for close()
        except BaseException:
            close_abandoned_hdf5(h5, tmp, written)
            raise
        finally:
            Path(f"{tmp}{INDEX_SUFFIX}").unlink(missing_ok=True)
        written.clear()
        h5.close()


def convert_features(source: str | Path, output: str | Path, layout: str, dtype: str | None = None) -> int:
    """Write the feature file ``source`` (either layout) again as ``layout`` and ``dtype``
    (None: the source's) at ``output``; every sentence keeps its position, its key and its
    values (exactly, or rounded once to float16), the index and the attributes are copied.
    Returns how many sentences it holds."""
    src = FeatureStore(source, max_memory_bytes=0)
    try:
        dtype = dtype or src.dtype.name
        keys = [str(i) for i in range(src.count)]
        lengths = [src.rows(k) for k in keys] if layout != "allennlp" else None
        attrs = {k: src.attrs[k] for k in ATTRIBUTES if k in src.attrs}
        with feature_writer(output, layout, dtype, lengths, src.num_layers, src.dim, attrs,
                            index_text=src.index_text) as add:
            for key in keys:
                add(int(key), (), src.array(key))
    finally:
        src.close()
    log.info("converted %s (%s, %s) to %s (%s, %s): %d sentences", source, src.layout, src.dtype.name, output,
             layout, dtype, src.count)
    return src.count


def close_abandoned_hdf5(h5, tmp: str | Path, objects: list) -> None:
    """Close the HDF5 file ``h5`` open on the temporary ``tmp`` after a failed write (a full
    disk), with no error and no crash.  HDF5 still holds data it has not written (the datasets
    in ``objects``, its caches) and writes it when they and the file are closed; on a full disk
    those writes fail where Python can only print them ("Exception ignored", hundreds of lines),
    and HDF5 left with a file it could not close crashes the process at exit.  So the file's
    descriptor is first pointed at an anonymous in-memory file (Linux ``memfd_create``; elsewhere
    the temporary is emptied, which frees the space it took), where those last writes succeed
    and vanish; the temporary itself is deleted by the caller."""
    import gc
    import os
    import sys

    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        try:
            fd = h5.id.get_vfd_handle()
            sink = os.memfd_create("elmoc-abandoned-hdf5")
            os.dup2(sink, fd)
            os.close(sink)
        except (AttributeError, OSError, ValueError, RuntimeError):
            with contextlib.suppress(OSError):
                os.truncate(tmp, 0)
        objects.clear()
        gc.collect()
        with contextlib.suppress(Exception):
            h5.close()
    finally:
        sys.unraisablehook = hook


class FeatureStore:
    """Per-sentence feature arrays from one HDF5 file of either layout (sniffed).

    Args:
        path: the HDF5 file written by :func:`write_features` (``elmoc extract``) or AllenNLP.
        max_memory_bytes: an ``allennlp``-layout file whose indexed datasets total at most this
            many bytes is loaded into memory, a bigger one read dataset by dataset; a
            ``contiguous`` file is mapped into memory (the operating system caches what fits).

    Attributes:
        num_layers, dim: of every sentence (checked to agree).
        dtype: the stored ``numpy.float32`` or ``numpy.float16``.
        layout: ``allennlp`` or ``contiguous``.
        count: sentence positions in the file (``0 .. count - 1``; the index may name fewer:
            a repeated sentence keeps its last key).
        attrs: the file's attributes.
    """

    def __init__(self, path: str | Path, max_memory_bytes: int = 2 * 1024**3):
        import h5py

        self.path = Path(path)
        if not self.path.is_file():
            raise InputFileError(self.path, "feature file not found; run `elmoc extract` for this task first")
        try:
            h5 = h5py.File(self.path, "r")
        except OSError as e:
            raise InputFileError(self.path, f"not a readable HDF5 file ({e})") from None
        try:
            self.index, self.index_text = self._read_index(h5)
            layout = h5.attrs.get(LAYOUT_ATTR, "allennlp")
            layout = layout.decode("utf-8") if isinstance(layout, bytes) else str(layout)
            if layout not in READERS:
                raise InputFileError(self.path, f"unknown feature layout {layout!r} (this elmoc reads "
                                     f"{', '.join(READERS)}); convert it with the elmoc that wrote it")
            self.attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()}
            self._reader = READERS[layout](h5, self.path, self.index, max_memory_bytes)
        except BaseException:
            h5.close()
            raise
        self.layout = layout
        self.num_layers, self.dim, self.dtype = self._reader.num_layers, self._reader.dim, self._reader.dtype
        self.count = self._reader.count

    def _read_index(self, h5) -> tuple[dict[str, str], str]:
        if INDEX_KEY not in h5:
            raise InputFileError(self.path, f"no {INDEX_KEY!r} dataset; extract without --forget-sentences")
        raw = h5[INDEX_KEY][0]
        raw = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        try:
            index = json.loads(raw)
        except json.JSONDecodeError as e:
            raise InputFileError(self.path, f"{INDEX_KEY!r} is not valid JSON ({e})") from None
        if not isinstance(index, dict) or not all(isinstance(v, str) for v in index.values()):
            raise InputFileError(self.path, f"{INDEX_KEY!r} must map each sentence to a key string")
        return index, raw

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, tokens: Sequence[str]) -> bool:
        return sentence_key(tokens) in self.index

    def key(self, tokens: Sequence[str]) -> str:
        """The key of ``tokens``, checked to be present with one feature row per token."""
        text = sentence_key(tokens)
        key = self.index.get(text)
        if key is None:
            raise InputFileError(
                self.path,
                f"no features for sentence {text[:80]!r}; the feature file was extracted from other "
                "task data: rerun `elmoc task-sentences` and `elmoc extract`",
            )
        rows = self._reader.rows(key)
        if rows != len(tokens):
            raise InputFileError(
                self.path,
                f"dataset {key!r} has {rows} token rows but the sentence {text[:80]!r} has "
                f"{len(tokens)} tokens; the features were extracted with another tokenization",
            )
        return key

    def get(self, tokens: Sequence[str]) -> np.ndarray:
        """Features of one sentence, shape (num_layers, len(tokens), dim) float32."""
        return np.asarray(self._reader.array(self.key(tokens)), dtype=np.float32)

    def batch(self, sentences: Sequence[Sequence[str]], time: int | None = None) -> np.ndarray:
        """Features of ``sentences`` padded with zeros to ``time`` tokens (default: the longest),
        shape (num_layers, len(sentences), time, dim), in the stored dtype."""
        keys = [self.key(s) for s in sentences]
        lengths = [len(s) for s in sentences]
        return self._reader.gather(keys, lengths, max(lengths) if time is None else time)

    def rows(self, key: str) -> int:
        """Token rows of the sentence at position ``key`` (``str(i)``)."""
        return self._reader.rows(key)

    def array(self, key: str) -> np.ndarray:
        """(num_layers, tokens, dim) of the sentence at position ``key``, in the stored dtype."""
        return self._reader.array(key)

    def check(self, sentences: Iterable[Sequence[str]]) -> int:
        """Verify every sentence is present with the right token count; returns how many were checked."""
        n = 0
        for tokens in sentences:
            self.key(tokens)
            n += 1
        return n

    def close(self) -> None:
        self._reader.close()
