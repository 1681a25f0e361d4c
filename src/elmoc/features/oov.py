"""Vectors of words outside the LM vocabulary for a frozen-table input (issue 12.1).

A FastText input reads the vector fastText composes from a word's n-grams (the
``.bin`` the input table was made from); a char-CNN table (ELMo-C-CNN) the vector of
the char-CNN that made it.  :func:`oov_vectors_for` finds and checks that source.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import ConfigError, InputFileError

if TYPE_CHECKING:
    from elmoc.inputs.char_cnn_vectors import CharCnnVectors
    from elmoc.inputs.fasttext_subwords import SubwordVectors

log = logging.getLogger(__name__)


def oov_vectors_for(spec: dict[str, Any], vocab: Vocabulary, fasttext_model: str | Path | None = None,
                    char_cnn_model: str | Path | None = None) -> "SubwordVectors | CharCnnVectors | None":
    """What composes out-of-vocabulary words for a frozen-table (``fasttext``) input, or None.

    The source is ``fasttext_model`` (a ``.bin``), ``char_cnn_model`` (an ELMo
    ``model.pt``, for the char-CNN tables of the ELMo-C-CNN ablations), or found beside
    the table: ``results/fasttext/{name}.bin`` for ``results/vectors/{name}.npy``,
    a joint ELMo's ``results/lm/elmo/joint/model.pt`` (else ``results/lm/elmo/forward/model.pt``)
    for ``results/vectors/cnn.npy``.  A table with
    no such source (the random table) keeps the closed vocabulary, with a warning.
    A source that did not make the table is an error (a few rows are compared).
    """
    from elmoc.inputs.char_cnn_vectors import CharCnnVectors
    from elmoc.inputs.fasttext_subwords import SubwordVectors, check_table_matches, fasttext_model_for_table
    from elmoc.model_file import load_checkpoint

    cfg = spec.get("input") or {}
    if cfg.get("type") != "fasttext":
        if fasttext_model is not None or char_cnn_model is not None:
            raise ConfigError("--fasttext-model / --char-cnn-model apply to frozen-table inputs; this LM's input "
                              f"is {cfg.get('type')!r}")
        return None
    table_path = Path(cfg["vectors"])
    if fasttext_model is not None and char_cnn_model is not None:
        raise ConfigError("give --fasttext-model or --char-cnn-model, not both")
    if char_cnn_model is None and fasttext_model is None:
        fasttext_model = fasttext_model_for_table(table_path)
        elmo = table_path.parent.parent / "lm" / "elmo"
        # ELMo's joint bi-LM (one char-CNN shared by both directions), else its forward direction
        default_cnn = next((elmo / d / "model.pt" for d in ("joint", "forward") if (elmo / d / "model.pt").is_file()),
                           None)
        if fasttext_model is None and table_path.stem == "cnn" and default_cnn is not None:
            char_cnn_model = default_cnn
    if fasttext_model is not None:
        composer = SubwordVectors.from_bin(fasttext_model)
    elif char_cnn_model is not None:
        composer = CharCnnVectors.from_lm(load_checkpoint(char_cnn_model), char_cnn_model)
    else:
        log.warning("no fastText model or char-CNN found for %s: words outside the LM vocabulary read <unk> "
                    "(pass --fasttext-model or --char-cnn-model to compose their vectors)", table_path)
        return None
    table = np.load(table_path, mmap_mode="r")
    if table.shape[1] != composer.dim:
        raise InputFileError(composer.source, f"gives {composer.dim}-d vectors but the input table {table_path} has "
                             f"{table.shape[1]} columns; pass the model the table was made from")
    check_table_matches(table, vocab.tokens, composer, table_path)
    log.info("words outside the vocabulary: vectors composed by %s", composer.source)
    return composer
