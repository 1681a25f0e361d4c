"""The feature file: contextual features in the ``allennlp elmo --all`` HDF5 layout
(spec 5.3), written by :func:`write_features` (``elmoc extract``, ``elmoc embed``) and
read by :class:`FeatureStore` (the downstream tasks).

Layout: one float32 dataset per input line, keyed ``str(i)``, of shape
``(num_layers, num_tokens, dim)`` (``(num_tokens, dim)`` with ``--top``/``--average``),
plus a dataset ``sentence_to_index``: a one-element variable-length string holding a
JSON object that maps the sentence text (tokens joined by single spaces) to its key,
and attributes ``num_layers``, ``dim``, ``boundaries``, ``open_vocabulary``.  A task
looks up each instance's tokens by their text, so the order of the sentences file
does not matter and a features file can serve any task whose sentences it contains,
but every looked-up sentence must be present and have exactly as many feature rows as
tokens: anything else is an :class:`~elmoc.errors.InputFileError`, never a silent
misalignment.

Small files are loaded into memory once; files bigger than ``max_memory_bytes``
are read dataset by dataset on demand (the SST all-subtrees case).
"""
from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from elmoc.errors import InputFileError

if TYPE_CHECKING:
    import torch

    from elmoc.features.bilm import BiLM

log = logging.getLogger(__name__)

INDEX_KEY = "sentence_to_index"
INDEX_SUFFIX = ".index"  # the sentence index is built in TMP.index beside the temp HDF5 file, then stored
FLUSH_EVERY = 256  # datasets written between two flushes of the feature file (a full disk raises there)


def sentence_key(tokens: Sequence[str]) -> str:
    """The text under which a token list is stored: tokens joined by one space."""
    return " ".join(tokens)


