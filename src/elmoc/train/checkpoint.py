"""What `elmoc train` leaves in its output directory, and the rules for resuming.

Two ``torch.save`` dicts of format ``"elmoc-lm-v1"``; :func:`load_checkpoint` reads both.

``checkpoint.pt`` (periodic, resumable; kept after the run, never a workflow output):

``spec``          the resolved LM spec (input/encoder/output/optimizer/train/data/vocab)
``config_hash``   :func:`config_hash` of ``spec``: what must not change on resume
``vocab_path``    path of the vocabulary the ids refer to
``vocab``         :func:`vocab_fingerprint` (size and sha256 of the token list)
``direction``     ``"forward"`` or ``"backward"``; ``"joint"`` for a joint bi-LM
                  (``train.directions: joint``, :class:`elmoc.lm.BidirectionalLM`)
``model``         the LanguageModel (BidirectionalLM) state dict; frozen tables (FastText, CNN vectors) are
                  not in it: they are reloaded from the paths in ``spec``, which must
                  still exist when the file is used
``optimizers``    list of optimizer state dicts
``step``          number of optimizer steps taken
``tokens``        tokens trained on (all processes)
``seconds``       training wall time so far, summed over every resumed run
``log_bytes``     length of ``train_log.jsonl`` when the checkpoint was taken
``data``          the batch iterator's position (see ``elmoc.data.batches``)
``rng``           torch / numpy / python RNG states of rank 0
``state``         the carried encoder state (None when states are reset every window)
``history``       heldout evaluations so far
``threads``       ``torch.get_num_threads()`` of the run that wrote it
``final``         False

``model.pt`` (written once, at the very end; what extraction and the CNN table read):
the same dict without the training-only keys (:data:`TRAINING_ONLY`: optimizer
state, data position, RNG, carried state, log length) and with ``final`` True.

Resume rules (:func:`check_resumable`): the direction, the vocabulary's tokens and the
spec must match, except the keys in :data:`RESUME_MUTABLE` (how long to train and how
often to log, evaluate and save), which may change between runs.  Anything else is
refused with one line that names the checkpoint, both values and the fix.  The
workflow instead sets such a checkpoint aside (:func:`set_aside_if_stale`): a changed
config reruns the job, which then starts afresh and keeps the old checkpoint under
``checkpoint.<its config hash>.pt``.

Writes go to a temp file that is renamed into place, so an interrupted save never
leaves a truncated file behind; temp files a SIGKILL left over are removed by
:func:`remove_stale_temps` when the next run starts.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmoc.data.atomic import atomic_path
from elmoc.errors import InputFileError

log = logging.getLogger(__name__)

FORMAT = "elmoc-lm-v1"
CHECKPOINT = "checkpoint.pt"
MODEL = "model.pt"
HELDOUT = "heldout.json"
TRAIN_LOG = "train_log.jsonl"
# Keys of ``spec["train"]`` that may differ between a checkpoint and the run resuming it:
# they decide when to stop and how often to log/evaluate/save, not what a step computes
# (the batches of pass e depend on the seed and e only, and the LR on the step only).
RESUME_MUTABLE = ("max_steps", "epochs", "log_every", "eval_every", "checkpoint_every")
# Keys of a checkpoint that model.pt leaves out.
TRAINING_ONLY = ("optimizers", "data", "rng", "state", "log_bytes")
RESUME_FIX = "rerun with --no-resume to start over, or use another --output-dir"


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def resume_view(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` without the keys that may change on resume (:data:`RESUME_MUTABLE`)."""
    view = copy.deepcopy(spec)
    train = view.get("train")
    if isinstance(train, dict):
        for key in RESUME_MUTABLE:
            train.pop(key, None)
    return view


