""":class:`Elmo`, AllenNLP's ``Elmo`` contract over a model directory, and
:func:`embed_sentences`.

:class:`Elmo`: token strings (or word ids) in; ``{"elmo_representations": [N tensors
(batch, time, dim)], "mask": (batch, time)}`` out, each representation its own learned
scalar mix of the layers, with dropout.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from elmoc.devices import resolve_device
from elmoc.errors import ConfigError
from elmoc.features.bilm import BiLM
from elmoc.features.embed import check_batching, select_layers, sentence_features
from elmoc.features.scalar_mix import ScalarMix
from elmoc.pretrained.loader import load_bilm


class Elmo(nn.Module):
    """AllenNLP's ``Elmo`` contract over an elmoc bi-LM.

    Args:
        bilm: the frozen (or fine-tunable) bi-LM, e.g. from :func:`~elmoc.pretrained.loader.load_bilm`.
        num_output_representations: how many scalar mixes (e.g. 2: one for the input
            and one for the output of a task model).
        dropout: applied to each representation after mixing.
        requires_grad: fine-tune the bi-LM too (default: frozen; the mixes are always trained).
        do_layer_norm: normalise each layer before mixing (AllenNLP's option).
        scalar_mix_parameters: fixed (untrainable) mix weights before the softmax, one per layer.
        stateful: carry the LSTM states from one call to the next, row by row, as AllenNLP
            does (default False: every sentence starts from zeros, as ``elmoc extract``).

    ``forward(inputs)`` takes a list of token lists, or word ids (batch, time) long in the
    directory's vocabulary (0 = padding), and returns
    ``{"elmo_representations": [num_output_representations x (batch, time, dim)],
    "mask": (batch, time) bool}``.
    """

    def __init__(self, bilm: BiLM, num_output_representations: int = 1, dropout: float = 0.5,
                 requires_grad: bool = False, do_layer_norm: bool = False,
                 scalar_mix_parameters: Sequence[float] | None = None, stateful: bool = False):
        super().__init__()
        if not isinstance(num_output_representations, int) or num_output_representations < 1:
            raise ConfigError(f"num_output_representations must be >= 1, got {num_output_representations!r}")
        self.bilm = bilm.eval()
        self.requires_grad = bool(requires_grad)
        for p in self.bilm.parameters():
            p.requires_grad_(self.requires_grad)
        self.dropout = nn.Dropout(p=dropout)
        self.scalar_mixes = nn.ModuleList(
            ScalarMix(bilm.num_layers, layer_norm=do_layer_norm, initial_weights=scalar_mix_parameters,
                      trainable=scalar_mix_parameters is None)
            for _ in range(num_output_representations))
        self.stateful = bool(stateful)
        self._states: tuple[Any, Any] | None = None

    @classmethod
    def from_pretrained(cls, directory: str | Path, num_output_representations: int = 1, dropout: float = 0.5,
                        requires_grad: bool = False, device: str | torch.device = "cpu", **kwargs: Any) -> "Elmo":
        """Load a model directory written by ``elmoc export``."""
        return cls(load_bilm(directory, device), num_output_representations, dropout, requires_grad,
                   **kwargs).to(resolve_device(device))

    def get_output_dim(self) -> int:
        return self.bilm.output_dim

    def train(self, mode: bool = True) -> "Elmo":
        super().train(mode)
        self.bilm.eval()  # the bi-LM never applies its training dropout here
        return self

    def reset_states(self) -> None:
        """Forget the carried states (``stateful=True``)."""
        self._states = None

    def forward(self, inputs: Sequence[Sequence[str]] | torch.Tensor) -> dict[str, Any]:
        sentences = self._sentences(inputs)
        states = self._carried(len(sentences)) if self.stateful else (None, None)
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            layers, mask, new_states = self.bilm.embed(sentences, states=states)
        if self.stateful:
            self._keep(new_states)
        layers = layers.transpose(0, 1)  # (layers, batch, time, dim)
        reps = [self.dropout(mix(layers, mask)) for mix in self.scalar_mixes]
        return {"elmo_representations": reps, "mask": mask}

    def _sentences(self, inputs: Sequence[Sequence[str]] | torch.Tensor) -> list[list[str]]:
        if isinstance(inputs, torch.Tensor):
            if inputs.dim() != 2 or inputs.dtype != torch.long:
                raise ConfigError(f"word ids must be a (batch, time) long tensor, got {inputs.dtype} "
                                  f"{tuple(inputs.shape)}")
            tokens = self.bilm.vocab.tokens
            if inputs.numel() and (int(inputs.max()) >= len(tokens) or int(inputs.min()) < 0):
                raise ConfigError(f"word ids must lie in [0, {len(tokens)}) (the model's vocab.txt)")
            sentences = [[tokens[i] for i in row if i != 0] for row in inputs.tolist()]
        else:
            sentences = [list(s) for s in inputs]
        empty = [i for i, s in enumerate(sentences) if not s]
        if not sentences or empty:
            raise ConfigError(f"sentence {empty[0] if empty else 0} of the batch is empty; pass at least one "
                              "token per sentence")
        return sentences

    def _carried(self, batch: int) -> tuple[Any, Any]:
        if self._states is None:
            return (None, None)
        return tuple(_resize(s, batch) for s in self._states)

    def _keep(self, new: tuple[Any, Any]) -> None:
        new = tuple(_detach(s) for s in new)
        if self._states is not None:
            new = tuple(_merge(n, o) for n, o in zip(new, self._states))
        self._states = new


def _detach(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return state.detach()
    return type(state)(_detach(s) for s in state)


def _resize(state: Any, batch: int) -> Any:
    """Rows ``[:batch]`` of a carried state, zeros for rows it never had."""
    if isinstance(state, torch.Tensor):
        if state.shape[0] >= batch:
            return state[:batch]
        return torch.cat([state, state.new_zeros(batch - state.shape[0], *state.shape[1:])])
    return type(state)(_resize(s, batch) for s in state)


def _merge(new: Any, old: Any) -> Any:
    """The new rows, and the old ones beyond the new batch (AllenNLP's stateful update)."""
    if isinstance(new, torch.Tensor):
        return torch.cat([new, old[new.shape[0]:]]) if old.shape[0] > new.shape[0] else new
    return type(new)(_merge(n, o) for n, o in zip(new, old))


def embed_sentences(model: str | Path | BiLM, sentences: Sequence[Sequence[str]], layers: str = "all",
                    batch_size: int = 64, device: str | torch.device = "cpu",
                    max_tokens: int | None = None) -> list[np.ndarray]:
    """Features of tokenized sentences, one float32 array per sentence, in input order.

    ``layers``: ``all`` -> (layers, words, dim); ``top`` / ``average`` -> (words, dim).
    ``model`` is a model directory or a loaded :class:`BiLM`.  Batched as ``elmoc embed``:
    sorted by length, at most ``batch_size`` sentences and ``max_tokens`` padded tokens
    per batch (:func:`~elmoc.features.embed.length_batches`).
    """
    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name before loading
    check_batching(batch_size, max_tokens)
    bilm = load_bilm(model, device) if not isinstance(model, BiLM) else model.to(resolve_device(device))
    bilm.eval()
    out: list[np.ndarray] = [np.empty(0)] * len(sentences)
    for i, value in sentence_features(bilm, sentences, layers, batch_size, max_tokens=max_tokens):
        out[i] = value
    return out
