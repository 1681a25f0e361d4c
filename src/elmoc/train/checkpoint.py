"""Checkpoints that hold everything needed to resume exactly, or to extract features.

A checkpoint is one ``torch.save`` dict:

``format``      ``"elmoc-lm-v1"``
``spec``        the resolved LM spec (input/encoder/output/optimizer/train)
``vocab_path``  path of the vocabulary the ids refer to
``direction``   ``"forward"`` or ``"backward"``
``model``       the LanguageModel state dict; frozen tables (FastText, CNN vectors) are
                not in it: they are reloaded from the paths in ``spec``, which must
                still exist when the checkpoint is used
``optimizers``  list of optimizer state dicts
``step``        number of optimizer steps taken
``tokens``      tokens trained on (all processes)
``data``        the batch iterator's position (see ``elmoc.data.batches``)
``rng``         torch / numpy / python RNG states of rank 0
``state``       the carried encoder state (None when states are reset every window)
``history``     heldout evaluations so far

Writes go to a temp file that is renamed into place, so an interrupted save never
leaves a truncated checkpoint behind.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmoc.data.atomic import atomic_path
from elmoc.errors import InputFileError

FORMAT = "elmoc-lm-v1"


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        torch.save({"format": FORMAT, **payload}, tmp)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "checkpoint not found; train the LM first (`elmoc train`)")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # torch raises many types for corrupt files
        raise InputFileError(path, f"cannot read checkpoint: {e}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise InputFileError(path, f"not an elmoc checkpoint (expected format {FORMAT!r})")
    return payload
