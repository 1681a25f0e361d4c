"""The trained LM's file, ``model.pt``: its format, its writer and its readers.

A ``torch.save`` dict of format :data:`FORMAT` (``"elmoc-lm-v1"``), read weights-only
(tensors and plain containers: a file that would run code is refused):

``format``        :data:`FORMAT`
``spec``          the resolved LM spec (input/encoder/output/optimizer/train/data/vocab)
``config_hash``   :func:`elmoc.train.checkpoint.config_hash` of ``spec``
``vocab_path``    path of the vocabulary the ids refer to
``vocab``         ``{"size", "sha256"}`` of the vocabulary's tokens in id order
``direction``     ``"forward"`` or ``"backward"``; ``"joint"`` for a joint bi-LM
                  (``train.directions: joint``, :class:`elmoc.lm.BidirectionalLM`, one file with
                  ``forward_encoder.*`` and ``backward_encoder.*``); ``"masked"`` for a masked LM
``model``         the LM's state dict; frozen tables (FastText, CNN vectors) are not in it:
                  they are reloaded from the paths in ``spec``, which must still exist when
                  the file is used
``step``, ``tokens``, ``seconds``  optimizer steps, tokens and wall time the LM trained for
``history``       heldout evaluations
``threads``, ``processes``, ``segments``  the process layout(s) it trained with
``inputs``        sha256 of every input file the spec names
``final``         True
``released``      only in a converted bilm-tf ELMo (:mod:`elmoc.pretrained.bilm_tf`): its source
``rewind``        only with ``train.rewind_step``: ``{"step", "model"}``, the state dict after that
                  many steps (0: the initialisation), where a lottery ticket restarts (``elmoc prune``)

``elmoc train`` writes it once, at the very end (:func:`elmoc.train.checkpoint.model_payload`);
its resumable ``checkpoint.pt`` is the same format with the training-only keys added and
``final`` False (:mod:`elmoc.train.checkpoint`), and a downstream task run's checkpoint is
written and read by the same functions under its own format (:mod:`elmoc.tasks.checkpoint`).
Whatever consumes a trained LM (extraction, export, the CNN table, out-of-vocabulary
composers) reads it here: :func:`load_checkpoint` one file, :func:`load_directions` the
stacks of a variant (two direction files, or one joint, masked or one-direction file).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from elmoc.directions import DIRECTIONS, FORWARD, JOINT, MASKED, one_direction
from elmoc.errors import InputFileError
from elmoc.io.atomic import atomic_path
from elmoc.io.safe_load import LEGACY_NUMPY_GLOBALS, load_weights_only

FORMAT = "elmoc-lm-v1"
TASK_FORMAT = "elmoc-task-v1"  # a downstream task run's checkpoint (elmoc.tasks.checkpoint.FORMAT)


def save_checkpoint(path: str | Path, payload: dict[str, Any], fmt: str = FORMAT) -> None:
    """Write ``payload`` (as format ``fmt``) to ``path`` atomically; the data reaches the
    disk (fsync) before the rename, so a crashed node cannot leave an empty file under the
    final name."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            torch.save({"format": fmt, **payload}, f)
            f.flush()
            os.fsync(f.fileno())


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu", mmap: bool = False,
                    formats: tuple[str, ...] = (FORMAT,)) -> dict[str, Any]:
    """Read a ``model.pt`` or a ``checkpoint.pt`` (see the module docstring).  ``mmap``
    maps the tensors instead of reading them (for a look at the metadata only).
    ``formats``: the formats accepted (a downstream task run's checkpoint is
    ``"elmoc-task-v1"``, :mod:`elmoc.tasks.checkpoint`).

    The file is read weights-only (:func:`elmoc.io.safe_load.load_weights_only`): a
    pickle that names anything but tensors and plain containers (the numpy RNG array of
    an older checkpoint aside) is refused with one line, and no code in it runs.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "not found; train the LM first (`elmoc train`)")
    payload = load_weights_only(path, map_location=map_location, mmap=mmap, allow=LEGACY_NUMPY_GLOBALS,
                                what="an elmoc checkpoint", fix="delete it and train again")
    if not isinstance(payload, dict) or payload.get("format") not in formats:
        raise InputFileError(path, f"not an elmoc checkpoint (expected format {' or '.join(map(repr, formats))})")
    return payload


def direction_payload(payload: dict[str, Any], direction: str, path: str | Path) -> dict[str, Any]:
    """One direction's LM from a ``model.pt``/``checkpoint.pt`` dict, as a separate
    direction's file holds it: a ``"forward"``/``"backward"`` file must be of that
    direction; a ``"joint"`` file gives the direction's view (its encoder as
    ``encoder.*``, the shared input and output layers), so whatever consumes one
    direction (extraction, export, the CNN table) reads both kinds of file alike.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
    found = payload.get("direction")
    if found == direction:
        return payload
    if found != JOINT:
        raise InputFileError(path, f"expected a {direction} (or joint) model, found {found!r}")
    prefix = f"{direction}_encoder."
    other = f"{'backward' if direction == 'forward' else 'forward'}_encoder."
    state = {}
    for key, value in payload["model"].items():
        if key.startswith(prefix):
            state["encoder." + key[len(prefix):]] = value
        elif not key.startswith(other):
            state[key] = value
    return {**payload, "direction": direction, "model": state}


def load_directions(forward: str | Path, backward: str | Path | None = None,
                    map_location: str | torch.device = "cpu") -> dict[str, dict[str, Any]]:
    """``{"forward": payload, "backward": payload}`` (:func:`direction_payload`) of two
    direction files, or of a joint bi-LM's one file given twice (read once); a masked
    LM's one file given twice is one stack, ``{"masked": payload}``; a one-direction LM's
    forward file (``train.directions: forward``) is ``{"forward": payload}`` alone.

    ``backward`` None: the forward file is a one-direction LM's, or a joint or masked
    LM's one file (then read as both); a separate direction's file without its
    backward is refused (one line naming the file and the fix).
    """
    first = load_checkpoint(forward, map_location)
    if first.get("direction") == FORWARD and one_direction(first.get("spec") or {}):
        if backward is not None and Path(backward).resolve() != Path(forward).resolve():
            raise InputFileError(backward, f"given as the backward LM, but {forward} is a one-direction LM "
                                 "(train.directions: forward) with no backward LM; give its model.pt alone "
                                 "(no backward file)")
        return {FORWARD: first}
    if backward is None:
        if first.get("direction") not in (JOINT, MASKED):
            raise InputFileError(forward, f"is the {first.get('direction')} LM of a variant trained in two "
                                 "directions; give its backward model.pt too")
        backward = forward
    loaded: dict[Path, dict[str, Any]] = {Path(forward).resolve(): first}
    out = {}
    for direction, path in zip(DIRECTIONS, (forward, backward)):
        key = Path(path).resolve()
        if key not in loaded:
            loaded[key] = load_checkpoint(path, map_location)
        if loaded[key].get("direction") == MASKED:
            if Path(forward).resolve() != Path(backward).resolve():
                raise InputFileError(path, "is a masked LM, one bidirectional model: pass its model.pt as both "
                                     "the forward and the backward file, and nothing else")
            return {MASKED: loaded[key]}
        out[direction] = direction_payload(loaded[key], direction, path)
    return out
