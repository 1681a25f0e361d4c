"""FIXED: sampled softmax whose output table is the frozen pretrained table (spec 3.4).

The paper's speed baseline "CONT with a ranking loss": the encoder state goes
through ``Linear(hidden_dim -> d_emb, bias)`` (the only trainable part, exactly as
CONT) and is scored by a sampled softmax against the frozen FastText rows, with
no output bias (the paper's code never trains it; zero here).  Unlike the paper's
code, which left the table random for its speed runs, the FastText vectors are
really loaded.  Evaluation is the full softmax over the frozen table; a host-resident
table is copied to the model's device once per heldout evaluation (kept while the layer
is in eval mode, dropped by ``train()``), not once per heldout batch.
"""
from __future__ import annotations

from typing import Sized

import torch
from torch import nn

from elmoc.inputs.vector_table import lookup, store_table, stored_table, table_for_output
from elmoc.outputs.sampled import SampledSoftmaxBase
from elmoc.registry import register


@register("output", "fixed")
class FixedOutput(SampledSoftmaxBase):
    """Sampled softmax against a frozen output table.

    Args:
        vectors: ``.npy`` table ``[V, d_emb]`` aligned with the vocabulary.
        dim: optional expected ``d_emb`` (checked; sizes the model on the meta device).
        num_samples: negatives per batch (8192 as SAMPLED).
        host_resident: keep the table in CPU memory; copy only the rows used by a
            step (the true and sampled ids) to the model device.
        seed: sampler seed.
        hidden_dim, vocab, input_layer: (context); an input layer holding the same
            table file lends its tensor instead of a second copy.
    """

    OPTION_RANGES = {"dim": "int > 0 or null"}

    def __init__(
        self,
        vectors: str,
        hidden_dim: int,
        vocab: Sized | None = None,
        dim: int | None = None,
        num_samples: int = 8192,
        host_resident: bool = False,
        seed: int = 1111,
        input_layer: nn.Module | None = None,
    ):
        table = table_for_output(vectors, host_resident, input_layer, vocab, dim, what="output 'fixed' vectors")
        super().__init__(int(table.shape[0]), num_samples, seed)
        self.vectors_path = str(vectors)
        self.host_resident = bool(host_resident)
        store_table(self, table, self.host_resident)
        self.embedding_dim = int(table.shape[1])
        self.projection = nn.Linear(hidden_dim, self.embedding_dim)
        self._eval_table: torch.Tensor | None = None  # device copy of a host-resident table, eval mode only

    @property
    def target_table(self) -> torch.Tensor:
        return stored_table(self)

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.projection(hidden)

    def rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = lookup(self.target_table, ids, self.host_resident)  # host-resident: CPU gather, async copy
        return w, w.new_zeros(ids.shape[0])

    def full_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.target_table
        device = self.projection.weight.device
        if w.device != device:  # host-resident: the whole table, once per evaluation
            if self.training:
                return self._zero_bias(w.to(device))
            if self._eval_table is None or self._eval_table.device != device:
                self._eval_table = w.to(device)
            w = self._eval_table
        return self._zero_bias(w)

    @staticmethod
    def _zero_bias(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return w, w.new_zeros(w.shape[0])

    def train(self, mode: bool = True) -> "FixedOutput":
        if mode:
            self._eval_table = None  # training gathers only the rows a step uses
        return super().train(mode)
