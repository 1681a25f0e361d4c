"""Features of a list of sentences: a :class:`~elmoc.features.bilm.BiLM` run batch by
batch over them, shortest first, one float32 array per sentence (``elmoc extract``,
``elmoc embed`` and :func:`elmoc.embed_sentences` all read them from here).
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm import tqdm

from elmoc.errors import ConfigError
from elmoc.features.bilm import BiLM

LAYERS = ("all", "top", "average")


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


def sentence_features(bilm: BiLM, sentences: Sequence[Sequence[str]], layers: str = "all",
                      batch_size: int = 64, progress: bool = False) -> Iterator[tuple[int, np.ndarray]]:
    """``(i, features of sentences[i])`` for every sentence, in order of length.

    The bi-LM runs on its own device, without gradients; ``layers`` as :func:`select_layers`.

    Shape: each array is (layers, words, dim) for ``all``, else (words, dim), float32.
    """
    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    starts = range(0, len(order), batch_size)
    if progress:
        starts = tqdm(starts, desc="features", unit="batch", mininterval=5)
    with torch.no_grad():
        for start in starts:
            index = order[start : start + batch_size]
            batch = [list(sentences[i]) for i in index]
            if any(not s for s in batch):
                raise ConfigError("an empty sentence: pass at least one token per sentence")
            acts = bilm.embed(batch)[0].cpu().numpy()  # (batch, layers, words, dim)
            for row, i in enumerate(index):
                yield i, select_layers(acts[row][:, : len(sentences[i])], layers)
