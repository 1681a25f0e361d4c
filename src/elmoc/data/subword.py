"""BPE subwords for ELMo-Sub (spec 3.3): learn the merges, encode lines, find first subwords.

Uses Hugging Face ``tokenizers`` (a BPE model over whitespace-split corpus tokens,
so subword boundaries never cross our tokenization).  Pieces after the first one
of a word carry the ``##`` continuing-subword prefix, so the first subword of each
word is simply the piece without it (word features downstream use it, following
the paper and Devlin et al.).  The four elmoc specials are the first four ids
(``<pad>``=0, ``<s>``=1, ``</s>``=2, ``<unk>``=3), so the subword vocabulary file
is an ordinary :class:`elmoc.data.vocab.Vocabulary`; ``<unk>`` covers characters
never seen in training, so every id is in range (the paper's code had an
out-of-range unknown id, P15).

The paper learned ~30K merges with subword-nmt; here ``num_merges`` sets the
trainer's vocabulary size to ``specials + alphabet + num_merges``.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from elmoc.data.vocab import SPECIALS, UNK, Vocabulary
from elmoc.errors import ConfigError, InputFileError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

CONTINUATION = "##"


def _tokenizers():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    return Tokenizer, decoders, models, pre_tokenizers, trainers


def _iter_lines(files: Sequence[Path]) -> Iterable[str]:
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield line


def _alphabet(files: Sequence[Path]) -> set[str]:
    chars: set[str] = set()
    for line in _iter_lines(files):
        chars.update("".join(line.split()))
    return chars


def train_bpe(files: Sequence[str | Path], num_merges: int = 30000, min_frequency: int = 2):
    """Learn BPE merges on whitespace-tokenized ``files``; returns a ``tokenizers.Tokenizer``."""
    Tokenizer, decoders, models, pre_tokenizers, trainers = _tokenizers()
    paths = [Path(f) for f in files]
    for p in paths:
        if not p.is_file():
            raise InputFileError(p, "corpus file not found")
    if not isinstance(num_merges, int) or num_merges < 0:
        raise ConfigError(f"num_merges must be a non-negative integer, got {num_merges!r}")
    alphabet = _alphabet(paths)
    if not alphabet:
        raise InputFileError(paths[0] if paths else "<none>", "corpus is empty; nothing to learn BPE from")
    tokenizer = Tokenizer(models.BPE(unk_token=UNK, continuing_subword_prefix=CONTINUATION))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION)
    # every character may appear both word-initially and as a continuation
    vocab_size = len(SPECIALS) + 2 * len(alphabet) + num_merges
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIALS),
        continuing_subword_prefix=CONTINUATION,
        show_progress=False,
    )
    tokenizer.train_from_iterator(_iter_lines(paths), trainer=trainer)
    for i, special in enumerate(SPECIALS):
        if tokenizer.token_to_id(special) != i:
            raise RuntimeError(f"BPE trainer put {special!r} at id {tokenizer.token_to_id(special)}, expected {i}")
    log.info("learned BPE: %d subwords (%d characters, %d merges requested)", tokenizer.get_vocab_size(), len(alphabet), num_merges)
    return tokenizer


class SubwordEncoder:
    """Encode whitespace-tokenized text into subword ids with a trained tokenizer.

    Args:
        tokenizer: path of ``tokenizer.json`` written by ``elmoc bpe``.
    """

    def __init__(self, tokenizer: str | Path):
        Tokenizer = _tokenizers()[0]
        path = Path(tokenizer)
        if not path.is_file():
            raise InputFileError(path, "BPE tokenizer not found; run `elmoc bpe` first")
        try:
            self.tokenizer = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises plain Exception subclasses
            raise InputFileError(path, f"not a tokenizers JSON file ({e})") from None
        for i, special in enumerate(SPECIALS):
            if self.tokenizer.token_to_id(special) != i:
                raise InputFileError(path, f"special {special!r} is not id {i}; retrain with `elmoc bpe`")

    def vocabulary(self, counts: dict[int, int] | None = None) -> Vocabulary:
        """The subword vocabulary in id order (specials first)."""
        size = self.tokenizer.get_vocab_size()
        tokens = [self.tokenizer.id_to_token(i) for i in range(size)]
        return Vocabulary(tokens, [0 if counts is None else counts.get(i, 0) for i in range(size)])

    def encode_line(self, line: str) -> list[int]:
        """Subword ids of one sentence (no ``<s>``/``</s>``; the batcher adds them)."""
        return self.tokenizer.encode(line.split(), is_pretokenized=True, add_special_tokens=False).ids

    def encode_lines(self, lines: Sequence[str]) -> list[list[int]]:
        """Batch version of :meth:`encode_line` (parallel in Rust)."""
        batch = [line.split() for line in lines]
        return [e.ids for e in self.tokenizer.encode_batch(batch, is_pretokenized=True, add_special_tokens=False)]

    def stream(self, lines: Sequence[str]) -> "np.ndarray":
        """``[<s>] + subword ids + [</s>]`` of every line, concatenated: int64 (num_subwords,).

        The subword counterpart of :func:`elmoc.data.batches.sentences_to_stream`, for
        LM specs whose ``data.tokenizer`` names a BPE tokenizer (ELMo-Sub).
        """
        import numpy as np

        from elmoc.data.vocab import BOS_ID, EOS_ID

        pieces: list[int] = []
        for ids in self.encode_lines(list(lines)):
            pieces.append(BOS_ID)
            pieces.extend(ids)
            pieces.append(EOS_ID)
        return np.asarray(pieces, dtype=np.int64)

    def encode_words(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """Subword ids of ``words`` and, per word, the index of its first subword.

        Returns ``(ids, first)`` with ``len(first) == len(words)`` and ``ids[first[i]]``
        the first piece of word ``i``.
        """
        encoding = self.tokenizer.encode(list(words), is_pretokenized=True, add_special_tokens=False)
        first: list[int] = []
        previous = None
        for position, word_index in enumerate(encoding.word_ids):
            if word_index != previous:
                first.append(position)
                previous = word_index
        if len(first) != len(words):
            raise ValueError(f"{len(words)} words gave {len(first)} first subwords")
        return encoding.ids, first
