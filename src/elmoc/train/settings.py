"""The ``train`` section of an LM spec, parsed once (:meth:`TrainSettings.from_config`).

``elmoc train`` parses it (its batch factories need it) and hands it to
:func:`elmoc.train.loop.train`, which parses the spec's section itself only when called
without it (the tests).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from elmoc.data.masking import Masking
from elmoc.config import check_range
from elmoc.config_section import check_keys
from elmoc.directions import CAUSAL_LM, SEPARATE, is_masked, train_directions
from elmoc.errors import ConfigError
from elmoc.nn.notes import NoteSettings, variant_label
from elmoc.train.schedule import check_type


@dataclass
class TrainSettings:
    """The ``train`` section of an LM spec (defaults are the paper's ELMo-C values).

    Attributes:
        batch_size: global batch B (rows of the token stream), split over processes.
        bptt: window length in tokens (20).
        epochs: passes over the training shards.
        max_steps: stop after this many optimizer steps (None: run all epochs).
        clip_norm: global gradient-norm clip (1.0 for ELMo-C, 10.0 in bilm-tf).
        loss_scale: multiply the loss before backward.  bilm-tf's total loss is
            ``0.5 * (loss_fwd + loss_bwd) * unroll_steps`` (20): a joint bi-LM with
            ``loss_scale: 20`` has exactly that gradient; a separate-direction run with
            ``loss_scale: 20`` has twice bilm-tf's gradient for its direction (its loss
            is one direction's mean, not half of it).
        reset_state: start every window from zero state (the released ELMo-C config,
            spec P1) instead of carrying the detached state (bilm-tf).
        seed: seeds torch, numpy, python and the batch shuffling.
        log_every, eval_every, checkpoint_every: in steps (0 = only at the end).
        checkpoint_minutes: also save ``checkpoint.pt`` when this many minutes of wall
            time passed since the last save (None: by steps only); measured on rank 0
            and agreed by all processes (:mod:`elmoc.train.periodic`).
        collective_timeout_minutes: how long a data-parallel process waits in a
            collective for the others (60: rank 0 writing a multi-GB checkpoint while
            the others wait must fit in it; NCCL's own default is 10 minutes).
        eval_batch_size: rows per heldout batch (None: batch_size).
        eval_max_windows: cap on heldout windows per evaluation (None: all).
        precision: "fp32", "bf16" (autocast on CUDA; on CPU bf16 autocast too) or "tf32"
            (opt-in: float32 tensors, CUDA matmuls and cuDNN on TensorFloat-32 tensor cores,
            process-wide from the first step; the same as fp32 on CPU).
        directions: "separate" (two runs, ``--direction forward`` and ``backward``) or
            "joint" (one :class:`elmoc.lm.BidirectionalLM`, ``--direction joint``: shared
            input and output layer, loss the mean of the two directions' means) or "forward"
            (one forward LM, ``--direction forward`` only: the paper's uni-directional GPT).
        objective: "causal_lm" (next-word LMs, the paper) or "masked_lm" (one
            :class:`elmoc.masked_lm.MaskedLM`, ``--direction masked``; issue 25).
        rewind_step: keep the weights as they are after this many steps (0: the
            initialisation) in ``checkpoint.pt`` and ``model.pt`` under ``rewind``, for the
            lottery ticket (``elmoc prune``); None keeps none.
        masking: a masked LM's ``{rate, mask, random}`` (:class:`elmoc.data.masking.Masking`;
            default BERT's 0.15, 0.8, 0.1); parsed into :attr:`masking_settings`.
        notes: ``{lambda, gamma, window, counts, ...}``: notes for rare words in pre-training (TNF,
            :class:`elmoc.nn.notes.NoteSettings`; None: off); parsed into :attr:`note_settings`.
    """

    # the range of each number, checked here and when the workflow is parsed (elmoc.config.declared_ranges)
    OPTION_RANGES = {"batch_size": "int > 0", "bptt": "int > 0", "epochs": "int > 0", "max_steps": "int > 0 or null",
                     "clip_norm": ">= 0", "loss_scale": "> 0", "seed": "int >= 0", "log_every": "int >= 0",
                     "eval_every": "int >= 0", "checkpoint_every": "int >= 0", "checkpoint_minutes": ">= 0 or null",
                     "collective_timeout_minutes": "> 0", "eval_batch_size": "int > 0 or null",
                     "eval_max_windows": "int > 0 or null", "rewind_step": "int >= 0 or null"}

    batch_size: int = 64
    bptt: int = 20
    epochs: int = 10
    max_steps: int | None = None
    clip_norm: float = 1.0
    loss_scale: float = 1.0
    reset_state: bool = True
    seed: int = 1
    log_every: int = 100
    eval_every: int = 0
    checkpoint_every: int = 1000
    checkpoint_minutes: float | None = None
    collective_timeout_minutes: float = 60.0
    eval_batch_size: int | None = None
    eval_max_windows: int | None = None
    precision: str = "fp32"
    directions: str = SEPARATE
    objective: str = CAUSAL_LM
    masking: dict | None = None
    rewind_step: int | None = None
    notes: dict | None = None

    @property
    def masking_settings(self) -> Masking:
        return Masking.from_config(self.masking)

    @property
    def note_settings(self) -> NoteSettings | None:
        return None if self.notes is None else NoteSettings.from_config(self.notes)

    @classmethod
    def table_option_label(cls, options: dict) -> str | None:
        """The tables' name of the method these ``train`` options turn on ("TNF" with
        ``notes``), None for the paper's training (reads the dict only)."""
        return variant_label({"train": options})

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "TrainSettings":
        if not isinstance(config, dict):
            raise ConfigError(f"train must be a mapping of options, got {config!r}")
        names = {f.name for f in fields(cls)}
        check_keys(config, names, "train")
        for f in fields(cls):
            if f.name in config and f.name not in ("masking", "notes"):  # checked by their own parsers
                check_type(f"train.{f.name}", config[f.name], str(f.type))
        for key, rule in cls.OPTION_RANGES.items():
            if key in config:
                check_range(config[key], rule, f"train.{key}")
        settings = cls(**config)
        if settings.precision not in ("fp32", "bf16", "tf32"):
            raise ConfigError(f"train.precision must be 'fp32', 'bf16' or 'tf32', got {settings.precision!r}")
        train_directions({"train": {"directions": settings.directions}})  # "separate", "joint" or "forward", else one line
        if is_masked({"train": {"objective": settings.objective}}):  # "causal_lm" or "masked_lm", else one line
            settings.masking_settings  # noqa: B018 -- checks train.masking (one line)
        elif settings.masking is not None:
            raise ConfigError("train.masking applies only to a masked LM (train.objective: masked_lm); remove it")
        settings.note_settings  # noqa: B018 -- checks train.notes (one line)
        return settings
