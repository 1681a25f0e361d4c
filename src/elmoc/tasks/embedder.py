"""Token representations fed to every task model: static vectors and/or mixed LM layers.

:class:`TaskInputs` holds what a run was given (a word-vector table over the task's
words, a :class:`~elmoc.features.store.FeatureStore`, or both) and turns token
lists into a padded :class:`TextBatch`.  :class:`TokenEmbedder` is the trainable
module: ``[word vectors ; dropout(ScalarMix(LM layers))]`` per token.  With only
vectors it is the FastText baseline; with only features it is ELMo-style
input; with both it is BCN/NER's "GloVe + ELMo" input (FastText standing in for
GloVe).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.features.scalar_mix import ScalarMix
from elmoc.features.store import FeatureStore

PAD_INDEX, UNK_INDEX = 0, 1


@dataclass
class TextBatch:
    """A padded batch of token lists.

    Attributes:
        tokens: the token lists, (batch,) of lists.
        mask: (batch, time) bool, True for real tokens.
        word_ids: (batch, time) long rows of the task word table (0 = padding), or None.
        features: (num_layers, batch, time, dim) LM layers, float32 or float16 as the feature file
            stores them (the embedder computes in float32), or None.
    """

    tokens: list[list[str]]
    mask: torch.Tensor
    word_ids: torch.Tensor | None
    features: torch.Tensor | None

    @property
    def lengths(self) -> torch.Tensor:
        """(batch,) long."""
        return self.mask.sum(dim=1)


def padded_ids(lengths: Sequence[int], flat: Sequence[int], width: int, fill: int = 0) -> torch.Tensor:
    """(len(lengths), width) long: row ``i`` holds the next ``lengths[i]`` values of ``flat``, then
    ``fill``; one scatter instead of a tensor per row (collate's bookkeeping off the step's path)."""
    out = np.full((len(lengths), width), fill, dtype=np.int64)
    out[np.arange(width)[None, :] < np.asarray(lengths, dtype=np.int64)[:, None]] = flat
    return torch.from_numpy(out)


class TaskInputs:
    """What one run feeds its task model.

    Args:
        word_vectors: float32 (num_words, dim) vectors of ``words`` or None.
        words: the words ``word_vectors`` rows belong to (distinct).
        store: contextual features or None.
        lowercase: look words up lowercased (GloVe 6B's habit; NER's ``lowercase`` option).
    At least one of ``word_vectors`` and ``store`` must be given.
    """

    def __init__(self, word_vectors: np.ndarray | None = None, words: Sequence[str] | None = None,
                 store: FeatureStore | None = None, lowercase: bool = False):
        self.lowercase = lowercase
        self.store = store
        if word_vectors is None and self.feature_dim == 0:
            raise ConfigError("a task run needs word vectors (--fasttext) or LM features (--features), or both")
        self.word_index: dict[str, int] | None = None
        self.word_table: torch.Tensor | None = None
        if word_vectors is not None:
            words = list(words or [])
            if len(words) != len(word_vectors):
                raise ValueError(f"{len(words)} words but {len(word_vectors)} vectors")
            dim = word_vectors.shape[1]
            table = np.zeros((len(words) + 2, dim), dtype=np.float32)  # rows 0 pad, 1 unk
            table[2:] = word_vectors
            self.word_table = torch.from_numpy(table)
            self.word_index = {w: i + 2 for i, w in enumerate(words)}

    @classmethod
    def create(cls, sentences: Iterable[Sequence[str]], vectors: str | Path | None = None,
               vocab: str | Path | None = None, features: str | Path | None = None,
               lowercase: bool = False) -> "TaskInputs":
        """Build from file paths; ``sentences`` are all the task's token lists (for the word table
        and, with features, for checking the HDF5 covers every one of them)."""
        sentences = [list(s) for s in sentences]
        store = FeatureStore(features) if features else None
        if store is not None:
            store.check(sentences)
        table, words = cls.word_table_of(sentences, vectors, vocab, lowercase)
        return cls(table, words, store, lowercase)

    @staticmethod
    def word_table_of(sentences: Iterable[Sequence[str]], vectors: str | Path | None, vocab: str | Path | None,
                      lowercase: bool) -> tuple[np.ndarray | None, list[str] | None]:
        """(vectors (num_words, dim), words) of the distinct words of ``sentences`` from the
        ``vectors`` file, or (None, None) without one."""
        from elmoc.tasks.word_vectors import load_word_vectors

        if not vectors:
            return None, None
        seen: dict[str, None] = {}
        for s in sentences:
            for t in s:
                seen.setdefault(t.lower() if lowercase else t, None)
        words = list(seen)
        return load_word_vectors(words, vectors, vocab), words

    @property
    def word_dim(self) -> int:
        return 0 if self.word_table is None else int(self.word_table.shape[1])

    @property
    def feature_dim(self) -> int:
        return 0 if self.store is None else int(self.store.dim)

    def encode(self, sentences: Sequence[Sequence[str]]) -> TextBatch:
        """Pad ``sentences`` into a :class:`TextBatch` (empty sentences are not allowed)."""
        if any(len(s) == 0 for s in sentences):
            raise ValueError("empty sentence in a batch")
        lengths = [len(s) for s in sentences]
        batch, time = len(sentences), max(lengths)
        mask = torch.arange(time)[None, :] < torch.tensor(lengths)[:, None]
        word_ids = None
        if self.word_index is not None:
            get = self.word_index.get
            word_ids = padded_ids(lengths, [get(t.lower() if self.lowercase else t, UNK_INDEX) for s in sentences for t in s],
                                  time)
        features = None
        if self.store is not None:  # in the file's dtype: float16 features cross to the device at half the bytes
            features = torch.from_numpy(self.store.batch(sentences, time))
        return TextBatch([list(s) for s in sentences], mask, word_ids, features)

    def embedder(self, layer_norm: bool = False, feature_dropout: float = 0.0,
                 trainable_words: bool = False) -> "TokenEmbedder":
        return TokenEmbedder(self.word_table, self.store.num_layers if self.store else 0, self.feature_dim,
                             layer_norm=layer_norm, feature_dropout=feature_dropout, trainable_words=trainable_words)


class TokenEmbedder(nn.Module):
    """``[word vectors ; dropout(scalar mix of LM layers)]`` per token.

    Args:
        word_table: (num_words + 2, word_dim) float or None (rows 0/1 = pad/unk).
        num_layers, feature_dim: of the LM features (0 = no features).
        layer_norm: scalar mix option (spec 5.4).
        feature_dropout: dropout on the mixed features (AllenNLP Elmo's dropout).
        trainable_words: fine-tune the word table (NER's GloVe) instead of freezing it.

    Shape:
        forward(text: TextBatch) -> (batch, time, output_dim), zero at padding.
    """

    def __init__(self, word_table: torch.Tensor | None, num_layers: int, feature_dim: int,
                 layer_norm: bool = False, feature_dropout: float = 0.0, trainable_words: bool = False):
        super().__init__()
        if not 0.0 <= feature_dropout < 1.0:
            raise ConfigError(f"feature_dropout must be in [0, 1), got {feature_dropout}")
        self.words = None
        if word_table is not None:
            self.words = nn.Embedding.from_pretrained(word_table.clone(), freeze=not trainable_words, padding_idx=PAD_INDEX)
        self.mix = ScalarMix(num_layers, layer_norm=layer_norm) if num_layers > 0 else None
        self.feature_dropout = nn.Dropout(feature_dropout)
        self.output_dim = (0 if word_table is None else int(word_table.shape[1])) + (feature_dim if num_layers else 0)
        if self.output_dim == 0:
            raise ConfigError("token embedder has neither word vectors nor features")

    def forward(self, text: TextBatch) -> torch.Tensor:
        parts = []
        if self.words is not None:
            if text.word_ids is None:
                raise ValueError("embedder has a word table but the batch has no word ids")
            parts.append(self.words(text.word_ids))
        if self.mix is not None:
            if text.features is None:
                raise ValueError("embedder mixes LM features but the batch has none")
            # float16 features are widened here, on the batch's device; float32 ones pass unchanged
            parts.append(self.feature_dropout(self.mix(text.features.float(), text.mask)))
        out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return out * text.mask.unsqueeze(-1).to(out.dtype)
