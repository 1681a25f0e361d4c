"""ELMo character ids of a token (bilm-tf's scheme, shifted by +1 as in AllenNLP).

A token becomes ``max_chars`` ids: beginning-of-word, its UTF-8 bytes (truncated to
``max_chars - 2``), end-of-word, then padding.  bilm-tf reserves 256/257 for the
sentence-boundary "characters" and 258/259/260 for begin/end of word and padding;
every id is stored +1 so that 0 means "no token" (an all-zero row, spec P23).  The
char embedding therefore has 262 rows at inference (261 trained + the zero row).

Our vocabulary's ``<s>`` / ``</s>`` map to bilm-tf's sentence-boundary tokens
(``<S>`` / ``</S>``) and ``<pad>`` to the all-zero row; every other string,
including ``<unk>``, is spelled out.
"""
from __future__ import annotations

from typing import Sequence

import torch

from elmoc.data.vocab.vocabulary import BOS, EOS, PAD

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
TRAINED_CHARS = 261  # bilm-tf's n_characters in training: its character embedding rows
NUM_CHAR_IDS = TRAINED_CHARS + 1  # + the all-zero "no token" row 0 (the released options' 262)


def _boundary(char: int, max_chars: int) -> list[int]:
    ids = [PAD_CHAR] * max_chars
    ids[0], ids[1], ids[2] = BOW_CHAR, char, EOW_CHAR
    return [i + 1 for i in ids]


def token_char_ids(token: str, max_chars: int = 50) -> list[int]:
    """``max_chars`` ids of one token (all shifted +1; ``<pad>`` gives all zeros)."""
    if max_chars < 3:
        raise ValueError(f"max_chars must be >= 3, got {max_chars}")
    if token == PAD:
        return [0] * max_chars
    if token in (BOS, "<S>"):
        return _boundary(BOS_CHAR, max_chars)
    if token in (EOS, "</S>"):
        return _boundary(EOS_CHAR, max_chars)
    return _spelled(token, max_chars)


def _utf8(token: str) -> bytes:
    """A token's UTF-8 bytes; lone surrogates dropped, except the ``surrogateescape`` ones that
    :func:`decode_char_ids` makes of bytes that are not UTF-8 (a word cut inside a character
    comes back as the same bytes)."""
    try:
        return token.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return token.encode("utf-8", "ignore")


def _spelled(token: str, max_chars: int) -> list[int]:
    data = _utf8(token)[: max_chars - 2]
    ids = [BOW_CHAR, *data, EOW_CHAR] + [PAD_CHAR] * (max_chars - 2 - len(data))
    return [i + 1 for i in ids]


def allennlp_char_ids(token: str, max_chars: int = 50) -> list[int]:
    """AllenNLP's ``ELMoCharacterMapper``: only ``<S>`` / ``</S>`` are sentence boundaries;
    every other string, ``<s>`` and ``<pad>`` included, is spelled out."""
    if token == "<S>":
        return _boundary(BOS_CHAR, max_chars)
    if token == "</S>":
        return _boundary(EOS_CHAR, max_chars)
    return _spelled(token, max_chars)


def decode_char_ids(row: Sequence[int]) -> str | None:
    """The token of one row of char ids (as :func:`allennlp_char_ids` writes them), None for
    an all-zero padding row; ``ValueError`` for a row no token gives."""
    if not any(row):
        return None
    ids = [i - 1 for i in row]
    if ids[0] != BOW_CHAR or EOW_CHAR not in ids:
        raise ValueError("it does not start with the begin-of-word id or has no end-of-word id")
    end = ids.index(EOW_CHAR)
    body = ids[1:end]
    if any(i != PAD_CHAR for i in ids[end + 1:]):
        raise ValueError("ids follow its end-of-word id")
    if body in ([BOS_CHAR], [EOS_CHAR]):
        return "<S>" if body == [BOS_CHAR] else "</S>"
    if any(not 0 <= i < 256 for i in body):
        raise ValueError("a character id is not a byte")
    return bytes(body).decode("utf-8", "surrogateescape")


def batch_char_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50) -> torch.Tensor:
    """Char ids of a padded batch.  Returns (batch, max_len, max_chars) long, zero rows as padding."""
    max_len = max((len(s) for s in sentences), default=0)
    out = torch.zeros(len(sentences), max_len, max_chars, dtype=torch.long)
    for b, sentence in enumerate(sentences):
        for t, token in enumerate(sentence):
            out[b, t] = torch.tensor(token_char_ids(token, max_chars))
    return out
