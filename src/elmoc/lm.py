"""One direction of a bi-LM: input layer -> encoder -> output layer.

The three parts are built from an LM *spec* (a dict, usually a resolved YAML
preset from ``config/lm/``)::

    input:   {type: fasttext, vectors: results/vectors/fasttext.npy}
    encoder: {type: elmo_lstm, num_layers: 2, cell_size: 4096, projection_size: 512, ...}
    output:  {type: cosine, ...}
    optimizer: {...}   # read by the trainer, ignored here
    train:     {...}   # read by the trainer, ignored here
    data:      {train: results/corpus/train, heldout: results/corpus/heldout.txt}
    vocab:     results/vocab/vocab.txt

Build-time context handed to the registry (see :func:`elmoc.registry.build`):
the input layer may take ``vocab``; the encoder takes ``input_dim``; the output
layer may take ``hidden_dim``, ``vocab`` and ``input_layer`` (for tied or shared
tables).  Forward and backward LMs are two instances trained as separate jobs
(spec 1.1 "Directions"); the backward one simply reads reversed streams.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from elmoc.data.vocab import PAD_ID, Vocabulary
from elmoc.encoders.base import Encoder, EncoderOutput
from elmoc.errors import ConfigError
from elmoc.inputs.base import InputLayer
from elmoc.outputs.base import OutputLayer, OutputLoss
from elmoc.registry import build

SPEC_SECTIONS = ("name", "description", "input", "encoder", "output", "optimizer", "train", "data", "vocab")


@dataclass
class LMBatch:
    """One training window.

    Shape:
        inputs: (batch, time) long ids; targets: (batch, time) long next-token ids;
        mask: (batch, time) bool, True where the position counts (computed from the
        *inputs*, as in the paper's code, spec P7).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "LMBatch":
        return LMBatch(
            self.inputs.to(device, non_blocking=non_blocking),
            self.targets.to(device, non_blocking=non_blocking),
            self.mask.to(device, non_blocking=non_blocking),
        )

    @property
    def num_tokens(self) -> int:
        return int(self.mask.sum())


class LanguageModel(nn.Module):
    """A unidirectional LM whose loss is whatever its output layer computes."""

    def __init__(self, input_layer: InputLayer, encoder: Encoder, output_layer: OutputLayer):
        super().__init__()
        self.input_layer = input_layer
        self.encoder = encoder
        self.output_layer = output_layer

    @classmethod
    def from_spec(cls, spec: dict[str, Any], vocab: Vocabulary | None = None) -> "LanguageModel":
        unknown = sorted(set(spec) - set(SPEC_SECTIONS))
        if unknown:
            raise ConfigError(f"LM spec has unknown section(s) {unknown}; allowed: {', '.join(SPEC_SECTIONS)}")
        for section in ("input", "encoder", "output"):
            if section not in spec:
                raise ConfigError(f"LM spec is missing the {section!r} section")
        input_layer = build("input", spec["input"], vocab=vocab)
        encoder = build("encoder", spec["encoder"], input_dim=input_layer.output_dim)
        output_layer = build(
            "output", spec["output"], hidden_dim=encoder.output_dim, vocab=vocab, input_layer=input_layer
        )
        return cls(input_layer, encoder, output_layer)

    def forward(self, batch: LMBatch, state: Any = None) -> tuple[OutputLoss, Any]:
        """Loss of one window and the encoder state to carry to the next one."""
        encoded = self.encode(batch.inputs, batch.mask, state)
        return self.output_layer(encoded.output, batch.targets, batch.mask), encoded.state

    @torch.no_grad()
    def evaluate(self, batch: LMBatch, state: Any = None) -> tuple[OutputLoss, Any]:
        """Heldout loss (full softmax for the softmax family) of one window."""
        encoded = self.encode(batch.inputs, batch.mask, state)
        return self.output_layer.evaluate(encoded.output, batch.targets, batch.mask), encoded.state

    def encode(self, ids: torch.Tensor, mask: torch.Tensor | None = None, state: Any = None) -> EncoderOutput:
        """Encoder output with every layer (for feature extraction).

        Shape: ids (batch, time) long; mask (batch, time) bool, default ``ids != PAD``.
        """
        if mask is None:
            mask = ids != PAD_ID
        return self.encoder(self.input_layer(ids), mask, state)

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
