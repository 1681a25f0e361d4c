"""Weight masks: magnitude selection and a mask kept applied while a model trains.

A mask is a bool tensor of its weight's shape, True where the weight survives.  Pruning is
layer-wise, as in Frankle & Carbin (2019): every matrix loses the same fraction of its
weights, the smallest in magnitude among those still alive, so masks only ever shrink.

Why own masks and not ``torch.nn.utils.prune``: that module replaces ``weight`` by
``weight_orig * weight_mask`` through a forward pre-hook, which renames the keys of the
state dict (``weight_orig``, ``weight_mask``) and so every ``model.pt`` and exported
directory, and the ELMo LSTM hands its ``weight`` tensors to a hand-written time loop
(:mod:`elmoc.encoders.projected_lstm`, the native C++ one) that no hook sees.  Zeroing the
pruned weights in place after every optimizer step (:meth:`MaskConstraint.apply`) keeps
the parameters, their names and every consumer as they are; a pruned weight's gradient
and Adam moments are computed and then discarded with it.
"""
from __future__ import annotations

import torch
from torch import nn

Masks = dict[str, torch.Tensor]  # parameter name -> bool mask of its shape, True = kept


def magnitude_mask(weight: torch.Tensor, sparsity: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The mask keeping the ``1 - sparsity`` fraction of ``weight``'s entries largest in
    magnitude, chosen among those ``mask`` still keeps (None: all).

    Shape: weight (...) any; mask and the result bool of the same shape.  The count kept is
    exact, ``round((1 - sparsity) * weight.numel())`` and never more than ``mask`` keeps
    (ties at the threshold: ``torch.topk``'s pick, the same on every run on one machine).
    """
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
    alive = torch.ones_like(weight, dtype=torch.bool) if mask is None else mask.bool()
    keep = min(int(round((1.0 - sparsity) * weight.numel())), int(alive.sum()))
    scores = weight.detach().abs().flatten().float()
    scores[~alive.flatten()] = -1.0  # the dead never come back
    kept = torch.zeros(weight.numel(), dtype=torch.bool, device=weight.device)
    kept[torch.topk(scores, keep, sorted=False).indices] = True
    return kept.view_as(weight)


def magnitude_masks(weights: dict[str, torch.Tensor], sparsity: float, masks: Masks | None = None) -> Masks:
    """:func:`magnitude_mask` of every named weight at ``sparsity`` (layer-wise), each within
    its mask in ``masks`` (the previous round's; None: a first round)."""
    masks = masks or {}
    return {name: magnitude_mask(w, sparsity, masks.get(name)) for name, w in weights.items()}


def sparsity_of(masks: Masks) -> float:
    """The fraction of masked weights over all of them (0.0 without masks)."""
    total = sum(m.numel() for m in masks.values())
    return 0.0 if not total else 1.0 - sum(int(m.sum()) for m in masks.values()) / total


class MaskConstraint:
    """Masks kept applied to a model while it trains: a hook of the training loop
    (:mod:`elmoc.train.hooks.base`, duck-typed: ``nn`` does not import ``train``).  ``start``
    zeroes the pruned weights of a fresh run (after a :class:`~elmoc.train.hooks.base.StartFrom`
    set its weights), ``after_step`` zeroes them again after every optimizer step.  The masks
    are not in the checkpoint: ``elmoc prune`` reads them back from the round's ``mask.pt``.

    Args:
        masks: parameter name (as ``model.named_parameters()`` gives it) -> bool mask.
    """

    start_step = 0
    in_model_file = False

    def __init__(self, masks: Masks):
        self.masks = masks

    def start(self, model: nn.Module, step: int = 0) -> None:
        self.apply(model)

    def after_step(self, model: nn.Module, step: int) -> None:
        self.apply(model)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, payload: dict) -> None:
        return None

    @torch.no_grad()
    def apply(self, model: nn.Module) -> None:
        params = dict(model.named_parameters())
        missing = sorted(set(self.masks) - set(params))
        if missing:
            raise KeyError(f"masks name parameters the model lacks: {missing[:3]}")
        for name, mask in self.masks.items():
            params[name].mul_(mask.to(device=params[name].device, dtype=params[name].dtype))
