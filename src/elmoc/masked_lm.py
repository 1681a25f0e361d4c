"""A masked LM (issue 25, "MLM-C"): one bidirectional encoder predicting masked words.

Built from an LM spec like :class:`elmoc.lm.LanguageModel` (``input``, ``encoder``,
``output`` sections, the same registry), with ``train.objective: masked_lm``.  BERT's
recipe at the word level: the batch (:class:`elmoc.data.masking.MaskedLMBatch`) says
which positions are predicted and which of them read the *mask*; this model reads the
input layer's vectors of the (partly randomized) ids, puts its trainable
:attr:`MaskedLM.mask_vector` at the masked positions (so any input layer works: a
frozen FastText table, a char-CNN, a trainable table), runs the encoder (which must
see both sides: ``encoder.causal: false``) and hands the encoder output to the output
layer with the original words as targets and the predicted positions as the mask.  The
output-layer contract (:mod:`elmoc.outputs.base`) is unchanged, so CONT (the cosine loss
against the FastText vector of the masked word), SAMPLED and ADAPTIVE all train it, and
the heldout metric is the layer's own (mean cosine, perplexity) over masked positions.

For features the model is one bidirectional stack (no masking at extraction): layers
= the encoder's input view and each block (:class:`elmoc.features.bilm.BiLM` with a
single stack).
"""
from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import nn

from elmoc.data.masking import MaskedLMBatch
from elmoc.data.vocab.vocabulary import PAD_ID, Vocabulary
from elmoc.encoders.base import Encoder
from elmoc.errors import ConfigError
from elmoc.inputs.base import InputLayer
from elmoc.lm import LanguageModel, sentence_starts
from elmoc.nn.notes import AttachedNotes, NoteDictionary
from elmoc.outputs.base import OutputLayer, OutputLoss

MASK_VECTOR_STD = 0.02  # BERT's initializer range


class MaskedLM(nn.Module):
    """Input layer -> bidirectional encoder -> output layer, with a trainable mask vector.

    Args:
        input_layer, encoder, output_layer: as in :class:`elmoc.lm.LanguageModel`; the
            encoder must not be causal (its ``causal`` attribute False).

    Attributes:
        mask_vector: (input_dim,) the vector a masked position reads instead of its word's.
    """

    notes = AttachedNotes("encoder")  # TNF's dictionary, placed for the encoder when attached

    def __init__(self, input_layer: InputLayer, encoder: Encoder, output_layer: OutputLayer):
        super().__init__()
        if getattr(encoder, "causal", True):
            raise ConfigError(f"a masked LM (train.objective: masked_lm) needs a bidirectional encoder; "
                              f"encoder {type(encoder).__name__} is causal: use type: transformer with causal: false")
        self.input_layer = input_layer
        self.encoder = encoder
        self.output_layer = output_layer
        self.mask_vector = nn.Parameter(torch.randn(input_layer.output_dim) * MASK_VECTOR_STD)
        self.notes = None  # TNF in pre-training only (set by the trainer; no weights)

    @classmethod
    def from_spec(cls, spec: dict[str, Any], vocab: Vocabulary | None = None) -> "MaskedLM":
        lm = LanguageModel.from_spec(spec, vocab)  # the same sections, checks and registry
        return cls(lm.input_layer, lm.encoder, lm.output_layer)

    def masked_inputs(self, batch: MaskedLMBatch, notes: NoteDictionary | None = None) -> torch.Tensor:
        """The input layer's vectors of ``batch.inputs`` (rare words mixed with their
        ``notes`` when these mix into the input layer's vectors) with the mask vector where
        ``batch.replaced``.  Shape: (batch, time, input_dim)."""
        vectors = self.input_layer(batch.inputs)
        if notes is not None and not notes.in_encoder:
            vectors = notes.mix(batch.inputs, vectors)
        mask_vector = self.mask_vector.to(vectors.dtype)
        return torch.where(batch.replaced.unsqueeze(-1), mask_vector, vectors)

    def hidden(self, batch: MaskedLMBatch, notes: NoteDictionary | None = None) -> torch.Tensor:
        """Encoder output of a masked window (notes placed in the encoder mix into its own input,
        a masked position excepted).  Shape: (batch, time, encoder output_dim)."""
        extra = {}
        if notes is not None and notes.in_encoder:  # PAD: never a rare word, so a masked position reads no note
            extra = {"mix_embedded": partial(notes.mix, batch.inputs.masked_fill(batch.replaced, PAD_ID))}
        return self.encoder(self.masked_inputs(batch, notes), batch.padding, None,
                            **sentence_starts(self.encoder, batch.inputs), **extra).output

    def forward(self, batch: MaskedLMBatch, state: Any = None) -> tuple[OutputLoss, None]:
        """The output layer's loss at the chosen positions (against the original words).
        ``state`` is ignored (every window stands alone); returns no state.  With
        :attr:`notes`, rare words read their notes (a masked one reads the mask vector) and
        the window's notes are kept (keyed by the original words)."""
        hidden = self.hidden(batch, self.notes)
        if self.notes is not None:
            self.notes.observe(batch.targets, batch.padding, hidden)
        return self.output_layer(hidden, batch.targets, batch.mask), None

    @torch.no_grad()
    def evaluate(self, batch: MaskedLMBatch, state: Any = None) -> tuple[OutputLoss, None]:
        """Heldout loss over the chosen positions (full softmax for the softmax family)."""
        return self.output_layer.evaluate(self.hidden(batch), batch.targets, batch.mask), None

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
