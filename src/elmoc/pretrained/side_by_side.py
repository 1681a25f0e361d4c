"""Several model directories measured side by side against one original (issue 36.4): the
parameters and bytes each stores, its embedding speed with every model timed in the same
rounds (one pass of each in turn, the fastest pass kept: a machine busy with other work
slows all of them alike) and how close its features are to the original's, per layer.

Any model directory takes part (``elmoc export``, ``elmoc compress``, a distilled student, a
pruned model); only the features are compared, so a model of other widths or depth is
measured for size and speed and its cosine is given where the layers can be paired
(:func:`layer_pairs`).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from elmoc.io.tensor_files import read_state, stored_file
from elmoc.pretrained import formats
from elmoc.pretrained.compare import directory_size, feature_fidelity
from elmoc.pretrained.elmo import embed_sentences
from elmoc.pretrained.loader import load_bilm, read_model_meta, stacks_of


def stored_parameters(directory: str | Path) -> dict[str, int]:
    """``{"parameters", "nonzero", "weights_bytes"}`` of a model directory's weights files
    (every stack's input layer and encoder; frozen tables are not weights and not counted).
    int8 values count as their dequantized floats; ``nonzero`` is what a pruned model keeps."""
    directory = Path(directory)
    total = nonzero = size = 0
    for stack in stacks_of(read_model_meta(directory)):
        path = stored_file(directory, stack)
        size += path.stat().st_size
        with formats.quiet_quantization():
            state = read_state(path, what="a model directory's weights file", fix="export the model again")
        for value in formats.widen(state).values():
            if value.is_floating_point():
                total += value.numel()
                nonzero += int(torch.count_nonzero(value))
    return {"parameters": total, "nonzero": nonzero, "weights_bytes": size}


def layer_pairs(original: np.ndarray, other: np.ndarray) -> list[tuple[int, int]] | None:
    """Which layer of ``other`` is compared with which of ``original``: each with its own
    when the shapes agree; with fewer layers of the same width, the input view with the
    original's and the others spread evenly up to top-with-top (a two-layer student of a
    four-layer original: 0-0, 1-2, 2-4); None when the widths differ (nothing to compare).

    Shape: ``original`` (layers, words, dim), ``other`` (layers', words, dim').
    """
    if original.shape[1:] != other.shape[1:]:
        return None
    top, own = original.shape[0] - 1, other.shape[0] - 1
    if own == top:
        return [(i, i) for i in range(top + 1)]
    if own == 0 or own > top:
        return None
    return [(i, round(i * top / own)) for i in range(own + 1)]


def measure_side_by_side(original: str | Path, models: dict[str, str | Path], sentences: Sequence[Sequence[str]],
                         rounds: int = 3, batch_size: int = 64) -> dict[str, dict[str, Any]]:
    """Measure ``original`` and every directory of ``models`` (role -> directory) in this
    process (its torch threads) on ``sentences``.

    One untimed pass of each (warm-up), then ``rounds`` rounds, each one pass of every model
    in turn, the order rotated from round to round.

    Returns:
        Role -> record (``"original"`` first): ``parameters``, ``nonzero``, ``weights_bytes``,
        ``size_bytes`` (the whole directory), ``tokens_per_s`` (its fastest pass),
        ``speed_ratio`` (that over the original's), ``layers``, ``dim`` and, where the layers
        pair up, ``layer_pairs`` with :func:`~elmoc.pretrained.compare.feature_fidelity`'s
        ``mean_cosine`` / ``min_cosine`` / ``max_abs_diff`` over those pairs.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    dirs = {"original": Path(original), **{role: Path(d) for role, d in models.items()}}
    bilms = {role: load_bilm(d) for role, d in dirs.items()}
    tokens = sum(len(s) for s in sentences)
    best = {role: float("inf") for role in bilms}
    features: dict[str, list[np.ndarray]] = {}
    roles = list(bilms)
    for r in range(rounds + 1):  # round 0 warms every model up and is not timed
        order = roles[r % len(roles):] + roles[: r % len(roles)]
        for role in order:
            start = time.perf_counter()
            out = embed_sentences(bilms[role], sentences, "all", batch_size)
            if r:
                best[role] = min(best[role], time.perf_counter() - start)
            else:
                features[role] = out
    records: dict[str, dict[str, Any]] = {}
    reference = features["original"]
    for role in roles:
        speed = tokens / best[role]
        first = features[role][0]
        record = {**stored_parameters(dirs[role]), "size_bytes": directory_size(dirs[role]), "tokens_per_s": speed,
                  "speed_ratio": speed * best["original"] / tokens, "layers": int(first.shape[0]),
                  "dim": int(first.shape[-1]), "directory": str(dirs[role].resolve())}
        pairs = layer_pairs(reference[0], first)
        if pairs is not None:
            own, theirs = [p[0] for p in pairs], [p[1] for p in pairs]
            record["layer_pairs"] = pairs
            record.update(feature_fidelity([a[theirs] for a in reference], [b[own] for b in features[role]]))
        records[role] = record
    return records