def config_hash(spec: dict[str, Any]) -> str:
    """sha256 (hex, 16 chars) of :func:`resume_view` of ``spec`` as canonical JSON."""
    text = json.dumps(resume_view(spec), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def vocab_fingerprint(vocab) -> dict[str, Any] | None:
    """``{"size", "sha256"}`` of a vocabulary's tokens in id order (None without one)."""
    if vocab is None:
        return None
    digest = hashlib.sha256("\n".join(vocab.tokens).encode("utf-8")).hexdigest()[:16]
    return {"size": len(vocab), "sha256": digest}


def _first_difference(old: Any, new: Any, prefix: str = "") -> tuple[str, Any, Any] | None:
    """The first (dotted key, old value, new value) where two nested mappings differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                return name, "<absent>", new[key]
            if key not in new:
                return name, old[key], "<absent>"
            found = _first_difference(old[key], new[key], name)
            if found:
                return found
        return None
    if json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str):
        return prefix or "<spec>", old, new
    return None


def check_resumable(payload: dict[str, Any], path: str | Path, *, spec: dict[str, Any], direction: str,
                    vocab=None, spec_path: str | Path | None = None) -> None:
    """Refuse to resume ``payload`` (read from ``path``) into a run of ``spec``/``direction``.

    Raises:
        InputFileError: one line naming the checkpoint, what differs (both values) and the fix.
    """
    where = str(spec_path) if spec_path else "this run's spec"
    if payload.get("final") and not payload.get("optimizers"):
        raise InputFileError(path, f"is a final model without optimizer state, not a resumable checkpoint; {RESUME_FIX}")
    if payload.get("direction") != direction:
        raise InputFileError(
            path, f"holds a {payload.get('direction')!r} LM but this run trains the {direction!r} one; {RESUME_FIX}"
        )
    saved_spec = payload.get("spec")
    if not isinstance(saved_spec, dict):
        raise InputFileError(path, f"records no spec, so it cannot be checked against {where}; {RESUME_FIX}")
    saved_hash = payload.get("config_hash") or config_hash(saved_spec)
    if saved_hash != config_hash(spec):
        diff = _first_difference(resume_view(saved_spec), resume_view(spec))
        detail = (f"{diff[0]} is {diff[1]!r} there but {diff[2]!r} in {where}" if diff
                  else f"config hash {saved_hash} there but {config_hash(spec)} in {where}")
        raise InputFileError(path, f"was trained with another spec: {detail}; {RESUME_FIX}")
    saved_vocab, current = payload.get("vocab"), vocab_fingerprint(vocab)
    if saved_vocab and current and saved_vocab != current:
        raise InputFileError(
            path,
            f"was trained with another vocabulary ({saved_vocab['size']} tokens, sha256 {saved_vocab['sha256']}) than "
            f"{payload.get('vocab_path') or 'the current one'} now holds ({current['size']} tokens, "
            f"sha256 {current['sha256']}); {RESUME_FIX}",
        )


def set_aside_if_stale(path: str | Path, *, spec: dict[str, Any], direction: str, vocab=None,
                       spec_path: str | Path | None = None) -> Path | None:
    """Move a checkpoint that :func:`check_resumable` (or :func:`load_checkpoint`) refuses
    out of the way, to ``checkpoint.<its config hash>.pt`` beside it, so the run starts
    afresh without deleting anything.  Returns the new path, or None when the checkpoint
    is resumable (or absent)."""
    path = Path(path)
    if not path.exists():
        return None
    payload = None
    try:
        payload = load_checkpoint(path, mmap=True)  # the metadata decides; the resume reads the tensors
        check_resumable(payload, path, spec=spec, direction=direction, vocab=vocab, spec_path=spec_path)
        return None
    except InputFileError as err:
        tag = (payload or {}).get("config_hash") or "unreadable"
        target = path.with_name(f"{path.stem}.{tag}{path.suffix}")
        os.replace(path, target)
        log.warning("%s; kept it as %s and starting afresh", err, target)
        return target


def model_payload(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The final ``model.pt`` dict made from a checkpoint dict (no training-only keys)."""
    payload = {k: v for k, v in checkpoint.items() if k not in TRAINING_ONLY}
    payload["final"] = True
    return payload


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically; the data reaches the disk (fsync) before
    the rename, so a crashed node cannot leave an empty file under the final name."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **payload}, f)
            f.flush()
            os.fsync(f.fileno())


def stale_temp_glob(name: str) -> str:
    """Glob of the temp files :func:`elmoc.data.atomic.atomic_path` makes for ``name``."""
    p = Path(name)
    return f".{p.stem}.*.tmp{p.suffix}"


def remove_stale_temps(out_dir: str | Path) -> list[Path]:
    """Delete temp files of our own outputs that an interrupted (killed) write left in
    ``out_dir``; they are never read.  Returns the removed paths."""
    removed = []
    for name in (CHECKPOINT, MODEL, HELDOUT, TRAIN_LOG):
        for tmp in Path(out_dir).glob(stale_temp_glob(name)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu", mmap: bool = False) -> dict[str, Any]:
    """Read a ``checkpoint.pt`` or a ``model.pt`` (see the module docstring).  ``mmap``
    maps the tensors instead of reading them (for a look at the metadata only)."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "not found; train the LM first (`elmoc train`)")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False, mmap=mmap)
    except Exception as e:  # torch raises many types for corrupt files
        raise InputFileError(path, f"cannot read it as a checkpoint ({type(e).__name__}: {e}); "
                             "delete it and train again") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise InputFileError(path, f"not an elmoc checkpoint (expected format {FORMAT!r})")
    return payload


def load_weights(model: torch.nn.Module, payload: dict[str, Any], path: str | Path) -> None:
    """``model.load_state_dict(payload["model"])``; a shape or key mismatch is one line."""
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError) as e:
        first = str(e).strip().splitlines()
        detail = next((line.strip() for line in first if "size mismatch" in line or "key" in line.lower()),
                      first[0] if first else type(e).__name__)
        raise InputFileError(path, f"weights do not fit the model its spec builds ({detail})") from None



def direction_payload(payload: dict[str, Any], direction: str, path: str | Path) -> dict[str, Any]:
    """One direction's LM from a ``model.pt``/``checkpoint.pt`` dict, as a separate
    direction's file holds it: a ``"forward"``/``"backward"`` file must be of that
    direction; a ``"joint"`` file gives the direction's view (its encoder as
    ``encoder.*``, the shared input and output layers), so whatever consumes one
    direction (extraction, export, the CNN table) reads both kinds of file alike.
    """
    if direction not in ("forward", "backward"):
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
    found = payload.get("direction")
    if found == direction:
        return payload
    if found != "joint":
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


def load_directions(forward: str | Path, backward: str | Path,
                    map_location: str | torch.device = "cpu") -> dict[str, dict[str, Any]]:
    """``{"forward": payload, "backward": payload}`` (:func:`direction_payload`) of two
    direction files, or of a joint bi-LM's one file given twice (read once)."""
    loaded: dict[Path, dict[str, Any]] = {}
    out = {}
    for direction, path in (("forward", forward), ("backward", backward)):
        key = Path(path).resolve()
        if key not in loaded:
            loaded[key] = load_checkpoint(path, map_location)
        out[direction] = direction_payload(loaded[key], direction, path)
    return out
