"""A compressed model directory measured against its source (issue 24.3): size on disk,
embedding speed (tokens/s, the two models' runs alternated so that a busy machine
slows both alike) and the fidelity of the features (per-layer mean cosine, the worst
token's cosine, the largest absolute difference).
"""
from __future__ import annotations

import datetime
import os
import platform
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from elmoc.pretrained.elmo import embed_sentences
from elmoc.pretrained.loader import load_bilm


def directory_size(path: str | Path) -> int:
    """Bytes of the files of a model directory (it holds no subfolders)."""
    return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())


def feature_fidelity(reference: Sequence[np.ndarray], other: Sequence[np.ndarray]) -> dict[str, Any]:
    """How close ``other``'s features are to ``reference``'s, over every token.

    Shape: each array (layers, words, dim), the same shapes in both lists.

    Returns:
        ``mean_cosine``: per layer, the mean over tokens of the cosine of the two
        (dim,) vectors; ``min_cosine``: the smallest of those cosines (any layer);
        ``max_abs_diff``: the largest absolute difference of any value.
    """
    if len(reference) != len(other):
        raise ValueError(f"{len(reference)} reference sentences, {len(other)} others")
    sums: np.ndarray | None = None
    count, worst, diff = 0, 1.0, 0.0
    for a, b in zip(reference, other):
        if a.shape != b.shape:
            raise ValueError(f"features of shape {a.shape} and {b.shape}")
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        norms = np.linalg.norm(a64, axis=-1) * np.linalg.norm(b64, axis=-1)  # (layers, words)
        cos = (a64 * b64).sum(-1) / np.maximum(norms, 1e-12)
        sums = cos.sum(axis=1) if sums is None else sums + cos.sum(axis=1)
        count += a.shape[1]
        worst = min(worst, float(cos.min()))
        diff = max(diff, float(np.abs(a64 - b64).max()))
    if sums is None or count == 0:
        raise ValueError("no tokens to compare")
    return {"mean_cosine": [float(x) for x in sums / count], "min_cosine": worst, "max_abs_diff": diff}


def compare_models(source: str | Path, compressed: str | Path, sentences: Sequence[Sequence[str]],
                   batch_size: int = 64, repeats: int = 3) -> dict[str, Any]:
    """Embed ``sentences`` with both directories on the CPU (this process's torch threads):
    one warm-up run each, then ``repeats`` rounds alternating which model goes first.

    Returns:
        A JSON-ready record: ``size_bytes``, ``tokens_per_s`` (over all timed rounds) of
        ``source`` and ``compressed``, ``speed_ratio`` (compressed / source), the fidelity of :func:`feature_fidelity`, and how it was
        measured (sentences, tokens, batch size, threads, rounds, machine, date).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    models = {"source": load_bilm(source), "compressed": load_bilm(compressed)}
    tokens = sum(len(s) for s in sentences)
    seconds: dict[str, list[float]] = {k: [] for k in models}
    features: dict[str, list[np.ndarray]] = {}
    for round_ in range(repeats + 1):  # round 0 warms both up and is not timed
        order = ("source", "compressed") if round_ % 2 == 0 else ("compressed", "source")
        for key in order:
            start = time.perf_counter()
            features[key] = embed_sentences(models[key], sentences, "all", batch_size)
            if round_:
                seconds[key].append(time.perf_counter() - start)
    # over all rounds: load that comes and goes slows both models' runs of a round alike
    speed = {k: tokens * repeats / sum(v) for k, v in seconds.items()}
    return {
        "size_bytes": {"source": directory_size(source), "compressed": directory_size(compressed)},
        "tokens_per_s": speed,
        "speed_ratio": speed["compressed"] / speed["source"],
        **feature_fidelity(features["source"], features["compressed"]),
        "sentences": len(sentences), "tokens": tokens, "batch_size": batch_size,
        "threads": torch.get_num_threads(), "rounds": repeats,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip() + f", {os.cpu_count()} CPUs",
        "date": datetime.date.today().isoformat(),
    }
