"""BPE subwords for ELMo-Sub (spec 3.3): learn the merges, encode lines, find first subwords.

Uses Hugging Face ``tokenizers`` (a BPE model over whitespace-split corpus tokens,
so subword boundaries never cross our tokenization).  Pieces after the first one
of a word carry the ``##`` continuing-subword prefix, so the first subword of each
word is simply the piece without it (word features downstream use it, following
the paper and Devlin et al.).  The four elmoc specials are the first four ids
(``<pad>``=0, ``<s>``=1, ``</s>``=2, ``<unk>``=3), so the subword vocabulary file
is an ordinary :class:`elmoc.data.vocab.vocabulary.Vocabulary`; ``<unk>`` covers characters
never seen in training, so every id is in range (the paper's code had an
out-of-range unknown id, P15).

The paper learned ~30K merges with subword-nmt; here ``num_merges`` sets the
trainer's vocabulary size to ``specials + alphabet + num_merges``.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from elmoc.data.vocab.vocabulary import SPECIALS, UNK, Vocabulary
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
    """Learn BPE merges on whitespace-tokenized ``files``; returns a ``tokenizers.Tokenizer``.

    Deterministic: the same files give the same merges in the same order.  The
    ``tokenizers`` trainer (0.23) is not, when it creates the ``##``-prefixed
    continuation symbols itself: it numbers them in hash-map order, and those numbers
    break ties between equally frequent pairs (huggingface/tokenizers#1794, PR #2066;
    measured here: 3 runs on the demo corpus gave 3 different merge orders, 151 of
    2024 merges in other places).  So the trainer never sees a prefix: every
    word-internal character is first replaced by its own private-use character
    (:class:`_Continuations`), which makes all symbols plain alphabet characters,
    numbered in sorted order; the learned vocabulary and merges are then mapped back
    to ``##`` form and loaded into a BPE model that encodes with the prefix as usual.
    """
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
    marks = _Continuations(alphabet, paths[0])
    # every character may appear both word-initially and as a continuation
    vocab_size = len(SPECIALS) + 2 * len(alphabet) + num_merges
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIALS),
        initial_alphabet=sorted(alphabet | set(marks.mark.values())),
        show_progress=False,
    )
    plain = Tokenizer(models.BPE(unk_token=UNK))
    plain.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    plain.train_from_iterator((marks.line(line) for line in _iter_lines(paths)), trainer=trainer)
    learned = json.loads(plain.to_str())["model"]
    # ids in the trainer's order, made consecutive again where two learned tokens map back
    # to one string: a corpus word spelled like a special (WikiText's "<unk>") is learned
    # as "<" + marks and maps back to the special, which keeps its id
    vocab: dict[str, int] = {}
    for token, _ in sorted(learned["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(marks.token(token), len(vocab))
    merges = [(marks.token(a), marks.token(b)) for a, b in (_merge_pair(m) for m in learned["merges"])]
    tokenizer = Tokenizer(models.BPE(vocab, merges, unk_token=UNK, continuing_subword_prefix=CONTINUATION))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION)
    for i, special in enumerate(SPECIALS):
        if tokenizer.token_to_id(special) != i:
            raise RuntimeError(f"BPE trainer put {special!r} at id {tokenizer.token_to_id(special)}, expected {i}")
    log.info("learned BPE: %d subwords (%d characters, %d merges requested)", tokenizer.get_vocab_size(), len(alphabet), num_merges)
    return tokenizer


def _merge_pair(merge) -> tuple[str, str]:
    """A merge of ``tokenizer.json`` (a pair, or ``"a b"`` in older files)."""
    if isinstance(merge, str):
        a, b = merge.split(" ")
        return a, b
    return merge[0], merge[1]


class _Continuations:
    """Word-internal characters as private-use characters, and back.

    Character ``c`` after the first of a word becomes ``mark[c]``, a code point of
    Unicode's supplementary private-use planes (15 and 16, 131K code points),
    assigned in sorted order; a training token made of marks maps back to ``##`` +
    the characters, one that starts with a plain character to the plain characters.
    """

    FIRST, LAST = 0xF0000, 0x10FFFD

    def __init__(self, alphabet: set[str], where: Path):
        used = sorted(c for c in alphabet if ord(c) >= self.FIRST)
        if used:
            raise InputFileError(where, f"corpus contains private-use character U+{ord(used[0]):04X}, which the BPE "
                                        "trainer reserves; remove or replace it")
        points = [cp for cp in range(self.FIRST, self.LAST + 1) if cp & 0xFFFF < 0xFFFE]
        if len(alphabet) > len(points):
            raise InputFileError(where, f"corpus has {len(alphabet)} distinct characters; at most {len(points)} "
                                        "are supported")
        self.mark = {c: chr(cp) for c, cp in zip(sorted(alphabet), points)}
        self.unmark = {m: c for c, m in self.mark.items()}
        self._table = str.maketrans(self.mark)

    def line(self, line: str) -> str:
        return " ".join(w[0] + w[1:].translate(self._table) for w in line.split())

    def token(self, token: str) -> str:
        if token in SPECIALS or not token:
            return token
        if token[0] in self.unmark:
            return CONTINUATION + "".join(self.unmark[c] for c in token)
        return token[0] + "".join(self.unmark.get(c, c) for c in token[1:])


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

    def stream(self, lines: Sequence[str], words: dict[str, int] | None = None) -> "np.ndarray":
        """``[<s>] + subword ids + [</s>]`` of every line, concatenated: int64 (num_subwords,).

        The subword counterpart of :func:`elmoc.data.batches.sentences_to_stream`, for
        LM specs whose ``data.tokenizer`` names a BPE tokenizer (ELMo-Sub).  With ``words``
        (a word vocabulary's token -> id, for notes) it is (num_subwords, 2): each piece and
        the id of its word (``<s>``, ``</s>`` and ``<unk>`` as words), written ``-1 - id``
        for the words of odd index in the sentence (:func:`elmoc.nn.notes.piece_words`).
        """
        import numpy as np

        from elmoc.data.vocab.vocabulary import BOS_ID, EOS_ID, UNK_ID

        if words is None:
            pieces: list[int] = []
            for ids in self.encode_lines(list(lines)):
                pieces.append(BOS_ID)
                pieces.extend(ids)
                pieces.append(EOS_ID)
            return np.asarray(pieces, dtype=np.int64)
        batch = [line.split() for line in lines]
        parts = [np.empty((0, 2), dtype=np.int64)]
        for tokens, e in zip(batch, self.tokenizer.encode_batch(batch, is_pretokenized=True,
                                                                 add_special_tokens=False)):
            ids = np.array([BOS_ID, *(words.get(w, UNK_ID) for w in tokens), EOS_ID], dtype=np.int64)
            ids[1::2] = -1 - ids[1::2]  # odd words: neighbours always differ
            which = np.array([0, *(i + 1 for i in e.word_ids), len(tokens) + 1], dtype=np.int64)
            parts.append(np.stack([np.array([BOS_ID, *e.ids, EOS_ID], dtype=np.int64), ids[which]], 1))
        return np.concatenate(parts)

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


def corpus_files(items: Sequence[str | Path]) -> list[Path]:
    """The ``.txt`` files of ``items`` (a folder's ``*.txt`` in name order, or a file itself); a
    missing item or none found is one InputFileError line."""
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".txt")
        elif path.is_file():
            files.append(path)
        else:
            raise InputFileError(path, "corpus file or directory not found")
    if not files:
        raise InputFileError(items[0], "no .txt shards found")
    return files


def build_bpe(files: Sequence[Path], out_dir: str | Path, num_merges: int, min_frequency: int) -> tuple[Vocabulary, int]:
    """``elmoc bpe``: BPE learned on ``files``, written as ``out_dir/tokenizer.json``, and the
    elmoc vocabulary of its subwords by their count in ``files`` as ``out_dir/vocab.txt``;
    ``(vocabulary, subword tokens counted)``."""
    from collections import Counter

    from elmoc.io.atomic import atomic_file

    tokenizer = train_bpe(files, num_merges, min_frequency)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_file(out / "tokenizer.json") as f:
        f.write(tokenizer.to_str())
    encoder = SubwordEncoder(out / "tokenizer.json")
    counts: Counter = Counter()
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        for ids in encoder.encode_lines(lines):
            counts.update(ids)
    vocab = encoder.vocabulary(dict(counts))
    vocab.save(out / "vocab.txt")
    return vocab, sum(counts.values())
