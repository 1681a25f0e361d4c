"""The hook interface of the one training loop (:class:`elmoc.train.loop.Trainer`); registers nothing.

A method that keeps state beside the weights (TNF's notes, pruning masks, the lottery ticket's
rewind weights, a run that starts from given weights) is a :class:`TrainHook`; the loop calls, in
the order of its hook list:

============================  =============================================================
``start(model, step)``        a fresh (not resumed) run, before its first step: ``model`` is the
                              built model, ``step`` the step it starts at (the largest
                              ``start_step`` of the hooks; 0 for an ordinary run)
``after_step(model, step)``   after every optimizer step (``step``: the steps done, counted
                              after this one)
``state_dict()``              the hook's keys of ``checkpoint.pt`` (``{}``: none); with
                              ``in_model_file`` they are kept in ``model.pt`` too
``load_state_dict(payload)``  a resumed run: its keys back from the checkpoint's dict
============================  =============================================================

and reads ``start_step`` (a fresh run's first step: the LR schedule continues from there).  A
resumed run calls no ``start``: everything the hook needs again comes from ``state_dict``, so a
resumed run is bit-identical to an uninterrupted one.

Two ways in: a caller of :func:`elmoc.train.loop.train` passes hooks (``hooks=[...]``:
``elmoc prune``'s :class:`StartFrom` and :class:`elmoc.nn.pruning.MaskConstraint`), and every
hook registered as kind ``"train_hook"`` (a module of this package, or a plug-in) is asked
``from_run(trainer)`` when a run is built: it returns its hook when the run's spec asks for it
(``train.notes``, ``train.rewind_step``), else None.  The loop names no method.
"""
from __future__ import annotations

from typing import Any

import torch


class TrainHook:
    """A no-op hook; a method overrides what it needs (module docstring)."""

    start_step: int = 0  # a fresh run's first step
    in_model_file: bool = False  # state_dict's keys go into model.pt as well as checkpoint.pt

    @classmethod
    def from_run(cls, trainer: Any) -> "TrainHook | None":
        """The hook a run built by ``trainer`` (its ``spec``, ``settings``, ``vocab``, ``core``,
        ``device``, ``ddp``) needs, or None.  Only registered hooks are asked."""
        return None

    def start(self, model: torch.nn.Module, step: int = 0) -> None:
        return None

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, payload: dict[str, Any]) -> None:
        return None


class StartFrom(TrainHook):
    """A weight initialisation: a fresh run loads ``weights`` (a state dict) before its first
    step and starts at step ``start_step`` (weights taken after that many steps: late
    rewinding, Frankle et al. 2020; the run still ends at ``train.max_steps``, so it trains
    that less).  A resumed run reads its weights from the checkpoint instead.

    Args:
        weights: the state dict to start from.
        start_step: the step those weights belong to (0: a start from scratch).
    """

    def __init__(self, weights: dict[str, torch.Tensor], start_step: int = 0):
        self.weights, self.start_step = weights, start_step

    def start(self, model: torch.nn.Module, step: int = 0) -> None:
        model.load_state_dict(self.weights)
