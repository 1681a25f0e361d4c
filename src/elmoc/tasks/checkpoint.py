"""What a downstream task run (``elmoc task``) keeps beside its result, and the rules for resuming.

The run's folder is :func:`run_dir` of its result JSON (``results/tasks/{task}/{variant}/seed{seed}.json``
-> ``seed{seed}.run/``), never a workflow output, so a killed, stopped or timed-out job's rerun
finds it.  It holds ``checkpoint.pt``, ``attempts.jsonl`` and ``.train.lock`` (the same guards as
pretraining, :mod:`elmoc.attempts`) and ``task.log`` (every attempt's log lines).

``checkpoint.pt``: one ``torch.save`` dict of format :data:`FORMAT`, read weights-only (tensors
and plain containers), written atomically (:func:`elmoc.model_file.save_checkpoint`) at the
end of every epoch, every ``trainer.checkpoint_minutes`` minutes of training, and when a stop
signal or the SLURM deadline stops the run:

``spec``          :func:`run_spec`: the task section, the trainer settings, the seed and the input paths
``config_hash``   :func:`elmoc.train.checkpoint.config_hash` of ``spec``
``inputs``        :meth:`elmoc.train.checkpoint.InputFingerprints.of_spec` of ``spec``: sha256 of the
                  task's data files, the features HDF5, the word vectors and their vocabulary
``model``         the task model's state dict; ``optimizer``; ``decay`` (the step decay's scheduler
                  state, or None); the reduce-on-plateau changes live in the optimizer's learning rate
``epoch``, ``batch``  the epoch in progress (1-based) and how many of its batches are done
                  (== the epoch's batch count: its dev evaluation is still to come)
``epoch_rng``     the shuffling ``random.Random``'s state at the start of that epoch: the epoch's
                  batch order is drawn again from it, which leaves the generator where it was
``rng``           :func:`elmoc.train.checkpoint.rng_state` (python ``random``, torch CPU and CUDA, numpy)
``step``          optimizer steps so far; ``loss_sum``, ``loss_steps``: the epoch's training loss so far
``best``          early stopping: ``{"score", "epoch", "bad_epochs", "state"}`` (``state``: the best
                  epoch's weights, None before the first evaluation)
``history``       per finished epoch ``{"epoch", "train_loss", "dev"}``
``finished``      training is over (all epochs or early stop): the best weights' test evaluation remains
``seconds``       wall time of the run so far, summed over every resumed attempt
``segments``      ``[{"step", "threads", "device"}, ...]``: from which step each layout trained (one
                  entry per change on resume, as pretraining's process layouts)

Resume rules: the checkpoint must be of this ``spec`` (:func:`elmoc.train.checkpoint.spec_change`:
the first differing key, both values) and of the same input files
(:func:`elmoc.train.checkpoint.inputs_change`); ``trainer.checkpoint_minutes`` and
``trainer.progress_seconds`` (:data:`MUTABLE_TRAINER`) may change.  Anything else is set aside as
``checkpoint.<its config hash>.pt`` with the reason in the log, and the run starts afresh
(``--stale-checkpoint refuse``: refused with one line instead).  The checkpoint is removed once the
result JSON is written: the JSON is the run's product, and the checkpoint (weights, best weights,
optimizer moments) can be hundreds of MB per run.
"""
from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import torch

from elmoc.errors import ConfigError, InputFileError
from elmoc.model_file import TASK_FORMAT, load_checkpoint, save_checkpoint
from elmoc.train.checkpoint import (
    CHECKPOINT, InputFingerprints, config_hash, inputs_change, remove_stale_temps, set_aside, spec_change,
)

log = logging.getLogger(__name__)

FORMAT = TASK_FORMAT
RUN_SUFFIX = ".run"
TASK_TEXT_LOG = "task.log"
# trainer keys that may change between a checkpoint and the run resuming it: when to save and to
# log, not what a step computes
MUTABLE_TRAINER = ("checkpoint_minutes", "progress_seconds")
# trainer keys added after task checkpoints existed, left out of the spec at their default value so
# that a checkpoint written before the key existed still resumes (a run that changes one is a new run)
ADDED_TRAINER_DEFAULTS = {"fused_optimizer": False}
STALE_CHOICES = ("set-aside", "refuse")
FIX = "delete it to start over, or rerun with --stale-checkpoint set-aside"


