"""Iterative pruning with fine-tuning between rounds, and the lottery ticket (``elmoc prune``).

Read :func:`prune` top to bottom.  Round ``r`` starts from round ``r - 1``'s ``model.pt`` (round
1 from the trained LM), prunes it to ``levels[r - 1]`` and fine-tunes it for
``finetune_steps`` steps on the LM objective with the one training loop
(:func:`elmoc.train.loop.train`, a :class:`~elmoc.nn.pruning.MaskConstraint` hook keeping the
pruned weights at zero after every step).  ``method`` is a registered kind (``prune_method``,
one file each in :mod:`elmoc.train.prune_methods`):

- ``magnitude``: ``levels`` are sparsities of the encoder's weight matrices (layer-wise, the
  smallest surviving weights go; :mod:`elmoc.nn.pruning`); the round's ``mask.pt`` holds the
  masks.  The matrices keep their shapes (zeros stored as zeros).
- ``structured``: ``levels`` are the fractions of the encoder's units removed (LSTM cells, or a
  Transformer's feed-forward units; :mod:`elmoc.train.structured`): the round's spec names the
  smaller size, so its ``model.pt`` is an ordinary, smaller LM.

With ``ticket`` (a method that keeps masks: magnitude), the rounds find a lottery ticket; ``ticket_procedure``:

- ``rewind_each_round`` (the default): iterative magnitude pruning with rewinding, as Frankle &
  Carbin (ICLR 2019, section 1, "Identifying winning tickets", and its iterative pruning) and,
  for a rewind step k > 0, Frankle et al. (ICML 2020, "Linear mode connectivity and the lottery
  ticket hypothesis", Algorithm 2, IMP with rewinding to iteration k) define it.  Round ``r``
  chooses ``levels[r - 1]``'s mask within the previous mask from the previous round's trained
  weights (round 1: the trained LM's), rewinds the survivors to the weights the LM had at
  ``train.rewind_step = k`` (kept in its ``model.pt`` under ``rewind``) and retrains them from
  step k of the LM's own schedule to its end (T - k steps, the LM's T unless ``ticket_steps``
  says how many): ``roundR/`` is the ticket at that sparsity.  ``controlR/`` is its control
  at every level: the same mask on a fresh random initialisation (seed ``control_seed``), trained
  on the same schedule and data order (from step k too: Frankle et al. 2020's random
  reinitialisation [inferred for k > 0]).  ``finetune_steps`` is unused.  ``ticket/`` and
  ``control/`` are links to the last round's pair.
- ``finetune_rounds_then_rewind_once`` (elmoc's procedure before issue 47): the rounds fine-tune
  without rewinding (as without a ticket); then the last round's mask on the rewind weights,
  trained ``ticket_steps`` steps (None: as many as the LM) from step 0 of the schedule, in
  ``ticket/``, and the same mask on a fresh initialisation in ``control/``.

Output folder: ``round1/ ... roundK/`` (each a training run's folder: ``checkpoint.pt``,
``model.pt``, ``heldout.json``, ``train_log.jsonl``; ``mask.pt`` for magnitude pruning),
``control1/ ... controlK/`` (rewinding each round), ``ticket/`` and ``control/``, and ``prune.json`` (:func:`summary`).  Resume: a finished run
(its ``model.pt`` exists) is skipped, an unfinished one resumes from its ``checkpoint.pt``
exactly as ``elmoc train`` does, and masks are read back from ``mask.pt``, so a killed run
rerun with the same command ends bit-identical to an uninterrupted one (CPU).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from elmoc.config_section import Section, check_keys
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.directions import JOINT, MASKED
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.atomic import atomic_file
from elmoc.layouts import CONTROL, TICKET, prune_control, prune_round
from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.masked_lm import MaskedLM
from elmoc.config import check_choice, registered, typed_options
from elmoc.model_file import load_checkpoint
from elmoc.nn.pruning import MaskConstraint, Masks, sparsity_of
from elmoc.registry import by_name
from elmoc.train.hooks.base import StartFrom, TrainHook
from elmoc.train.checkpoint import MODEL
from elmoc.train.loop import BatchFactory, HeldoutFactory, RunResult, train
from elmoc.train.prune_methods.base import (  # noqa: F401 (MASK_FORMAT, encoder_matrices, load_masks: re-exported)
    MASK, MASK_FORMAT, PruneMethod, encoder_matrices, load_masks, round_masks,
)
from elmoc.train.signals import StopSignals, stoppable

log = logging.getLogger(__name__)

SUMMARY = "prune.json"  # the folders: elmoc.layouts (TICKET, CONTROL, prune_round, prune_control)
REWIND_EACH_ROUND, REWIND_ONCE = "rewind_each_round", "finetune_rounds_then_rewind_once"


@dataclass
class PruneSettings:
    """The ``prune`` config section.

    Attributes:
        method: a registered prune method: "magnitude" (zeros in the encoder's weight matrices),
            "structured" (whole LSTM cells / feed-forward units removed, the matrices shrink), ...
        levels: one per round, increasing, each in [0, 1): the sparsity reached by the round
            (magnitude) or the fraction of the original units removed (structured); 0 prunes
            nothing: the dense model fine-tuned as long, the control for the extra steps.
        finetune_steps: optimizer steps of fine-tuning per round.
        ticket: after the rounds, the lottery ticket and its randomly re-initialised control
            (magnitude only; the LM must keep its rewind weights, ``train.rewind_step``).
        ticket_steps: steps each ticket and control trains (None: rewinding each round, the
            LM's steps after its rewind step, T - k; rewinding once, the LM's step count).
        control_seed: seed of the control's fresh initialisation.
        ticket_procedure: how the ticket is found (module docstring): "rewind_each_round"
            (Frankle & Carbin 2019; the default) or "finetune_rounds_then_rewind_once".
        options: the method's typed options (its ``Options``), given flat in the section.
    """

    KEYS = ("method", "levels", "finetune_steps", "ticket", "ticket_steps", "control_seed", "ticket_procedure")
    method: str = "magnitude"
    levels: tuple[float, ...] = (0.5, 0.75, 0.9)
    finetune_steps: int = 100
    ticket: bool = False
    ticket_steps: int | None = None
    control_seed: int = 1000
    ticket_procedure: str = REWIND_EACH_ROUND
    options: Any = None

    @classmethod
    def from_section(cls, section: Section) -> "PruneSettings":
        """The checked settings; a section read without ``keys`` has them checked here (the
        shared keys and the method's options)."""
        method = section.get("method", str, cls.method)
        kind = registered("prune_method", method, f"{section.name}.method")
        own = [f.name for f in dataclasses.fields(kind.Options)]
        check_keys(section.data, [*cls.KEYS, *own], section.name)
        options = typed_options(kind.Options, {k: v for k, v in section.data.items() if k in own}, section.name)
        levels = tuple(section.get("levels", list, list(cls.levels)))
        if not levels or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1 for v in levels) \
                or list(levels) != sorted(set(levels)):
            raise ConfigError(f"config {section.name}.levels must be increasing numbers in [0, 1), one per round, "
                              f"got {list(levels)}")
        settings = cls(method, tuple(float(v) for v in levels), section.get("finetune_steps", int, cls.finetune_steps),
                       section.get("ticket", bool, cls.ticket), section.get("ticket_steps", int, None),
                       section.get("control_seed", int, cls.control_seed),
                       section.get("ticket_procedure", str, cls.ticket_procedure), options)
        check_choice(settings.ticket_procedure, TICKET_PROCEDURES, f"{section.name}.ticket_procedure")
        for key in ("finetune_steps", "ticket_steps"):
            value = getattr(settings, key)
            if value is not None and value < 1:
                raise ConfigError(f"config {section.name}.{key} must be a positive integer, got {value}")
        if settings.ticket and not kind.keeps_masks:
            raise ConfigError(f"config {section.name}.ticket needs method: magnitude or another method that keeps "
                              "masks (a ticket is a mask on the original weights); set ticket: false or method: "
                              "magnitude")
        return settings

    @property
    def pruner(self) -> PruneMethod:
        """The method's object (:mod:`elmoc.train.prune_methods.base`)."""
        return by_name("prune_method", self.method)(self.options)


def build_model(spec: dict[str, Any], vocab: Vocabulary | None, direction: str) -> torch.nn.Module:
    """The model a run of ``direction`` trains (as the training loop builds it)."""
    return {JOINT: BidirectionalLM, MASKED: MaskedLM}.get(direction, LanguageModel).from_spec(spec, vocab)


def finetune_spec(spec: dict[str, Any], steps: int) -> dict[str, Any]:
    """``spec`` trained for ``steps`` steps, keeping no rewind weights of its own."""
    spec = copy.deepcopy(spec)
    spec.setdefault("train", {})["max_steps"] = steps
    spec["train"].pop("rewind_step", None)
    return spec


def ticket_hooks(source: dict[str, Any], masks: Masks, vocab: Vocabulary | None, direction: str,
                       control_seed: int, path: str | Path, start_step: int = 0) -> dict[str, list[TrainHook]]:
    """``{"ticket": ..., "control": ...}``: the mask on the LM's rewind weights, and the same
    mask on a fresh initialisation drawn with ``control_seed``; both runs start at
    ``start_step`` of the schedule."""
    rewind = rewind_weights(source, path)
    torch.manual_seed(control_seed)
    fresh = build_model(source["spec"], vocab, direction).state_dict()
    return {TICKET: [StartFrom(rewind, start_step), MaskConstraint(masks)],
            CONTROL: [StartFrom(fresh, start_step), MaskConstraint(masks)]}


def rewind_weights(source: dict[str, Any], path: str | Path) -> dict[str, torch.Tensor]:
    """The state dict ``source`` (a ``model.pt`` dict) kept at ``train.rewind_step``."""
    if source.get("rewind") is None:
        raise InputFileError(path, "keeps no rewind weights, which a lottery ticket restarts from; train the LM "
                             "with train.rewind_step: 0 (or an early step), or set prune.ticket: false")
    return source["rewind"]["model"]


@stoppable
def prune(source_path: str | Path, out_dir: str | Path, settings: PruneSettings, vocab: Vocabulary | None,
          make_batches: BatchFactory, make_heldout: HeldoutFactory | None, *, direction: str = "forward",
          vocab_path: str | None = None, device: str = "cpu", stop: StopSignals | None = None) -> RunResult | None:
    """Prune the LM in ``source_path`` (a ``model.pt``) round by round into ``out_dir``, with the
    ticket and its controls when asked (module docstring).  Returns the interrupted run's
    result when a stop signal ended one (rerun to resume), else None; ``prune.json`` is
    written at the end."""
    out_dir = Path(out_dir)
    source = load_checkpoint(source_path)
    if settings.ticket:
        rewind_weights(source, source_path)  # refused before any round, not after them
    rounds = TICKET_PROCEDURES[settings.ticket_procedure] if settings.ticket else _finetune_rounds
    job = _Job(source, source_path, out_dir, settings, vocab, make_batches, make_heldout, direction, vocab_path,
               device, stop)
    runs = rounds(job)
    if isinstance(runs, RunResult):
        return runs
    with atomic_file(out_dir / SUMMARY) as f:
        json.dump(summary(source_path, settings, out_dir, runs, job.vocab, job.direction), f, indent=1)
    return None


@dataclass
class _Job:
    """What every run of one ``prune`` call shares."""

    source: dict[str, Any]
    source_path: str | Path
    out_dir: Path
    settings: PruneSettings
    vocab: Vocabulary | None
    make_batches: BatchFactory
    make_heldout: HeldoutFactory | None
    direction: str
    vocab_path: str | None
    device: str
    stop: StopSignals | None

    def build(self, payload: dict[str, Any]) -> torch.nn.Module:
        """The model of a ``model.pt`` dict, its weights loaded."""
        model = build_model(payload["spec"], self.vocab, self.direction)
        model.load_state_dict(payload["model"])
        return model

    def run(self, spec: dict[str, Any], name: str, hooks: list[TrainHook]) -> RunResult:
        return _run(spec, self.out_dir / name, hooks, self.vocab, self.make_batches, self.make_heldout,
                    self.direction, self.vocab_path, self.device, self.stop)


def _finetune_rounds(job: _Job) -> list[tuple[str, float | None]] | RunResult:
    """Rounds of pruning and fine-tuning (Han et al. 2015), then, with a ticket, the rewind
    once at the end (``finetune_rounds_then_rewind_once``).  The runs' (folder, level), or the
    interrupted run's result."""
    settings, vocab, direction = job.settings, job.vocab, job.direction
    previous, masks, method = job.source, None, settings.pruner
    method.prepare(job.source, job.build)
    runs: list[tuple[str, float | None]] = []
    for number, level in enumerate(settings.levels, 1):
        name = prune_round(number)
        spec, hooks, masks = method.round(previous, level, job.out_dir / name, masks, job.build)
        result = job.run(finetune_spec(spec, settings.finetune_steps), name, hooks)
        if result.interrupted:
            return result
        runs.append((name, level))
        previous = load_checkpoint(job.out_dir / name / MODEL)
    if settings.ticket:
        steps = settings.ticket_steps or int(job.source["step"])
        for name, hooks in ticket_hooks(job.source, masks, vocab, direction, settings.control_seed,
                                        job.source_path).items():
            result = job.run(finetune_spec(job.source["spec"], steps), name, hooks)
            if result.interrupted:
                return result
            runs.append((name, settings.levels[-1]))
    return runs


def _rewind_rounds(job: _Job) -> list[tuple[str, float | None]] | RunResult:
    """Iterative magnitude pruning with rewinding each round (``rewind_each_round``; module
    docstring): per level the ticket ``roundR/`` and its control ``controlR/``, each rewound
    to the LM's step k and trained to the end of its schedule; ``ticket/`` and ``control/``
    link to the last pair.  The runs' (folder, level), or the interrupted run's result."""
    settings, source, method = job.settings, job.source, job.settings.pruner
    start = int(source["rewind"]["step"])
    steps = settings.ticket_steps or max(1, int(source["step"]) - start)
    spec = finetune_spec(source["spec"], start + steps)  # the schedule's step k + steps is its end
    previous, masks = source, None
    runs: list[tuple[str, float | None]] = []
    for number, level in enumerate(settings.levels, 1):
        names = {TICKET: prune_round(number), CONTROL: prune_control(number)}
        masks = round_masks(job.out_dir / names[TICKET], previous, level, masks, job.build, method.choose_masks)
        hooks = ticket_hooks(source, masks, job.vocab, job.direction, settings.control_seed, job.source_path,
                             start)
        for role, name in names.items():
            result = job.run(spec, name, hooks[role])
            if result.interrupted:
                return result
            runs.append((name, level))
        previous = load_checkpoint(job.out_dir / names[TICKET] / MODEL)
    for role, name in names.items():  # the last level's pair under the names the workflow reads
        link = job.out_dir / role
        if not link.is_symlink():
            link.symlink_to(name, target_is_directory=True)
    return runs


TICKET_PROCEDURES = {REWIND_EACH_ROUND: _rewind_rounds, REWIND_ONCE: _finetune_rounds}


def _run(spec: dict[str, Any], out: Path, hooks: list[TrainHook], vocab: Vocabulary | None,
         make_batches: BatchFactory, make_heldout: HeldoutFactory | None, direction: str, vocab_path: str | None,
         device: str, stop: StopSignals | None) -> RunResult:
    """One training run of the plan in ``out``: skipped when its ``model.pt`` exists, else
    started (``hooks`` set its weights and keep its masks) or resumed from its checkpoint."""
    if (out / MODEL).is_file():
        log.info("%s is done (%s exists)", out, MODEL)
        return RunResult(steps=0, tokens=0, seconds=0.0)
    return train(spec, vocab, out, make_batches, make_heldout, direction=direction, vocab_path=vocab_path,
                 device=device, resume=True, stop=stop, hooks=hooks)


def nonzero_parameters(state: dict[str, torch.Tensor]) -> tuple[int, int]:
    """(nonzero entries, entries) over a state dict's floating-point tensors."""
    tensors = [t for t in state.values() if t.is_floating_point()]
    return sum(int(t.count_nonzero()) for t in tensors), sum(t.numel() for t in tensors)


def encoder_nonzero(payload: dict[str, Any], vocab: Vocabulary | None, direction: str) -> tuple[int, int]:
    """(nonzero entries, entries) of the encoder's matrices alone (what pruning prunes; the input
    and output layers are not counted) of a ``model.pt`` dict."""
    model = build_model(payload["spec"], vocab, direction)
    model.load_state_dict(payload["model"])
    matrices = encoder_matrices(model)
    return sum(int(t.count_nonzero()) for t in matrices.values()), sum(t.numel() for t in matrices.values())


def describe(path: Path, level: float | None, vocab: Vocabulary | None, direction: str) -> dict[str, Any]:
    """One run's row of ``prune.json``: its level, encoder size, weights (all of the model's, and
    the encoder matrices' alone) and heldout result."""
    payload = load_checkpoint(path / MODEL)
    heldout = json.loads((path / "heldout.json").read_text(encoding="utf-8"))
    nonzero, total = nonzero_parameters(payload["model"])
    encoder_nz, encoder_total = encoder_nonzero(payload, vocab, direction)
    row = {"run": path.name, "level": level, "steps": payload["step"], "parameters": total, "nonzero": nonzero,
           "encoder_weights": encoder_total, "encoder_nonzero": encoder_nz,
           "encoder": payload["spec"]["encoder"], "metric": heldout["metric"], "heldout": heldout["after"]}
    if (path / MASK).is_file():
        row["sparsity"] = sparsity_of(load_masks(path / MASK))
    return row


def summary(source_path: str | Path, settings: PruneSettings, out_dir: Path, runs: list[tuple[str, float | None]],
            vocab: Vocabulary | None = None, direction: str = "forward") -> dict[str, Any]:
    """``prune.json``: the settings, the source LM's row and one row per run."""
    source = load_checkpoint(source_path)
    nonzero, total = nonzero_parameters(source["model"])
    encoder_nz, encoder_total = encoder_nonzero(source, vocab, direction)
    history = source.get("history") or [{}]
    return {"source": str(source_path), "method": settings.method, **dataclasses.asdict(settings.options),
            "levels": list(settings.levels),
            "finetune_steps": settings.finetune_steps,
            "ticket_procedure": settings.ticket_procedure if settings.ticket else None,
            "original": {"parameters": total, "nonzero": nonzero, "encoder_weights": encoder_total,
                         "encoder_nonzero": encoder_nz, "steps": source["step"],
                         "metric": history[-1].get("metric"), "heldout": history[-1].get("value")},
            "runs": [describe(out_dir / name, level, vocab, direction) for name, level in runs]}
