"""The lottery ticket's rewind weights as a hook of the training loop.

With ``train.rewind_step: k`` a CPU copy of the weights after step k (0: before the first) is
kept under ``rewind`` (``{"step", "model"}``) in ``checkpoint.pt`` and ``model.pt``: the
weights ``elmoc prune`` rewinds a ticket's survivors to.
"""
from __future__ import annotations

from typing import Any

import torch

from elmoc.registry import register
from elmoc.train.hooks.base import TrainHook


@register("train_hook", "rewind")
class RewindHook(TrainHook):
    """Keeps the weights after step ``rewind_step`` (module docstring)."""

    in_model_file = True

    def __init__(self, rewind_step: int):
        self.rewind_step, self.rewind = rewind_step, None

    @classmethod
    def from_run(cls, trainer: Any) -> "RewindHook | None":
        step = trainer.settings.rewind_step
        return None if step is None else cls(step)

    def start(self, model: torch.nn.Module, step: int = 0) -> None:
        self.after_step(model, step)

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        if self.rewind is None and self.rewind_step == step:
            self.rewind = {"step": step,
                           "model": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}}

    def state_dict(self) -> dict[str, Any]:
        return {} if self.rewind is None else {"rewind": self.rewind}

    def load_state_dict(self, payload: dict[str, Any]) -> None:
        self.rewind = payload.get("rewind")