def run_dir(output: str | Path) -> Path:
    """The folder of a run's checkpoint and records: its result JSON's name with ``.run``
    instead of the suffix (``seed1.json`` -> ``seed1.run``)."""
    output = Path(output)
    return output.with_name(output.stem + RUN_SUFFIX)


def run_spec(task: str, section: dict[str, Any], trainer: dict[str, Any], seed: int,
             inputs: dict[str, str | None]) -> dict[str, Any]:
    """What a checkpoint must have been made for to be resumed: the task's name and config
    section, the trainer settings (without :data:`MUTABLE_TRAINER`), the seed and the paths of
    the features / vectors / vocabulary (``inputs``); every existing file it names is
    fingerprinted (:class:`elmoc.train.checkpoint.InputFingerprints`). Keys of
    :data:`ADDED_TRAINER_DEFAULTS` at their default are left out."""
    def computing(values: dict[str, Any]) -> dict[str, Any]:  # the settings that change what a step computes
        return {k: v for k, v in values.items() if k not in MUTABLE_TRAINER
                and not (k in ADDED_TRAINER_DEFAULTS and v == ADDED_TRAINER_DEFAULTS[k])}

    section = copy.deepcopy(section)
    if isinstance(section.get("trainer"), dict):
        section["trainer"] = computing(section["trainer"])
    return {"task": task, "section": section, "trainer": computing(trainer),
            "seed": seed, "inputs": {k: v for k, v in inputs.items() if v}}


class TaskCheckpoint:
    """The checkpoint file of one task run and the rules for resuming it.

    Args:
        path: the ``checkpoint.pt`` (:func:`run_dir` / ``checkpoint.pt`` for ``elmoc task``).
        spec: :func:`run_spec` of the run.
        stale: what to do with a checkpoint of another spec or other inputs: ``"set-aside"``
            (keep it as ``checkpoint.<hash>.pt`` and start afresh) or ``"refuse"`` (one line).
    """

    def __init__(self, path: str | Path, spec: dict[str, Any], stale: str = "set-aside"):
        if stale not in STALE_CHOICES:
            raise ConfigError(f"stale_checkpoint must be one of {', '.join(STALE_CHOICES)}, got {stale!r}")
        self.path, self.spec, self.stale = Path(path), spec, stale
        self.hash = config_hash(spec)
        self.inputs: dict[str, dict[str, Any]] | None = None

    def prepare(self) -> dict[str, Any] | None:
        """Fingerprint the inputs, remove temp files of interrupted writes, set aside (or refuse)
        a checkpoint that does not fit; returns the checkpoint to resume from (read to the CPU)
        or None."""
        self.inputs = InputFingerprints.of_spec(self.spec)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for tmp in remove_stale_temps(self.path.parent):
            log.warning("removed %s, left behind by an interrupted write", tmp)
        if not self.path.exists():
            return None
        try:
            payload = load_checkpoint(self.path, map_location="cpu", formats=(FORMAT,))
        except InputFileError as err:
            if self.stale == "refuse":
                raise
            set_aside(self.path, "unreadable", str(err))
            return None
        reason = spec_change(payload, self.spec, "this task run") or inputs_change(payload, self.inputs)
        if reason is None:
            return payload
        if self.stale == "refuse":
            raise InputFileError(self.path, f"{reason}; {FIX}")
        set_aside(self.path, payload.get("config_hash") or "unreadable", f"{self.path}: {reason}")
        return None

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` (the training state, :mod:`elmoc.tasks.runner`) with this run's spec,
        hash and input fingerprints."""
        save_checkpoint(self.path, {"spec": self.spec, "config_hash": self.hash, "inputs": self.inputs, **state},
                        fmt=FORMAT)

    def remove(self) -> None:
        """Delete the checkpoint (after the result is written)."""
        self.path.unlink(missing_ok=True)


def to_cpu(state: dict[str, torch.Tensor] | None) -> dict[str, torch.Tensor] | None:
    """A state dict's tensors copied to the CPU (what a checkpoint stores)."""
    return None if state is None else {k: v.detach().to("cpu", copy=True) for k, v in state.items()}
