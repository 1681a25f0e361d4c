"""Features of sentences: a :class:`~elmoc.features.bilm.BiLM` run over them in
length-sorted batches, one float32 array per sentence (``elmoc extract``, ``elmoc
embed``, :func:`elmoc.embed_sentences` and the feature file writer all read them from
here).

Speed without changing a number: sentences are read ``chunk_size`` at a time (a file
of any length streams through in constant memory), sorted by length within the chunk
so a batch holds sentences of about the same length (little padding), and cut into
batches of at most ``batch_size`` sentences and ``max_tokens`` padded tokens; every
sentence's features are handed back with its input position, so callers restore the
input order (the HDF5 keys are the positions).  Gradients are off
(``torch.inference_mode``).
"""
from __future__ import annotations

from itertools import islice
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
from tqdm import tqdm

from elmoc.errors import ConfigError
from elmoc.features.bilm import BiLM

LAYERS = ("all", "top", "average")
CHUNK_SIZE = 20_000  # sentences sorted together; features of one batch are in memory at a time


def select_layers(value: np.ndarray, layers: str) -> np.ndarray:
    """``all``: (layers, words, dim) as is; ``top``: the last layer; ``average``: the
    mean over layers (``allennlp elmo --all/--top/--average``)."""
    if layers == "all":
        return value
    if layers == "top":
        return value[-1]
    if layers == "average":
        return value.mean(axis=0)
    raise ConfigError(f"layers must be all, top or average, got {layers!r}")


def check_batching(batch_size: int, max_tokens: int | None) -> None:
    """Refuse a batch size below 1 or a token budget below 1 (one clear line)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch size must be a positive number of sentences, got {batch_size!r}")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ConfigError(f"max tokens must be a positive number of tokens per batch, got {max_tokens!r}")


def length_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Positions into ``lengths``, shortest first, cut into batches of at most
    ``batch_size`` sentences whose padded size (count x longest) is at most
    ``max_tokens`` (a sentence longer than ``max_tokens`` gets a batch of its own).
    Ties keep input order, so the batches are a function of the lengths alone."""
    check_batching(batch_size, max_tokens)
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda k: lengths[k]):
        full = len(current) == batch_size or (
            max_tokens is not None and current and (len(current) + 1) * lengths[i] > max_tokens)
        if full:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def iter_features(bilm: BiLM, sentences: Iterable[Sequence[str]], layers: str = "all", batch_size: int = 64,
                  max_tokens: int | None = None, chunk_size: int | None = None, progress: bool = False,
                  total: int | None = None) -> Iterator[tuple[int, Sequence[str], np.ndarray]]:
    """``(i, tokens, features)`` for every sentence of ``sentences`` (any iterable,
    consumed ``chunk_size`` at a time), ``i`` its position in the input; within a chunk
    in order of length, chunks in input order.

    ``layers`` as :func:`select_layers`; ``total`` (the sentence count, when known)
    sizes the progress bar.

    Shape: each array is (layers, words, dim) for ``all``, else (words, dim), float32.
    """
    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name
    check_batching(batch_size, max_tokens)
    if chunk_size is None:
        chunk_size = max(1, len(sentences)) if isinstance(sentences, Sequence) else CHUNK_SIZE
    if chunk_size < 1:
        raise ConfigError(f"chunk size must be >= 1, got {chunk_size!r}")
    bar = tqdm(total=total, desc="features", unit="sent", mininterval=5) if progress else None
    source = iter(sentences)
    offset = 0
    with torch.inference_mode():
        while chunk := [list(s) for s in islice(source, chunk_size)]:
            empty = next((k for k, s in enumerate(chunk) if not s), None)
            if empty is not None:
                raise ConfigError(f"sentence {offset + empty} is empty: pass at least one token per sentence")
            for index in length_batches([len(s) for s in chunk], batch_size, max_tokens):
                acts = bilm.embed([chunk[k] for k in index])[0].cpu().numpy()  # (batch, layers, words, dim)
                for row, k in enumerate(index):
                    yield offset + k, chunk[k], select_layers(acts[row][:, : len(chunk[k])], layers)
                if bar is not None:
                    bar.update(len(index))
            offset += len(chunk)
    if bar is not None:
        bar.close()


def sentence_features(bilm: BiLM, sentences: Sequence[Sequence[str]], layers: str = "all",
                      batch_size: int = 64, progress: bool = False,
                      max_tokens: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """``(i, features of sentences[i])`` for every sentence (:func:`iter_features`)."""
    for i, _, value in iter_features(bilm, sentences, layers, batch_size, max_tokens, progress=progress,
                                     total=len(sentences) if progress else None):
        yield i, value