def write_features(bilm: "BiLM", sentences: Iterable[Sequence[str]], output: str | Path, batch_size: int = 64,
                   boundaries: bool | None = None, device: "str | torch.device" = "cpu",
                   layers: str = "all", max_tokens: int | None = None, total: int | None = None,
                   forget_sentences: bool = False) -> int:
    """Write the feature file of ``sentences`` (line ``i`` -> dataset ``str(i)``) atomically;
    returns how many sentences it holds.

    ``sentences``: a list, or any iterable (a file being read with
    :func:`~elmoc.features.sentences.iter_sentences`): it is consumed in chunks, and what
    stays in memory is one chunk, one batch's features and the ``sentence_to_index``
    text, gathered in a temporary file beside the output and read back once at the end
    (``forget_sentences`` leaves that index out, as ``allennlp elmo --forget-sentences``;
    :class:`FeatureStore` then refuses the file).  ``layers``: ``all`` (dataset
    ``(layers, words, dim)``), ``top`` (``(words, dim)``, the last layer) or ``average``
    (``(words, dim)``, the mean of the layers), as the ``--all/--top/--average`` flags of
    ``allennlp elmo``.  ``batch_size`` / ``max_tokens``: sentences and padded tokens per
    batch (:func:`~elmoc.features.embed.length_batches`); ``total``: the sentence count
    for the progress bar.  ``boundaries`` overrides the model's setting.
    """
    import h5py

    from elmoc.devices import resolve_device
    from elmoc.features.embed import check_batching, iter_features, select_layers
    from elmoc.io.atomic import atomic_path, raise_if_terminated
    from elmoc.io.output_paths import remove_stale_temps

    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name and sizes before any work
    check_batching(batch_size, max_tokens)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    for stale in remove_stale_temps(output, companions=(INDEX_SUFFIX,)):
        log.warning("removed %s, left behind by an interrupted run", stale)
    if boundaries is not None:
        bilm.boundaries = boundaries
    bilm = bilm.to(resolve_device(device)).eval()
    if total is None and hasattr(sentences, "__len__"):
        total = len(sentences)
    count = 0
    # HDF5 holds the temp file (an exclusive flock) while it is open: a concurrent run's
    # remove_stale_temps leaves it alone, and our own flock would block HDF5's
    with atomic_path(output, held=False) as tmp, \
            open(f"{tmp}{INDEX_SUFFIX}", "w+", encoding="utf-8") as index:
        h5 = h5py.File(tmp, "w")
        written = []  # datasets since the last flush: HDF5 writes them when they are closed, where a
        # full disk would only be "Exception ignored" (and a crash at exit), so they are flushed here
        try:
            # identical sentences have equal lengths and the length sort is stable, so they come
            # in input order and the last one's key wins in the index, as in a dict over the input
            for i, tokens, value in iter_features(bilm, sentences, layers, batch_size, max_tokens,
                                                  progress=True, total=total):
                raise_if_terminated()  # a SIGTERM whose exception Python swallowed (io/atomic.py)
                written.append(h5.create_dataset(str(i), data=value, dtype="float32"))
                if len(written) >= FLUSH_EVERY:
                    h5.flush()
                    written.clear()
                if not forget_sentences:
                    index.write(f"{',' if count else ''}{json.dumps(sentence_key(tokens))}:{json.dumps(str(i))}")
                count += 1
            if not forget_sentences:
                index.seek(0)
                ds = h5.create_dataset(INDEX_KEY, (1,), dtype=h5py.string_dtype())
                ds[0] = "{" + index.read() + "}"
                written.append(ds)
            h5.attrs["num_layers"] = bilm.num_layers
            h5.attrs["dim"] = bilm.output_dim
            h5.attrs["boundaries"] = bilm.boundaries
            h5.attrs["open_vocabulary"] = bilm.open_vocabulary
            h5.flush()  # every write happens here, in this block: none is left for close()
        except BaseException:
            close_abandoned_hdf5(h5, tmp, written)
            raise
        finally:
            Path(f"{tmp}{INDEX_SUFFIX}").unlink(missing_ok=True)
        written.clear()
        h5.close()
    log.info("wrote %d sentences x %d layers x %d dims to %s", count, bilm.num_layers, bilm.output_dim, output)
    return count


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
    """Per-sentence feature arrays from one HDF5 file.

    Args:
        path: the HDF5 file written by :func:`write_features` (``elmoc extract``).
        max_memory_bytes: load everything into memory when the datasets total at
            most this many bytes; otherwise keep the file open and read lazily.

    Attributes:
        num_layers, dim: of every dataset (checked to agree).
    """

    def __init__(self, path: str | Path, max_memory_bytes: int = 2 * 1024**3):
        import h5py

        self.path = Path(path)
        if not self.path.is_file():
            raise InputFileError(self.path, "feature file not found; run `elmoc extract` for this task first")
        try:
            self._file = h5py.File(self.path, "r")
        except OSError as e:
            raise InputFileError(self.path, f"not a readable HDF5 file ({e})") from None
        if INDEX_KEY not in self._file:
            raise InputFileError(self.path, f"no {INDEX_KEY!r} dataset; extract without --forget-sentences")
        raw = self._file[INDEX_KEY][0]
        raw = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        try:
            self.index: dict[str, str] = json.loads(raw)
        except json.JSONDecodeError as e:
            raise InputFileError(self.path, f"{INDEX_KEY!r} is not valid JSON ({e})") from None
        shapes = set()
        total = 0
        for key in set(self.index.values()):
            if key not in self._file:
                raise InputFileError(self.path, f"{INDEX_KEY!r} names dataset {key!r}, which is missing")
            shape = self._file[key].shape
            if len(shape) != 3:
                raise InputFileError(self.path, f"dataset {key!r} has shape {shape}; expected (layers, tokens, dim)")
            shapes.add((shape[0], shape[2]))
            total += int(np.prod(shape)) * 4
        if len(shapes) > 1:
            raise InputFileError(self.path, f"datasets disagree on (layers, dim): {sorted(shapes)}")
        if not shapes:
            raise InputFileError(self.path, "the feature file holds no sentences")
        self.num_layers, self.dim = shapes.pop()
        self._memory: dict[str, np.ndarray] | None = None
        if total <= max_memory_bytes:
            self._memory = {k: np.asarray(self._file[k][()], dtype=np.float32) for k in set(self.index.values())}
            self._file.close()
            self._file = None
        else:
            log.info("%s: %.1f GB of features, reading lazily", self.path, total / 1024**3)

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, tokens: Sequence[str]) -> bool:
        return sentence_key(tokens) in self.index

    def get(self, tokens: Sequence[str]) -> np.ndarray:
        """Features of one sentence, shape (num_layers, len(tokens), dim) float32."""
        text = sentence_key(tokens)
        key = self.index.get(text)
        if key is None:
            raise InputFileError(
                self.path,
                f"no features for sentence {text[:80]!r}; the feature file was extracted from other "
                "task data: rerun `elmoc task-sentences` and `elmoc extract`",
            )
        array = self._memory[key] if self._memory is not None else np.asarray(self._file[key][()], np.float32)
        if array.shape[1] != len(tokens):
            raise InputFileError(
                self.path,
                f"dataset {key!r} has {array.shape[1]} token rows but the sentence {text[:80]!r} has "
                f"{len(tokens)} tokens; the features were extracted with another tokenization",
            )
        return array

    def check(self, sentences: Iterable[Sequence[str]]) -> int:
        """Verify every sentence is present with the right token count; returns how many were checked."""
        n = 0
        for tokens in sentences:
            text = sentence_key(tokens)
            key = self.index.get(text)
            if key is None:
                self.get(tokens)  # raises the missing-sentence error
            rows = self._memory[key].shape[1] if self._memory is not None else self._file[key].shape[1]
            if rows != len(tokens):
                self.get(tokens)  # raises the token-count error
            n += 1
        return n

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
