"""What a prune method is (``prune.method`` of ``elmoc prune``; registers nothing).

A prune method is one file in this package (or a plug-in, ``ELMOC_PLUGINS``) with a class
registered as kind ``"prune_method"``: its ``Options`` dataclass is its typed section (the keys
of ``prune`` it adds to the shared ones, :class:`elmoc.train.prune_loop.PruneSettings`), and
:func:`elmoc.train.prune_loop.prune` asks it, round by round:

==============================================  ==================================================
``prepare(source, build)``                      once, with the source LM's ``model.pt`` dict
``round(previous, level, out, masks, build)``   the round's ``(spec, hooks, masks)``: the spec its
                                                run trains, the hooks that start it (weights,
                                                masks; :mod:`elmoc.train.hooks.base`) and its masks
                                                (None: a method without masks)
``keeps_masks``                                 the rounds keep shapes and masks (``mask.pt``):
                                                what a lottery ticket (``prune.ticket``) needs
``choose_masks(weights, level, previous)``      a masks method's masks of the encoder's matrices
                                                at sparsity ``level`` within ``previous``
==============================================  ==================================================

``build(payload)`` gives the model of a ``model.pt`` dict with its weights loaded.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from elmoc.encoders.base import Encoder
from elmoc.model_file import load_checkpoint, save_checkpoint
from elmoc.nn.pruning import MaskConstraint, Masks
from elmoc.train.hooks.base import StartFrom, TrainHook

MASK, MASK_FORMAT = "mask.pt", "elmoc-mask-v1"
Build = Callable[[dict[str, Any]], torch.nn.Module]
Round = tuple[dict[str, Any], list[TrainHook], "Masks | None"]


class PruneMethod:
    """A prune method (module docstring)."""

    @dataclass(frozen=True)
    class Options:
        """No options of its own."""

    keeps_masks = False

    def __init__(self, options: Any = None):
        self.options = self.Options() if options is None else options

    def prepare(self, source: dict[str, Any], build: Build) -> None:
        return None

    def round(self, previous: dict[str, Any], level: float, out: Path, masks: Masks | None, build: Build) -> Round:
        raise NotImplementedError


class MaskMethod(PruneMethod):
    """A method that zeroes weights: the matrices keep their shapes, the round's ``mask.pt``
    holds its masks (read back on a rerun), and its run starts from the previous round's
    weights under them.  A subclass says how masks are chosen (:meth:`choose_masks`)."""

    keeps_masks = True

    def choose_masks(self, weights: dict[str, torch.Tensor], level: float, previous: Masks | None) -> Masks:
        raise NotImplementedError

    def round(self, previous: dict[str, Any], level: float, out: Path, masks: Masks | None, build: Build) -> Round:
        masks = round_masks(out, previous, level, masks, build, self.choose_masks)
        return previous["spec"], [StartFrom(previous["model"]), MaskConstraint(masks)], masks


def encoder_matrices(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Name -> weight of every matrix (2 or more dims) inside the model's encoder(s): the LSTM's
    gate and projection matrices and input projection, a Transformer's attention and
    feed-forward matrices.  Input and output layers are not pruned."""
    found = {}
    for prefix, module in model.named_modules():
        if isinstance(module, Encoder):
            found.update({f"{prefix}.{name}": p for name, p in module.named_parameters() if p.dim() >= 2})
    return found


def load_masks(path: Path) -> Masks:
    return load_checkpoint(path, formats=(MASK_FORMAT,))["masks"]


def round_masks(out: Path, payload: dict[str, Any], level: float, previous: Masks | None, build: Build,
                choose: Callable[[dict[str, torch.Tensor], float, Masks | None], Masks]) -> Masks:
    """The round's masks: read back from ``out/mask.pt``, else chosen (``choose``) from
    ``payload``'s encoder matrices within ``previous`` and written there (before any training of
    the round)."""
    path = out / MASK
    if path.is_file():
        return load_masks(path)
    masks = choose(encoder_matrices(build(payload)), level, previous)
    out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, {"level": level, "masks": masks}, fmt=MASK_FORMAT)
    return masks
