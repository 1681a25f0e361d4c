"""Shared machinery of the continuous output layers (CONT, spec 2).

A CONT layer projects the encoder state with one ``Linear(hidden_dim -> d_emb, bias)``
(always present, also when the sizes agree, as for ELMo-C-CNN's 512 -> 512) and
scores the result against the *frozen, unnormalized* pretrained vector of the next
token.  Subclasses (``cosine``, ``l2``, ``vmf``; one registry entry each, so each
has exactly its own options) only define the per-token loss (:meth:`ContinuousOutput.token_loss`);
one adding an option names it alone and passes ``**kwargs`` on (the registry reads the
options along the class hierarchy).  Each is a CONT layer in the tables: family ``CONT``,
labelled ``CONT-<NAME>`` (``CONT`` alone for the paper's cosine loss).

Heldout evaluation is the same for every CONT layer: :meth:`evaluate` returns
``loss_sum = -sum(cos)`` over valid tokens, so the heldout metric ``cosine`` is
``-loss_sum / num_tokens`` (also logged as ``logs["cosine"]``) and is comparable
across the three losses; :class:`CosineSums` reduces it, with the mean cosine of the
best constant prediction as a baseline.
"""
from __future__ import annotations

from typing import Sized

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.inputs.vector_table import lookup, store_table, stored_table, table_for_output
from elmoc.nn.cosine import cosine_similarity
from elmoc.nn.masking import masked_sum_and_count
from elmoc.outputs.base import OutputLayer, OutputLoss
from elmoc.outputs.heldout import HeldoutSums


class CosineSums(HeldoutSums):
    """Metric ``"cosine"``: the token-weighted mean cosine (higher is better), reported
    with ``constant_baseline``, the mean cosine of the best *constant* prediction
    (``|sum of unit targets| / N``): an LM must beat it; FastText tables from tiny corpora
    make it close to 1.  ``scalars`` is ``[loss, tokens, cosine]``, ``vector`` the sum of
    the unit-normalized targets (on the target table's device).
    """

    metric = "cosine"
    higher_is_better = True
    value_format = "{:.4f}"
    description = "mean cosine"
    training_loss_label = "training loss (-cos)"

    def __init__(self, layer: "ContinuousOutput"):
        super().__init__(layer)
        self.table = layer.target_table
        self.scalars.append(0.0)  # summed cosine
        self.vector = torch.zeros(self.table.shape[1], dtype=torch.float64, device=self.table.device)

    def add(self, out: OutputLoss, targets: torch.Tensor, mask: torch.Tensor) -> None:
        super().add(out, targets, mask)
        self.scalars[2] += float(out.logs["cosine"]) * float(out.num_tokens)
        unit = self.table[targets[mask].to(self.table.device)].double()
        self.vector += torch.nn.functional.normalize(unit, dim=-1).sum(0)

    def finish(self, result: dict, scalars: list[float], vector: torch.Tensor | None) -> dict:
        result["value"] = scalars[2] / scalars[1]
        result["constant_baseline"] = float(vector.norm()) / scalars[1]
        return result

    @classmethod
    def combined(cls, forward: dict, backward: dict) -> dict:
        """The mean of the two directions' mean cosines (and constant baselines)."""
        both = super().combined(forward, backward)
        both["value"] = 0.5 * (forward["value"] + backward["value"])
        both["constant_baseline"] = 0.5 * (forward["constant_baseline"] + backward["constant_baseline"])
        return both


class ContinuousOutput(OutputLayer):
    """Projection + frozen target table; subclasses implement :meth:`token_loss`.

    A subclass with options of its own takes them by name and the rest as ``**kwargs``,
    passed to this constructor (as :class:`~elmoc.outputs.l2.L2Output`).

    Args:
        vectors: ``.npy`` target table ``[V, d_emb]`` aligned with the vocabulary.
        dim: optional expected ``d_emb`` (checked; sizes the model on the meta device).
        host_resident: keep the target table in CPU memory and copy only the rows of a
            batch's targets to the model device (spec 2.2).
        hidden_dim: (context) encoder output size.
        vocab: (context) the vocabulary.
        input_layer: (context) when it holds the same table file, its tensor is reused
            instead of loading a second copy (as the paper's code does).

    Shape:
        hidden: (batch, time, hidden_dim); targets: (batch, time) long; mask: (batch, time) bool.
    """

    OPTION_RANGES = {"dim": "int > 0 or null"}

    heldout_reduction = CosineSums
    table_family = "CONT"

    @classmethod
    def table_label(cls) -> str:
        return f"CONT-{cls.registered_name.upper()}"

    def __init__(
        self,
        vectors: str,
        hidden_dim: int,
        dim: int | None = None,
        host_resident: bool = False,
        vocab: Sized | None = None,
        input_layer: nn.Module | None = None,
    ):
        super().__init__()
        if not isinstance(hidden_dim, int) or hidden_dim <= 0:
            raise ConfigError(f"output {self.registered_name!r}: hidden_dim must be a positive int, got {hidden_dim!r}")
        self.vectors_path = str(vectors)
        self.host_resident = bool(host_resident)
        table = table_for_output(vectors, self.host_resident, input_layer, vocab, dim,
                                 what=f"output {self.registered_name!r} vectors")
        store_table(self, table, self.host_resident)
        self.embedding_dim = int(table.shape[1])
        self.projection = nn.Linear(hidden_dim, self.embedding_dim)

    @property
    def target_table(self) -> torch.Tensor:
        return stored_table(self)

    def token_loss(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-token loss.  Shape: prediction, target (batch, time, d_emb) -> (batch, time)."""
        raise NotImplementedError

    def _predict(self, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if hidden.dim() != 3 or hidden.shape[:2] != targets.shape:
            raise ValueError(f"hidden {tuple(hidden.shape)} and targets {tuple(targets.shape)} do not match (batch, time)")
        prediction = self.projection(hidden)  # (B, T, d_emb)
        target = lookup(self.target_table, targets, self.host_resident).to(prediction.dtype)  # (B, T, d_emb)
        return prediction, target

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        prediction, target = self._predict(hidden, targets)
        loss_sum, count = masked_sum_and_count(self.token_loss(prediction, target), mask)
        logs = self.step_logs(loss_sum.detach(), count.clamp(min=1.0), prediction, target, mask)
        return OutputLoss(loss_sum, count, logs)

    def step_logs(self, loss_sum: torch.Tensor, count: torch.Tensor, prediction: torch.Tensor, target: torch.Tensor,
             mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """What a training step logs: the mean cosine (the heldout metric) and the mean loss,
        under the layer's registered name.

        Shape: loss_sum, count (the summed loss, detached, and the token count, at least 1)
        scalars; prediction, target (batch, time, d_emb); mask (batch, time) bool.
        """
        with torch.no_grad():
            cos_sum, _ = masked_sum_and_count(cosine_similarity(prediction, target), mask)
        return {"cosine": cos_sum / count, self.registered_name: loss_sum / count}

    @torch.no_grad()
    def evaluate(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        """``loss_sum = -sum(cos)`` for every CONT loss; metric ``cosine`` = its negated mean."""
        prediction, target = self._predict(hidden, targets)
        cos_sum, count = masked_sum_and_count(cosine_similarity(prediction, target), mask)
        return OutputLoss(-cos_sum, count, {"cosine": cos_sum / count.clamp(min=1.0)})

    def extra_repr(self) -> str:
        return f"loss={self.registered_name}, d_emb={self.embedding_dim}, host_resident={self.host_resident}"
