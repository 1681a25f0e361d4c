"""How an output layer's heldout sums reduce to its heldout metric (fairseq's ``reduce_metrics``).

A heldout evaluation adds every window's :class:`~elmoc.outputs.base.OutputLoss` into
running sums; under data parallelism the processes add their sums together; the totals
then give the metric.  Each output layer names its reduction (``heldout_reduction``), so
the trainer's evaluation (:func:`elmoc.train.heldout.evaluate_heldout`) never asks which
layer it evaluates:

- :class:`HeldoutSums`: ``"loss"``, the mean loss per token;
- :class:`PerplexitySums`: ``"perplexity"``, ``exp`` of the mean NLL (a *full* softmax);
- :class:`elmoc.outputs.continuous.CosineSums`: ``"cosine"``, the token-weighted mean
  cosine, with the mean cosine of the best constant prediction beside it.

A result is ``{"metric", "value", "loss", "eval_tokens"}`` (plus what a reduction adds);
:meth:`HeldoutSums.combine` makes a joint bi-LM's result from its two directions'.
The class also says how the metric reads: which way is better, how tables print a
value and label an axis (:func:`metric_class` finds it by the name a ``heldout.json``
holds), so a new metric needs no edit of the tables.

This module knows the output layers only by their duck type (``out.loss_sum``,
``out.num_tokens``, ``out.logs``: an :class:`~elmoc.outputs.base.OutputLoss`), so
:mod:`elmoc.outputs.base` imports it and not the other way round.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from elmoc.errors import ConfigError
from elmoc.registry import by_name, list_available

# sums a 1-d float64 CPU vector over the data-parallel processes (None: one process)
AllReduce = Callable[[torch.Tensor], torch.Tensor]


class HeldoutSums:
    """Running sums of one heldout evaluation of ``layer`` (an output layer); metric ``"loss"``.

    ``scalars`` holds python floats (``[loss, tokens]`` here; subclasses append theirs),
    ``vector`` an optional float64 tensor of further sums (on the layer's device).

    How the metric reads (class attributes, used by the tables and figures):
    ``higher_is_better``; ``value_format``, a value in a table cell; ``description``, the
    metric in words (None: its name); ``log_scale``, whether a figure's axis of it is
    logarithmic; ``training_loss_label``, the axis of the training loss of its layers.
    """

    metric = "loss"
    higher_is_better = False
    value_format = "{:.1f}"
    description: str | None = None
    log_scale = False
    training_loss_label = "training loss (nats)"

    def __init__(self, layer: Any = None):
        self.scalars = [0.0, 0.0]  # summed loss, tokens
        self.vector: torch.Tensor | None = None

    def add(self, out: Any, targets: torch.Tensor, mask: torch.Tensor) -> None:
        """Add one window's result (reads it back: one host sync per heldout window).

        Shape: targets (batch, time) long; mask (batch, time) bool.
        """
        n = float(out.num_tokens)
        self.scalars[0] += float(out.loss_sum)
        self.scalars[1] += n

    def result(self, all_reduce: AllReduce | None = None) -> dict[str, Any]:
        """The metric of the sums, first added over processes with ``all_reduce``."""
        scalars, vector = self.scalars, self.vector
        if all_reduce is not None:
            flat = torch.tensor(scalars, dtype=torch.float64)
            if vector is not None:
                flat = torch.cat([flat, vector.cpu()])
            flat = all_reduce(flat)
            scalars, vector = flat[:len(scalars)].tolist(), None if vector is None else flat[len(scalars):]
        loss_total, tokens_total = scalars[0], scalars[1]
        if tokens_total == 0:
            raise ConfigError("heldout set produced no tokens; check corpus.heldout settings")
        mean_loss = loss_total / tokens_total
        result = {"metric": self.metric, "value": self.value_of_loss(mean_loss), "loss": mean_loss,
                  "eval_tokens": int(tokens_total)}
        return self.finish(result, scalars, vector)

    def finish(self, result: dict[str, Any], scalars: list[float], vector: torch.Tensor | None) -> dict[str, Any]:
        """Subclasses: complete ``result`` from the totals."""
        return result

    @classmethod
    def axis_label(cls, metric: str | None = None) -> str:
        """A figure's axis of the metric (``metric``: the name read from a file, for a
        metric no registered layer has), with the direction when higher is better."""
        what = cls.description or metric or cls.metric
        return f"heldout {what}" + (" (higher is better)" if cls.higher_is_better else "")

    @staticmethod
    def value_of_loss(mean_loss: float) -> float:
        """The metric of a mean loss per token."""
        return mean_loss

    @classmethod
    def combine(cls, forward: dict[str, Any], backward: dict[str, Any]) -> dict[str, Any]:
        """A joint bi-LM's heldout result from its directions' results.

        ``loss`` is the mean of the two directions' mean losses (the joint training loss),
        ``value`` the metric of it, ``eval_tokens`` counts both directions, and
        ``"forward"`` and ``"backward"`` hold the directions' results.
        """
        return {**cls.combined(forward, backward), "forward": forward, "backward": backward}

    @classmethod
    def combined(cls, forward: dict[str, Any], backward: dict[str, Any]) -> dict[str, Any]:
        """:meth:`combine` without the directions' results (subclasses add their keys)."""
        loss = 0.5 * (forward["loss"] + backward["loss"])
        return {"metric": forward["metric"], "value": cls.value_of_loss(loss), "loss": loss,
                "eval_tokens": forward["eval_tokens"] + backward["eval_tokens"]}


class PerplexitySums(HeldoutSums):
    """Metric ``"perplexity"``: exp of the mean NLL per token (capped at exp(700))."""

    metric = "perplexity"
    log_scale = True

    @staticmethod
    def value_of_loss(mean_loss: float) -> float:
        return math.exp(min(mean_loss, 700.0))


def metric_class(metric: Any) -> type[HeldoutSums]:
    """The reduction whose ``metric`` is ``metric`` (the name in a ``heldout.json``), among
    the registered output layers' (plug-ins included); :class:`HeldoutSums` for any other."""
    for name in list_available("output"):
        reduction = by_name("output", name).heldout_reduction
        if reduction.metric == metric:
            return reduction
    return HeldoutSums
