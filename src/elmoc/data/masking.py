"""BERT's masking of a masked LM's windows (issue 25): which positions are predicted and
what the model reads there.

Of the positions holding a word (not ``<pad>``, ``<s>``, ``</s>``; ``<unk>`` is a word,
as the next-word LMs predict it too) each is *chosen* with probability ``rate`` (0.15);
a chosen position is replaced by the mask (probability ``mask``, 0.8), by a random word
(``random``, 0.1: uniform over the vocabulary without its specials) or kept (the rest).
The loss is taken at the chosen positions only, against the original words.  The
replacement by the mask is *input-layer agnostic*: the batch only says where
(:attr:`MaskedLMBatch.replaced`), and :class:`elmoc.masked_lm.MaskedLM` puts its
trainable mask vector there in place of the input layer's vector; a random word is
simply another id, read by the input layer like any word.

Determinism: the draws of a window come from ``numpy.random.default_rng([seed, *key,
MASKING_STREAM])`` for the *global* window (every row of the global batch), and a
process keeps its own rows.  ``key`` is the window's place in the data (pass, shard
position, window for training; the window index for heldout), so the masking is a
function of (seed, window, global row, column): a resumed run draws the same masks, and
2 data-parallel processes mask their rows exactly as 1 process masks the whole batch.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Sequence

import numpy as np
import torch

from elmoc.data.vocab.vocabulary import BOS_ID, EOS_ID, PAD_ID, SPECIALS
from elmoc.config_section import check_keys
from elmoc.errors import ConfigError
from elmoc.nn.host_copy import copy_to_device, to_host

MASKING_STREAM = 25  # last entry of the masking generator's seed: apart from the shuffles' generators
HELDOUT_MASKING_SEED = 0  # heldout windows are masked the same way whatever train.seed is
NOT_PREDICTED = (PAD_ID, BOS_ID, EOS_ID)  # never chosen


@dataclass
class MaskedLMBatch:
    """One masked-LM window.

    Shape (all (batch, time)):
        inputs: long ids the input layer reads (random words already substituted);
        targets: long original ids;
        mask: bool, the chosen positions: where the loss is taken (the output layer's mask);
        replaced: bool, the chosen positions whose input vector becomes the mask vector
            (a subset of ``mask``);
        padding: bool, True where a token exists (the encoder's mask; all True for
            training windows, which are cut from a stream without padding).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    replaced: torch.Tensor
    padding: torch.Tensor

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "MaskedLMBatch":
        """The batch on ``device``, each tensor keeping its CPU original (:mod:`elmoc.nn.host_copy`)."""
        return MaskedLMBatch(*(copy_to_device(t, device, non_blocking) for t in (
            self.inputs, self.targets, self.mask, self.replaced, self.padding)))

    def rows(self, index: slice) -> "MaskedLMBatch":
        """The rows ``index`` of every tensor (a process's share of a heldout window)."""
        return MaskedLMBatch(*(t[index] for t in (self.inputs, self.targets, self.mask, self.replaced,
                                                    self.padding)))

    @property
    def num_tokens(self) -> int:
        """Tokens the model *reads* (every position, not only the predicted ones), so tok/s
        compares with the next-word LMs; counted on the CPU original when there is one."""
        return int(to_host(self.padding).sum())

    @property
    def num_predicted(self) -> int:
        return int(to_host(self.mask).sum())


@dataclass(frozen=True)
class Masking:
    """``train.masking`` of a masked-LM spec (BERT's values by default).

    Args:
        rate: fraction of word positions chosen for prediction.
        mask: of the chosen, the fraction whose input becomes the mask vector.
        random: of the chosen, the fraction that reads a random word instead; the rest
            (``1 - mask - random``) read their own word.
    """

    rate: float = 0.15
    mask: float = 0.8
    random: float = 0.1

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> "Masking":
        config = {} if config is None else config
        if not isinstance(config, dict):
            raise ConfigError(f"train.masking must be a mapping like {{rate: 0.15, mask: 0.8, random: 0.1}}, "
                              f"got {config!r}")
        names = {f.name for f in fields(cls)}
        check_keys(config, names, "train.masking")
        for key, value in config.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"train.masking.{key} must be a number in [0, 1], got {value!r}")
        masking = cls(**{k: float(v) for k, v in config.items()})
        if masking.rate == 0.0:
            raise ConfigError("train.masking.rate must be > 0: with no chosen position there is no loss")
        if masking.mask + masking.random > 1.0 + 1e-9:
            raise ConfigError(f"train.masking: mask + random must be <= 1 (the rest keep their word), got "
                              f"{masking.mask} + {masking.random}")
        return masking

    def apply(self, ids: np.ndarray, seed: int, key: Sequence[int], vocab_size: int,
              rows: slice = slice(None)) -> MaskedLMBatch:
        """Mask the rows ``rows`` of a global window.

        Args:
            ids: (global_batch, time) int64 original ids of the *whole* window.
            seed, key: the generator's seed is ``[seed, *key, MASKING_STREAM]``.
            vocab_size: random words are drawn from ids ``[len(SPECIALS), vocab_size)``.
            rows: the rows this process keeps.

        Returns the :class:`MaskedLMBatch` of those rows.
        """
        if vocab_size <= len(SPECIALS) and self.random > 0:
            raise ConfigError(f"masking draws random words, but the vocabulary has only its {len(SPECIALS)} specials")
        rng = np.random.default_rng([int(seed), *(int(k) for k in key), MASKING_STREAM])
        shape = ids.shape
        choose = rng.random(shape)  # every draw over the global window, so the rows' draws do not depend on `rows`
        how = rng.random(shape)
        words = rng.integers(len(SPECIALS), max(vocab_size, len(SPECIALS) + 1), size=shape)
        ids, choose, how, words = ids[rows], choose[rows], how[rows], words[rows]
        predicted = ~np.isin(ids, NOT_PREDICTED) & (choose < self.rate)
        replaced = predicted & (how < self.mask)
        randomized = predicted & (how >= self.mask) & (how < self.mask + self.random)
        inputs = np.where(randomized, words, ids)
        as_tensor = torch.from_numpy
        return MaskedLMBatch(as_tensor(np.ascontiguousarray(inputs)), as_tensor(np.ascontiguousarray(ids)),
                             as_tensor(predicted), as_tensor(replaced), as_tensor(np.ascontiguousarray(ids != PAD_ID)))
