"""The one contract every output layer (and its loss) follows.

An output layer turns encoder states into a loss against the next-token targets::

    out = layer(hidden, targets, mask)   # -> OutputLoss

so a single training loop serves CONT, FIXED, SAMPLED, ADAPTIVE and SUBWORD alike
(the fairseq-criterion idea).  ``loss_sum`` is summed over valid tokens and
``num_tokens`` counts them; the loop divides, so the mean is token-weighted and
exact under data parallelism (see the trainer for the paper's per-replica mean).
Heldout results reduce the same way for every layer: the layer names how
(``heldout_reduction``, :mod:`elmoc.outputs.heldout`).  The tables know a layer by its
class too (:meth:`OutputLayer.table_label`, ``table_family``), never by its name.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from elmoc.outputs.heldout import HeldoutSums, PerplexitySums


@dataclass
class OutputLoss:
    """Result of an output layer.

    Attributes:
        loss_sum: scalar, the loss summed over valid tokens (what is differentiated).
        num_tokens: scalar float tensor, number of valid tokens.
        logs: extra scalars to log (python floats or 0-d tensors), e.g. ``{"cosine": ...}``.
    """

    loss_sum: torch.Tensor
    num_tokens: torch.Tensor
    logs: dict[str, float | torch.Tensor] = field(default_factory=dict)


class OutputLayer(nn.Module):
    """Base class of output layers.

    Subclasses implement :meth:`forward` and, for heldout evaluation,
    :meth:`evaluate` (defaults to ``forward`` under ``torch.no_grad``).  The class
    attribute ``heldout_reduction`` says how the sums of :meth:`evaluate`'s results
    reduce to the heldout metric (:mod:`elmoc.outputs.heldout`): ``"perplexity"``
    (``exp(loss_sum/num_tokens)`` of a *full* softmax), ``"cosine"`` (mean cosine,
    higher is better) or, by default, ``"loss"``.

    The tables place a layer by two class attributes: :meth:`table_label`, its name in
    the Output column (Table 5's names), and ``table_family``, the family it is timed and
    compared in (``"CONT"``: the continuous layers, whose CONT row is each encoder's
    baseline; ``"SOFTMAX"``: the softmax family; ``None``: a family of its own).

    Shape:
        hidden: (batch, time, input_dim) float encoder output.
        targets: (batch, time) long next-token ids.
        mask: (batch, time) bool, True for tokens that count.
    """

    heldout_reduction: type[HeldoutSums] = HeldoutSums
    table_family: str | None = None

    @classmethod
    def table_label(cls) -> str:
        """The layer's name in the tables' Output column: its registered name in capitals."""
        return cls.registered_name.upper()

    @property
    def heldout_metric(self) -> str:
        """The name of the heldout metric: ``"perplexity"``, ``"cosine"`` or ``"loss"``."""
        return self.heldout_reduction.metric

    def heldout_sums(self) -> HeldoutSums:
        """Empty running sums for one heldout evaluation of this layer."""
        return self.heldout_reduction(self)

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        raise NotImplementedError

    @torch.no_grad()
    def evaluate(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        return self.forward(hidden, targets, mask)

    def set_process_rank(self, rank: int) -> None:
        """Data parallelism: called with this process's rank before training, for
        per-process randomness (the sampled softmax's negatives).  Default: nothing."""

    def sparse_parameters(self) -> list[nn.Parameter]:
        """Parameters that receive sparse gradients (need a sparse-capable optimizer)."""
        return []

    def direction_shared_parameters(self) -> list[nn.Parameter]:
        """Parameters the paper's models share between the forward and backward LM
        (bilm-tf's one softmax, ELMo-Sub's tied table); ``elmoc params`` counts them
        once in the paper's convention.  Everything else is per direction."""
        return []


class SoftmaxOutput(OutputLayer):
    """Base class of the softmax family (SAMPLED, FIXED, ADAPTIVE, SUBWORD): heldout
    evaluation is an exact full softmax, so the heldout metric is perplexity.

    Shape:
        hidden: (batch, time, hidden_dim); targets: (batch, time) long; mask: (batch, time) bool.
    """

    heldout_reduction = PerplexitySums
    table_family = "SOFTMAX"
