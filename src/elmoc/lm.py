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

The softmax family is trained the way bilm-tf and AllenNLP train ELMo:
:class:`BidirectionalLM` is *one* model with one input layer and one output layer
shared by a forward and a backward encoder, its loss the mean of the two directions'
losses (``train.directions: joint`` in the spec).  ELMo-C and its ablations keep two
separate runs (the paper's footnote 7: the 2 + 2 GPU split by direction applies only
to the continuous output).
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import torch
from torch import nn

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.vocab.vocabulary import BOS_ID, PAD_ID, Vocabulary
from elmoc.directions import DIRECTIONS, FORWARD
from elmoc.encoders.base import Encoder, EncoderOutput
from elmoc.errors import ConfigError
from elmoc.inputs.base import InputLayer
from elmoc.nn.notes import AttachedNotes
from elmoc.outputs.base import OutputLayer, OutputLoss
from elmoc.registry import build

SPEC_SECTIONS = ("name", "description", "input", "encoder", "output", "optimizer", "train", "data", "vocab")
# The build-time names :meth:`LanguageModel.from_spec` hands each block (the registry's context): a
# config may not set them (elmoc.registry.check_block, also when the workflow is parsed).
BUILD_CONTEXT = {"input": ("vocab",), "encoder": ("input_dim",), "output": ("hidden_dim", "vocab", "input_layer")}


class LanguageModel(nn.Module):
    """A unidirectional LM whose loss is whatever its output layer computes
    (``output_layer`` None: an LM used only to :meth:`encode`, as features are)."""

    notes = AttachedNotes("encoder")  # TNF's dictionary, placed for the encoder when attached

    def __init__(self, input_layer: InputLayer, encoder: Encoder, output_layer: OutputLayer | None):
        super().__init__()
        self.input_layer = input_layer
        self.encoder = encoder
        self.output_layer = output_layer
        self.notes = None  # TNF in pre-training only (set by the trainer; no weights)

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
        """Loss of one window and the encoder state to carry to the next one (with
        :attr:`notes`, rare words read their notes and the window's notes are kept)."""
        pieces = batch.words is not None  # a subword LM's batch names each piece's word
        vectors, mix, notes = None, None, self.notes
        if notes is not None:
            mix = partial(notes.mix_pieces, batch.words) if pieces else partial(notes.mix, batch.inputs)
            if not notes.in_encoder:  # into the input layer's vectors
                vectors, mix = mix(self.input_layer(batch.inputs)), None
        encoded = self.encode(batch.inputs, batch.mask, state, vectors, mix)
        if self.notes is not None:
            self.notes.observe(batch.words if pieces else batch.inputs, batch.mask, encoded.output, pieces)
        return self.output_layer(encoded.output, batch.targets, batch.mask), encoded.state

    @torch.no_grad()
    def evaluate(self, batch: LMBatch, state: Any = None) -> tuple[OutputLoss, Any]:
        """Heldout loss (full softmax for the softmax family) of one window."""
        encoded = self.encode(batch.inputs, batch.mask, state)
        return self.output_layer.evaluate(encoded.output, batch.targets, batch.mask), encoded.state

    def encode(self, ids: torch.Tensor, mask: torch.Tensor | None = None, state: Any = None,
               vectors: torch.Tensor | None = None,
               mix_embedded: Callable[[torch.Tensor], torch.Tensor] | None = None) -> EncoderOutput:
        """Encoder output with every layer (for feature extraction).

        Shape: ids (batch, time) long; mask (batch, time) bool, default ``ids != PAD``;
        vectors (batch, time, input_dim): input vectors to use instead of the input
        layer's of ``ids`` (features compose those of out-of-vocabulary words);
        ``mix_embedded``: for an encoder that takes it (:attr:`Encoder.mixes_embedded`), applied
        to its own model-width input (TNF's notes).
        """
        if mask is None:
            mask = ids != PAD_ID
        extra = {} if mix_embedded is None else {"mix_embedded": mix_embedded}
        return self.encoder(self.input_layer(ids) if vectors is None else vectors, mask, state,
                            **sentence_starts(self.encoder, ids), **extra)

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def sentence_starts(encoder: Encoder, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"starts": ids == <s>}`` (bool (batch, time)) for an encoder that reads where sentences
    start (:attr:`Encoder.reads_sentence_starts`), else nothing: the encoder's extra arguments."""
    return {"starts": ids == BOS_ID} if getattr(encoder, "reads_sentence_starts", False) else {}


def mean_of_directions(fwd: OutputLoss, bwd: OutputLoss) -> OutputLoss:
    """The joint loss: ``loss_sum / num_tokens`` is the mean of the two directions'
    token-mean losses (bilm-tf's ``0.5 * (loss_fwd + loss_bwd)``), exactly, whatever the
    two token counts; ``num_tokens`` counts the tokens of both.  Logs are averaged the
    same way and also given per direction (``forward_*``, ``backward_*``).
    """
    nf, nb = fwd.num_tokens.clamp(min=1.0), bwd.num_tokens.clamp(min=1.0)
    num_tokens = fwd.num_tokens + bwd.num_tokens
    mean = 0.5 * (fwd.loss_sum / nf + bwd.loss_sum / nb)
    logs: dict[str, float | torch.Tensor] = {}
    for name in sorted(set(fwd.logs) & set(bwd.logs)):
        logs[name] = 0.5 * (fwd.logs[name] + bwd.logs[name])
    for prefix, out in (("forward", fwd), ("backward", bwd)):
        logs[f"{prefix}_loss"] = (out.loss_sum / out.num_tokens.clamp(min=1.0)).detach()
        logs.update({f"{prefix}_{k}": v for k, v in out.logs.items()})
    return OutputLoss(loss_sum=mean * num_tokens, num_tokens=num_tokens, logs=logs)


