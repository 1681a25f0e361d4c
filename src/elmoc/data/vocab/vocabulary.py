"""Word vocabulary: frequency-sorted tokens after four fixed specials.

Ids follow the paper's code (spec 1.2): ``<pad>``=0, ``<s>``=1, ``</s>``=2,
``<unk>``=3, then corpus words by descending count (ties broken by the token
string, so the order is deterministic).  The file format is one token per line,
``token<TAB>count`` (count optional), in id order; specials are written too, so
line ``i+1`` holds id ``i``.

Two ways to build one (``elmoc vocab``): :func:`count_tokens` over the train shards
then :meth:`Vocabulary.from_counts`, or :meth:`Vocabulary.from_external_file` for a
given list such as bilm-tf's ``vocab-2016-09-10.txt`` (the paper's vocabulary).
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from elmoc.errors import ConfigError, InputFileError

log = logging.getLogger(__name__)

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


_SPACE_BUT_NEWLINE = re.compile(r"[^\S\n]")


def _invalid_token_id(tokens: list[str], index: dict[str, int]) -> int | None:
    """Id of a token that is empty or holds whitespace or a control character
    (:data:`elmoc.data.corpus.readers.CONTROL_CHARACTERS`), None if all are valid; two
    character-class scans of the joined tokens (0.1 s for 800k tokens)."""
    from elmoc.data.corpus.readers import CONTROL_CHARACTERS

    if "" in index:
        return index[""]
    joined = "\n".join(tokens)
    starts = [m.start() for m in (CONTROL_CHARACTERS.search(joined), _SPACE_BUT_NEWLINE.search(joined)) if m]
    return joined.count("\n", 0, min(starts)) if starts else None


class Vocabulary:
    """Bidirectional token <-> id map.

    Args:
        tokens: tokens in id order; must start with ``SPECIALS`` and have no duplicates.
        counts: optional corpus counts aligned with ``tokens`` (0 for specials).
    """

    def __init__(self, tokens: Sequence[str], counts: Sequence[int] | None = None):
        tokens = list(tokens)
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, got {tuple(tokens[:4])}")
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(tokens)}
        if len(self.index) != len(tokens):
            dup = next(t for t, c in Counter(tokens).items() if c > 1)
            ids = [i for i, t in enumerate(tokens) if t == dup]
            raise ValueError(f"duplicate vocabulary token {dup!r} (ids {ids[0]} and {ids[1]})")
        bad = _invalid_token_id(tokens, self.index)
        if bad is not None:
            raise ValueError(f"vocabulary token {tokens[bad]!r} (id {bad}) is empty or holds whitespace or a "
                             "control character")
        self.counts = list(counts) if counts is not None else [0] * len(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self.index

    def id(self, token: str) -> int:
        """Id of ``token``, ``UNK_ID`` if absent."""
        return self.index.get(token, UNK_ID)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        get = self.index.get
        return [get(t, UNK_ID) for t in tokens]

    @classmethod
    def from_counts(cls, counts: Counter, max_size: int | None = None, min_count: int = 1) -> "Vocabulary":
        """Specials, then words with ``count >= min_count`` by descending count.

        ``max_size`` caps the total size including the four specials.
        """
        words = [(w, c) for w, c in counts.items() if c >= min_count and w not in SPECIALS and w]
        words.sort(key=lambda wc: (-wc[1], wc[0]))
        if max_size is not None:
            words = words[: max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + [w for w, _ in words], [0] * len(SPECIALS) + [c for _, c in words])

    @classmethod
    def from_external_file(cls, path: str | Path, max_size: int | None = None) -> "Vocabulary":
        """Vocabulary from a list file: one token per line, optional count after whitespace.

        Semantics of the paper's code (spec 1.2, P6, P8) with one deliberate fix:

        * the four lowercase specials come first (ids 0-3);
        * then the first whitespace-separated field of every line, in file order;
          duplicates (including a lowercase special listed in the file) are skipped
          by exact string;
        * the file's own ``<S>``, ``</S>``, ``<UNK>`` (bilm-tf's specials) and
          ``!!!MAXTERMID`` stay ordinary, unused entries, as in ELMo-C;
        * **fix:** blank lines are skipped.  ELMo-C's ``read().split("\\n")`` turns the
          file's trailing newline into an empty-string word (793,476 entries instead
          of 793,475); an empty token cannot be written to or read from our format
          and never occurs in whitespace-tokenized text, so it is not added.

        The optional second field is kept as the count (0 when absent or not an
        integer).  ``max_size`` caps the total size including the specials.  A line
        whose token holds a control character (NUL, ...) is skipped with one warning
        counting them: ``elmoc corpus`` turns those characters into spaces, so such a
        token could never occur in the text.
        """
        from elmoc.data.corpus.readers import CONTROL_CHARACTERS, control_character_message, read_lines

        tokens, counts = list(SPECIALS), [0] * len(SPECIALS)
        seen = set(tokens)
        skipped, first = 0, None
        for lineno, line in read_lines(path):
            fields = line.split()
            if not fields or fields[0] in seen:
                continue
            found = CONTROL_CHARACTERS.search(fields[0])
            if found is not None:
                skipped += 1
                first = first or (lineno, control_character_message(found.group()))
                continue
            if max_size is not None and len(tokens) >= max_size:
                break
            seen.add(fields[0])
            tokens.append(fields[0])
            counts.append(int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0)
        if first is not None:
            log.warning("%s:%d: skipped %d token(s) holding a control character, the first a %s on this line",
                        path, first[0], skipped, first[1])
        if len(tokens) == len(SPECIALS):
            raise InputFileError(path, "vocabulary file has no tokens besides the specials")
        return cls(tokens, counts)

    def save(self, path: str | Path) -> None:
        """Write atomically (temp file + rename)."""
        from elmoc.io.atomic import atomic_file

        with atomic_file(path) as f:
            for token, count in zip(self.tokens, self.counts):
                f.write(f"{token}\t{count}\n")

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        path = Path(path)
        if not path.is_file():
            raise InputFileError(path, "vocabulary file not found; run `elmoc vocab` first")
        from elmoc.data.corpus.readers import CONTROL_CHARACTERS, control_character_message, read_lines

        tokens, counts = [], []
        first_line: dict[str, int] = {}
        for lineno, line in read_lines(path, fix="a vocabulary file is UTF-8: rebuild it with `elmoc vocab`"):
            if not line:
                raise InputFileError(path, "empty line in vocabulary file", lineno)
            token, _, count = line.partition("\t")
            if not token or any(ch.isspace() for ch in token):
                raise InputFileError(path, f"invalid token {token!r} (empty or with whitespace)", lineno)
            found = CONTROL_CHARACTERS.search(token)
            if found is not None:
                raise InputFileError(path, f"{control_character_message(found.group())} in a vocabulary token; "
                                     "rebuild the vocabulary with `elmoc vocab`", lineno)
            if token in first_line:
                raise InputFileError(
                    path, f"token {token!r} is listed twice, on lines {first_line[token]} and {lineno}; "
                    "each token needs one line (one id): delete one or rebuild with `elmoc vocab`", lineno)
            first_line[token] = lineno
            try:
                counts.append(int(count) if count else 0)
            except ValueError:
                raise InputFileError(path, f"count {count!r} is not an integer", lineno) from None
            tokens.append(token)
        if len(tokens) <= len(SPECIALS):
            raise InputFileError(path, "vocabulary has no words beyond the special tokens")
        try:
            return cls(tokens, counts)
        except ValueError as e:
            raise InputFileError(path, str(e)) from None


def count_tokens(paths: Iterable[str | Path], lowercase: bool = False) -> Counter:
    """Whitespace-token counts over UTF-8 text files (e.g. the train shards).

    Reads each file in blocks of lines (memory: one block); undecodable text, and a
    control character (which ``elmoc corpus`` never writes into a shard, so it would
    only become a token of a hand-made one), is an error naming the file and line.
    """
    from elmoc.data.corpus.readers import CONTROL_CHARACTERS, control_character_message, read_lines

    def add(block: list[str], first_line: int) -> None:
        text = "\n".join(block)
        found = CONTROL_CHARACTERS.search(text)
        if found is not None:
            raise InputFileError(
                path, f"{control_character_message(found.group())} in the text; `elmoc corpus` replaces them by "
                "spaces: rebuild the shards with it (or remove the character)",
                first_line + text.count("\n", 0, found.start()))
        counts.update((text.lower() if lowercase else text).split())

    counts: Counter = Counter()
    for path in paths:
        block: list[str] = []
        first_line = 1
        for lineno, line in read_lines(path):
            block.append(line)
            if len(block) >= 65536:
                add(block, first_line)
                block.clear()
                first_line = lineno + 1
        add(block, first_line)
    return counts


def build_vocabulary(out: str | Path, corpus: str | Path | None = None, from_file: str | Path | None = None,
                     max_size: int | None = None, min_count: int = 1) -> Vocabulary:
    """``elmoc vocab``: count the train shards under ``corpus`` (words with count >=
    ``min_count``), or read the external list ``from_file``; save to ``out`` atomically.

    ``max_size`` caps the total size including the specials.  An empty result is an
    error naming the corpus.
    """
    if (corpus is None) == (from_file is None):
        raise ConfigError("give exactly one of a corpus directory or an external vocabulary file")
    if max_size is not None and max_size <= len(SPECIALS):
        raise ConfigError(f"--max-size must exceed the {len(SPECIALS)} specials, got {max_size}")
    if min_count < 1:
        raise ConfigError(f"--min-count must be >= 1, got {min_count}")
    if from_file is not None:
        vocab = Vocabulary.from_external_file(from_file, max_size=max_size)
    else:
        from elmoc.data.corpus.prepare import shard_paths

        shards = shard_paths(corpus)
        counts = count_tokens(shards)
        vocab = Vocabulary.from_counts(counts, max_size=max_size, min_count=min_count)
        if len(vocab) == len(SPECIALS):
            raise InputFileError(
                corpus,
                f"empty vocabulary: no token occurs >= {min_count} times in {len(shards)} shard(s); "
                "check the corpus or lower --min-count",
            )
        covered, total = sum(vocab.counts), sum(counts.values())
        log.info("vocabulary covers %d of %d running tokens (%.2f%%); %d types seen",
                 covered, total, 100.0 * covered / max(total, 1), len(counts))
    vocab.save(out)
    log.info("wrote %d entries to %s", len(vocab), out)
    return vocab
