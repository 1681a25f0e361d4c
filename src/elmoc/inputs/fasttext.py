"""Frozen pretrained word-vector input (ELMo-C's input layer, spec 1.1).

Any ``.npy`` table aligned with the vocabulary works: FastText-CC, FastText trained
on our corpus (ELMo-C-ONEB), a random N(0,1) table, or the trained char-CNN run over
the vocabulary (ELMo-C-CNN*).  The table is never trained.

Export copies the table into the model directory (``input_vectors.npy``).  A word outside
the vocabulary reads the vector of whatever made the table (``composers``: fastText's
n-grams, the char-CNN of ``cnn.npy``), found from a source the user names or the one
beside the table; a new frozen-table input is a subclass registered under its own name
with its own ``composers``.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence, Sized

import numpy as np
import torch

from elmoc.errors import ConfigError, InputFileError
from elmoc.inputs.base import Composer, InputLayer
from elmoc.inputs.char_cnn_vectors import CharCnnVectors
from elmoc.inputs.fasttext_subwords import SubwordVectors
from elmoc.inputs.vector_table import load_table, lookup, store_table, stored_table
from elmoc.io.atomic import atomic_file
from elmoc.registry import register

log = logging.getLogger(__name__)
EXPORTED_TABLE = "input_vectors.npy"


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
    # what may have made the table, tried in this order (``oov_composer``)
    composers: tuple[type[Composer], ...] = (SubwordVectors, CharCnnVectors)

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

    @classmethod
    def export(cls, cfg: dict[str, Any], directory: Path) -> dict[str, Any]:
        """Copy the table (float32) into ``directory``."""
        table = np.load(cfg["vectors"], mmap_mode="r")
        with atomic_file(directory / EXPORTED_TABLE, "wb", encoding=None) as f:
            np.save(f, np.asarray(table, dtype=np.float32))
        return {**cfg, "vectors": EXPORTED_TABLE}

    @classmethod
    def from_directory(cls, cfg: dict[str, Any], directory: Path) -> dict[str, Any]:
        return {**cfg, "vectors": str(directory / cfg["vectors"])}

    @classmethod
    def oov_composer(cls, cfg: dict[str, Any], vocab, sources: dict[str, str | Path | None]) -> Composer | None:
        """The composer of the model that made the table: the source named in ``sources``
        (one at most), else the first of :attr:`composers` whose source lies beside the
        table; None, with a warning, when there is none (the random table).  A source that
        did not make the table is an error (a few rows are compared)."""
        table_path = Path(cfg["vectors"])
        named = {option: path for option, path in sources.items() if path is not None}
        if len(named) > 1:
            raise ConfigError(f"give {' or '.join(named)}, not both")
        if named:
            (option, path), = named.items()
            composer_class = next((c for c in cls.composers if c.OPTION == option), None)
            if composer_class is None:
                raise ConfigError(f"{option} does not apply to input {cfg.get('type')!r}; its table is composed by "
                                  f"{' or '.join(c.OPTION for c in cls.composers) or 'nothing'}")
        else:
            found = ((c, c.source_beside(table_path)) for c in cls.composers)
            composer_class, path = next(((c, p) for c, p in found if p is not None), (None, None))
            if composer_class is None:
                log.warning("no %s found for %s: words outside the LM vocabulary read <unk> (pass %s to compose "
                            "their vectors)", " or ".join(c.SOURCE for c in cls.composers) or "composer source",
                            table_path, " or ".join(c.OPTION for c in cls.composers))
                return None
        composer = composer_class.from_source(path)
        table = np.load(table_path, mmap_mode="r")
        if table.shape[1] != composer.dim:
            raise InputFileError(composer.source, f"gives {composer.dim}-d vectors but the input table {table_path} "
                                 f"has {table.shape[1]} columns; pass the model the table was made from")
        check_table_matches(table, vocab.tokens, composer, table_path)
        log.info("words outside the vocabulary: vectors composed by %s", composer.source)
        return composer

    @classmethod
    def load_composer(cls, name: str, directory: Path) -> Composer | None:
        composer_class = next((c for c in cls.composers if c.NAME == name), None)
        return None if composer_class is None else composer_class.load(directory)


def check_table_matches(table: np.ndarray, tokens: Sequence[str], composer: Composer, table_path: str | Path,
                        sample: int = 16) -> None:
    """Refuse a composer whose source did not make ``table``: compare a few rows.

    Rows that are all zero (replaced by ``<unk>`` in :func:`elmoc.data.vectors.tables.table_from_model`)
    and the four specials are skipped.
    """
    picked = [i for i in range(4, len(tokens))][:: max(1, (len(tokens) - 4) // sample)][:sample]
    if not picked:
        return
    want = composer.vectors([tokens[i] for i in picked])
    keep = want.any(axis=1)
    got = np.asarray(table[picked], dtype=np.float32)[keep]
    if got.size and not np.allclose(got, want[keep], atol=1e-5, rtol=1e-4):
        raise InputFileError(table_path, f"rows do not match the {composer.SOURCE} {composer.source}; the table was "
                             f"made from another model: pass the right one with {composer.OPTION}")