class BidirectionalLM(nn.Module):
    """A joint bi-LM (bilm-tf, AllenNLP): one input layer and one output layer shared by
    a forward and a backward encoder of the same spec.

    ``forward(BiLMBatch, (state_fwd, state_bwd))`` returns :func:`mean_of_directions` of
    the two directions' losses and the pair of new states.  :meth:`direction` gives a
    :class:`LanguageModel` view of one direction that shares this model's modules (for
    feature extraction and anything else that consumes one direction).
    """

    notes = AttachedNotes("forward_encoder")  # one dictionary for both (alike) encoders

    def __init__(self, input_layer: InputLayer, forward_encoder: Encoder, backward_encoder: Encoder,
                 output_layer: OutputLayer):
        super().__init__()
        self.input_layer = input_layer
        self.forward_encoder = forward_encoder
        self.backward_encoder = backward_encoder
        self.output_layer = output_layer
        self.notes = None  # one dictionary, fed by both directions

    @classmethod
    def from_spec(cls, spec: dict[str, Any], vocab: Vocabulary | None = None) -> "BidirectionalLM":
        forward = LanguageModel.from_spec(spec, vocab)
        backward_encoder = build("encoder", spec["encoder"], input_dim=forward.input_layer.output_dim)
        return cls(forward.input_layer, forward.encoder, backward_encoder, forward.output_layer)

    def direction(self, name: str) -> LanguageModel:
        """The ``"forward"`` or ``"backward"`` LM, sharing this model's modules."""
        if name not in DIRECTIONS:
            raise ConfigError(f"direction must be 'forward' or 'backward', got {name!r}")
        encoder = self.forward_encoder if name == FORWARD else self.backward_encoder
        view = LanguageModel(self.input_layer, encoder, self.output_layer)
        view.notes = self.notes
        return view

    def forward(self, batch: BiLMBatch, state: Any = None) -> tuple[OutputLoss, Any]:
        fwd_state, bwd_state = state if state is not None else (None, None)
        fwd, fwd_state = self.direction("forward")(batch.forward, fwd_state)
        bwd, bwd_state = self.direction("backward")(batch.backward, bwd_state)
        return mean_of_directions(fwd, bwd), (fwd_state, bwd_state)

    @torch.no_grad()
    def evaluate(self, batch: BiLMBatch, state: Any = None) -> tuple[OutputLoss, Any]:
        fwd_state, bwd_state = state if state is not None else (None, None)
        fwd, fwd_state = self.direction("forward").evaluate(batch.forward, fwd_state)
        bwd, bwd_state = self.direction("backward").evaluate(batch.backward, bwd_state)
        return mean_of_directions(fwd, bwd), (fwd_state, bwd_state)

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


OUTPUT_LAYER = "output_layer"  # the attribute of every LM model that holds its output layer


def parameter_layers(model: nn.Module) -> dict[str, int]:
    """Parameter name (``named_parameters(remove_duplicate=False)``) -> layer of an LM model
    (:class:`LanguageModel`, :class:`BidirectionalLM`, :class:`~elmoc.masked_lm.MaskedLM`), as
    ULMFiT's discriminative rates count layers (Howard & Ruder 2018, section 3.2): 0 for the input
    layer and whatever sits outside the encoders and the output layer (a mask vector), l for the
    parameters of an encoder's block l - 1 (an LSTM layer, a Transformer block), L (the top) for
    what an encoder registers after its blocks (a Transformer's final LayerNorm) and 0 for what it
    registers before them (an input projection), and L + 1 for the output layer.  An encoder's
    ``num_layers`` counts the layers it returns (its input view and one per block): L =
    ``num_layers - 1``; the two encoders of a bidirectional LM have the same L."""
    layers: dict[str, int] = {}
    encoders = {name: child for name, child in model.named_children() if isinstance(child, Encoder)}
    top = max((e.num_layers - 1 for e in encoders.values()), default=0)
    for name, encoder in encoders.items():
        stack, after, child_layer = None, False, {}
        for child_name, child in encoder.named_children():
            if stack is None and isinstance(child, nn.ModuleList) and len(child) == encoder.num_layers - 1:
                stack, after = child_name, True
            else:
                child_layer[child_name] = encoder.num_layers - 1 if after else 0
        for param, _ in encoder.named_parameters(remove_duplicate=False):
            parts = param.split(".")
            layer = int(parts[1]) + 1 if parts[0] == stack and len(parts) > 2 else child_layer.get(parts[0], 0)
            layers[f"{name}.{param}"] = layer
    for param, _ in model.named_parameters(remove_duplicate=False):
        if param not in layers:
            layers[param] = top + 1 if param.split(".")[0] == OUTPUT_LAYER else 0
    return layers
