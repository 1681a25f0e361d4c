"""Frozen pretrained word-vector input (ELMo-C's input layer, spec 1.1).

Any ``.npy`` table aligned with the vocabulary works: FastText-CC, FastText trained
on our corpus (ELMo-C-ONEB), a random N(0,1) table, or the trained char-CNN run over
the vocabulary (ELMo-C-CNN*).  The table is never trained.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sized

import torch

from elmoc.inputs.base import InputLayer
from elmoc.inputs.vector_table import load_table, lookup, store_table, stored_table
from elmoc.registry import register


@register("input", "fasttext")
class FastTextInput(InputLayer):
    """Look token ids up in a frozen ``(vocab, dim)`` table.

    Args:
        vectors: path of the ``.npy`` table (float32 ``[V, dim]`` in vocabulary id order).
        dim: optional expected width; checked against the file, and used to size the
            model on the meta device when the file does not exist yet.
        host_resident: keep the table in CPU memory even when the model moves to a GPU
            and copy only the rows a batch needs (the paper's trick, spec 2.2).  Off:
            the table is a non-persistent buffer and moves with the model.
        vocab: (context) the vocabulary the table must be aligned with.

    The table is a buffer (``persistent=False``: it is rebuilt from ``vectors`` instead
    of being stored in every checkpoint) or, when host-resident, a plain attribute
    that ``.to(device)`` does not move.  Either way it is not a parameter.

    Shape:
        ids: (batch, time) long; returns (batch, time, dim) float32.
    """

    OPTION_RANGES = {"dim": "int > 0 or null"}

    def __init__(
        self,
        vectors: str,
        dim: int | None = None,
        host_resident: bool = False,
        vocab: Sized | None = None,
    ):
        super().__init__()
        self.vectors_path = str(vectors)
        self.host_resident = bool(host_resident)
        table = load_table(vectors, vocab, dim, what="input 'fasttext' vectors")
        store_table(self, table, self.host_resident)
        self.output_dim = int(table.shape[1])
        self.vocab_size = int(table.shape[0])

    @property
    def weight(self) -> torch.Tensor:
        """The ``(vocab, dim)`` table wherever it lives."""
        return stored_table(self)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return lookup(self.weight, ids, self.host_resident)

    def extra_repr(self) -> str:
        return f"{Path(self.vectors_path).name}, vocab={self.vocab_size}, dim={self.output_dim}, host_resident={self.host_resident}"
