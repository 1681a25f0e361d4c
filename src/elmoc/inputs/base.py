"""Contract of input layers: token ids -> token vectors, and what they tell the export/embed flow.

Shape:
    ids: (batch, time) long vocabulary ids.
    returns: (batch, time, output_dim) float.

``output_dim`` is an attribute so encoders can be sized at build time.
Frozen tables are buffers, not parameters, so they never reach the optimizer.

Every registered input class subclasses :class:`InputLayer`.  Features, ``elmoc export``
and ``elmoc embed`` never ask which input type they hold: they call these hooks (the
defaults fit a layer whose weights are all in its state dict and which knows words by id):

* ``state_config(cfg)``: the config section that builds the layer when its weights come
  from a state dict (a ``model.pt``, a model directory);
* ``export(cfg, directory)``: write the files a model directory needs besides the weights;
  returns the section recorded in ``elmoc-model.json``;
* ``from_directory(cfg, directory)``: that recorded section made buildable again;
* ``oov_composer(cfg, vocab, sources)`` / ``load_composer(name, directory)``: what composes
  the vector of a word outside the vocabulary (found from the config, or read back from a
  model directory), or None: such words read ``<unk>``;
* ``open_vocabulary`` and ``word_vectors(rows, width, device)``: a layer that reads any word
  itself (a char-CNN); ``oov_note``: how the model card describes unseen words.

A composer (:mod:`elmoc.inputs.fasttext_subwords`, :mod:`elmoc.inputs.char_cnn_vectors`) is
any class with what :class:`Composer` lists.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Container, Protocol, Sequence, Sized

import numpy as np
import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.registry import by_name


class Composer(Protocol):
    """What composes the input vector of any word for a frozen table (the model that made it)."""

    NAME: str  # recorded as ``oov_vectors`` in elmoc-model.json
    OPTION: str  # the command-line flag that names its source (``--fasttext-model``)
    SOURCE: str  # what that source is, in messages ("fastText model")
    NOTE: str  # the model card's sentence on words outside the vocabulary
    dim: int
    source: str  # where its vectors come from, in messages

    def vectors(self, words: Sequence[str]) -> np.ndarray:
        """Shape: returns float32 (len(words), dim)."""

    def save(self, directory: Path, vocab: Container[str]) -> None:
        """Write what :meth:`load` reads into a model directory being written."""

    @classmethod
    def load(cls, directory: Path) -> "Composer": ...

    @classmethod
    def from_source(cls, path: str | Path) -> "Composer": ...

    @classmethod
    def source_beside(cls, table: str | Path) -> Path | None:
        """The file a workflow made ``table`` from, if it exists (the table's provenance)."""


class InputLayer(nn.Module):
    output_dim: int
    open_vocabulary = False  # True: word_vectors() gives any word its own vector
    oov_note = "mapped to <unk>"  # the model card's words on words outside the vocabulary

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def word_vectors(self, rows: Sequence[Sequence[str]], width: int, device: torch.device) -> torch.Tensor:
        """Input vectors of words given as strings (layers with :attr:`open_vocabulary`).

        Shape: rows: batch lists of tokens; returns (batch, width, output_dim), zero at padding.
        """
        raise NotImplementedError(f"{type(self).__name__} knows words by id only")

    @classmethod
    def state_config(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        """The config that builds this layer when its weights come from a state dict."""
        return dict(cfg)

    @classmethod
    def export(cls, cfg: dict[str, Any], directory: Path) -> dict[str, Any]:
        """Write into ``directory`` (a model directory being written) what the layer needs
        besides its weights; return the config to record, its paths relative to ``directory``."""
        return cls.state_config(cfg)

    @classmethod
    def from_directory(cls, cfg: dict[str, Any], directory: Path) -> dict[str, Any]:
        """The config recorded by :meth:`export`, made buildable from ``directory``."""
        return dict(cfg)

    @classmethod
    def oov_composer(cls, cfg: dict[str, Any], vocab: Sized,
                     sources: dict[str, str | Path | None]) -> Composer | None:
        """What composes vectors of words outside ``vocab`` for this config, or None.

        ``sources``: command-line flag -> the file a user named as the source (None: not given).
        """
        named = [option for option, path in sources.items() if path is not None]
        if named:
            raise ConfigError(f"{' / '.join(named)}: only a frozen-table input composes the vectors of unseen "
                              f"words from a source; this LM's input is {cfg.get('type')!r}: drop the option")
        return None

    @classmethod
    def load_composer(cls, name: str, directory: Path) -> Composer | None:
        """The composer ``name`` saved in ``directory`` by :meth:`oov_composer`'s result, or
        None when this input has no composer of that name."""
        return None


def input_class(cfg: dict[str, Any]) -> type[InputLayer]:
    """The registered class of an input config section."""
    cls = by_name("input", cfg.get("type"))
    if not issubclass(cls, InputLayer):
        raise ConfigError(f"input {cfg.get('type')!r}: {cls.__qualname__} must subclass "
                          "elmoc.inputs.base.InputLayer (the hooks of features, export and embed)")
    return cls
