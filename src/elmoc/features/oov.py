"""Vectors of words outside the LM vocabulary (issue 12.1), asked of the input class.

A FastText input reads the vector fastText composes from a word's n-grams (the
``.bin`` the input table was made from); a char-CNN table (ELMo-C-CNN) the vector of
the char-CNN that made it.  Which composer, where its source is and how it is checked
is the input class's knowledge (``oov_composer``, :mod:`elmoc.inputs.base`);
:func:`oov_vectors_for` hands it the sources the user named.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.inputs.base import Composer, input_class


def oov_vectors_for(spec: dict[str, Any], vocab: Vocabulary, fasttext_model: str | Path | None = None,
                    char_cnn_model: str | Path | None = None) -> Composer | None:
    """What composes out-of-vocabulary words for the spec's input, or None (``<unk>``).

    The source is ``fasttext_model`` (a ``.bin``), ``char_cnn_model`` (an ELMo
    ``model.pt``, for the char-CNN tables of the ELMo-C-CNN ablations), or the one the
    input class finds beside its table; a table with no such source (the random table)
    keeps the closed vocabulary, with a warning.  A source that did not make the table
    is an error (a few rows are compared).
    """
    cfg = spec.get("input") or {}
    return input_class(cfg).oov_composer(cfg, vocab, {"--fasttext-model": fasttext_model,
                                                      "--char-cnn-model": char_cnn_model})
