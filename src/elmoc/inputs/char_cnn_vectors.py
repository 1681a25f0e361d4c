"""Char-CNN vectors of words outside the LM vocabulary (ELMo-C-CNN inputs at extraction).

The ELMo-C-CNN ablations read a frozen table ``results/vectors/cnn.npy``: the trained
ELMo char-CNN run over the vocabulary (``elmoc cnn-table``).  That encoder is open
vocabulary, so a task word outside the vocabulary reads the char-CNN's vector of its
own characters, exactly as the table's rows were made.  :class:`CharCnnVectors` has
the composer interface of :mod:`elmoc.inputs.base`, as
:class:`elmoc.inputs.fasttext_subwords.SubwordVectors` has.

Provenance: the workflow makes ``results/vectors/cnn.npy`` from the char-CNN of the LM
``results/lm/elmo`` (rule ``cnn_table``; a joint ELMo's one file, else its forward
direction's); :meth:`CharCnnVectors.source_beside` finds that file beside the table, and
``--char-cnn-model`` names another.

Files written by :meth:`save`: ``char_cnn.json`` (format, bilm-tf options) and
``char_cnn.safetensors`` (the layer's state dict; directories written before have ``char_cnn.pt``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Container, Sequence

import numpy as np
import torch

from elmoc.errors import InputFileError
from elmoc.io.atomic import atomic_file

FORMAT = "elmoc-char-cnn-vectors-v1"
FILES = ("char_cnn.json", "char_cnn.safetensors")  # or char_cnn.pt, written before


class CharCnnVectors:
    """Vectors of arbitrary words from a char-CNN input layer (frozen, eval mode)."""

    NAME = "char_cnn"
    OPTION = "--char-cnn-model"
    SOURCE = "ELMo char-CNN model"
    NOTE = "the char-CNN vector of their characters (char_cnn.safetensors, the CNN that made the input table)"
    TABLE_STEM = "cnn"  # the table: results/vectors/cnn.npy
    SOURCE_VARIANT = "elmo"  # its source: results/lm/elmo/{joint,forward}/model.pt (the workflow's cnn_source)

    def __init__(self, layer, source: str):
        self.layer = layer.eval()
        self.dim = int(layer.output_dim)
        self.source = source

    @classmethod
    def from_lm(cls, payload: dict, path: str | Path) -> "CharCnnVectors":
        """The char-CNN input layer of an LM ``model.pt`` whose input is ``char_cnn``
        (a forward direction's file, or a joint bi-LM's: its one shared char-CNN), given
        as read (:func:`elmoc.model_file.load_checkpoint`; ``path`` names it in errors)."""
        from elmoc.registry import build

        # input_layer.* is the same in a joint bi-LM's file
        cfg = dict((payload.get("spec") or {}).get("input") or {})
        if cfg.get("type") != "char_cnn":
            raise InputFileError(path, f"input layer is {cfg.get('type')!r}, not 'char_cnn'; pass the ELMo "
                                 "checkpoint the char-CNN table was made from")
        cfg.pop("weights", None)
        layer = build("input", cfg)
        prefix = "input_layer."
        layer.load_state_dict({k[len(prefix):]: v for k, v in payload["model"].items() if k.startswith(prefix)})
        return cls(layer, str(path))

    @classmethod
    def from_source(cls, path: str | Path) -> "CharCnnVectors":
        """The char-CNN of an LM ``model.pt`` file (read weights-only)."""
        from elmoc.io.safe_load import load_weights_only

        fix = "pass the ELMo model.pt the char-CNN table was made from"
        payload = load_weights_only(path, what="an elmoc model.pt", fix=fix)
        if not isinstance(payload, dict) or not isinstance(payload.get("model"), dict):
            raise InputFileError(path, f"not an elmoc model.pt; {fix}")
        return cls.from_lm(payload, path)

    @classmethod
    def source_beside(cls, table: str | Path) -> Path | None:
        """The ELMo ``model.pt`` that made a workflow's ``results/vectors/cnn.npy``, if it exists."""
        table = Path(table)
        if table.stem != cls.TABLE_STEM:
            return None
        folder = table.parent.parent / "lm" / cls.SOURCE_VARIANT
        # a joint bi-LM's one file (one char-CNN shared by both directions), else the forward direction's
        found = (folder / run / "model.pt" for run in ("joint", "forward"))
        return next((path for path in found if path.is_file()), None)

    @torch.no_grad()
    def vectors(self, words: Sequence[str]) -> np.ndarray:
        """Shape: returns float32 (len(words), dim)."""
        from elmoc.inputs.characters import batch_char_ids

        if not words:
            return np.zeros((0, self.dim), np.float32)
        chars = batch_char_ids([list(words)], self.layer.max_chars)
        return self.layer.encode_chars(chars)[0].float().numpy()

    def save(self, directory: str | Path, lm_vocabulary: Container[str] | None = None) -> None:
        directory = Path(directory)
        with atomic_file(directory / "char_cnn.json") as f:
            json.dump({"format": FORMAT, "options": self.layer.options, "source": Path(self.source).name}, f)
            f.write("\n")
        from elmoc.io.tensor_files import save_tensors

        save_tensors({k: v.detach().cpu() for k, v in self.layer.state_dict().items()}, directory / FILES[1])

    @classmethod
    def load(cls, directory: str | Path) -> "CharCnnVectors":
        from elmoc.registry import build

        from elmoc.io.tensor_files import read_state, stored_file

        directory = Path(directory)
        weights = stored_file(directory, "char_cnn")
        for name in (FILES[0], weights.name):
            if not (directory / name).is_file():
                raise InputFileError(directory / name, "missing from the model directory; export it again")
        meta = json.loads((directory / "char_cnn.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise InputFileError(directory / "char_cnn.json", f"not format {FORMAT!r}; export the model again")
        layer = build("input", {"type": "char_cnn", "options": meta["options"], "trainable": False})
        # safetensors (or, written before, a .pt read weights-only): a crafted file runs no code
        layer.load_state_dict(read_state(weights, what="a char-CNN weights file", fix="export the model again"))
        return cls(layer, str(directory))
