"""Corpus preparation: sources -> cleaned, shuffled train shards + heldout file.

Output layout (spec 1.2; architecture "Artifacts")::

    <out>/train/shard_000.txt ...   one whitespace-tokenized sentence per line
    <out>/heldout.txt
    <out>/stats.json                sentence/token counts per source and split

Two modes:

* **pooled** (``num_shards`` = N): every sentence of every source is read,
  cleaned, shuffled with ``seed`` (numpy PCG64 permutation), the heldout part is
  cut off the front (``heldout`` = fraction in (0, 1) or a sentence count >= 1,
  unless ``heldout_sources`` are given), and the rest is cut into N contiguous,
  near-equal shards.  Memory: the whole corpus; meant for demo-sized corpora.
* **streamed** (``num_shards`` = None, the paper's 1B Word setup): each train file
  becomes one shard, cleaned line by line in its own order (the batcher shuffles
  sentences per shard anyway), and the heldout file is built from
  ``heldout_sources`` (e.g. ``news.en-00099-of-00100``).  Memory: one line.

Cleaning: control characters (NUL, ...) become spaces as the files are read,
with a warning per file (:mod:`elmoc.data.corpus.readers`), so they never reach a token;
whitespace is normalised (``" ".join(s.split())``), empty sentences are
dropped, optional lowercasing, and sentences longer than ``max_length`` tokens are
dropped (not truncated: a cut sentence would teach the LM a wrong ``</s>``).
Everything is written into a temp directory that replaces ``<out>`` only when
complete, so bad input leaves no partial output.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, TextIO

import numpy as np

from elmoc.data.corpus.readers import FORMATS, expand_source, read_sentences
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.output_paths import output_directory

log = logging.getLogger(__name__)


def shard_name(index: int) -> str:
    return f"shard_{index:03d}.txt"


@dataclass
class CorpusConfig:
    """Corpus preparation settings (see module docstring).

    Args:
        sources: ``(format, path_or_glob)`` pairs of training text.
        heldout_sources: optional ``(format, path_or_glob)`` pairs used as heldout
            text instead of a split of ``sources``.
        num_shards: number of train shards (pooled mode) or None (streamed mode,
            one shard per train file).
        heldout: fraction (0 < x < 1) or count (integer >= 1) of pooled sentences
            held out; must be 0 when ``heldout_sources`` are given.
        lowercase: lowercase every token.
        max_length: drop sentences with more tokens (None = keep all).
        seed: shuffle seed (pooled mode).
    """

    sources: list[tuple[str, str]]
    heldout_sources: list[tuple[str, str]] = field(default_factory=list)
    num_shards: int | None = 1
    heldout: float = 0.05
    lowercase: bool = False
    max_length: int | None = None
    seed: int = 1

    def __post_init__(self) -> None:
        if not self.sources:
            raise ConfigError("corpus needs at least one source (FORMAT:PATH_OR_GLOB)")
        for fmt, _ in list(self.sources) + list(self.heldout_sources):
            if fmt not in FORMATS:
                raise ConfigError(f"unknown corpus format {fmt!r}; use one of {', '.join(FORMATS)}")
        if self.num_shards is not None and (not isinstance(self.num_shards, int) or self.num_shards < 1):
            raise ConfigError(f"num_shards must be an integer >= 1 or null, got {self.num_shards!r}")
        if self.heldout < 0 or (self.heldout >= 1 and float(self.heldout) != int(self.heldout)):
            raise ConfigError(f"heldout must be a fraction in (0, 1) or a sentence count >= 1, got {self.heldout!r}")
        if self.heldout_sources and self.heldout:
            raise ConfigError("give either heldout_sources or a heldout fraction/count, not both (set heldout: 0)")
        if self.num_shards is None and not self.heldout_sources:
            raise ConfigError("streamed mode (num_shards: null) needs heldout_sources; or set num_shards")
        if self.max_length is not None and self.max_length < 1:
            raise ConfigError(f"max_length must be >= 1 or null, got {self.max_length!r}")


class _Cleaner:
    """Normalises sentences and counts what it drops."""

    def __init__(self, lowercase: bool, max_length: int | None):
        self.lowercase = lowercase
        self.max_length = max_length
        self.dropped_empty = 0
        self.dropped_long = 0

    def __call__(self, sentence: str) -> str | None:
        tokens = sentence.split()
        if not tokens:
            self.dropped_empty += 1
            return None
        if self.max_length is not None and len(tokens) > self.max_length:
            self.dropped_long += 1
            return None
        text = " ".join(tokens)
        return text.lower() if self.lowercase else text


def _cleaned_file(path: Path, fmt: str, clean: _Cleaner) -> Iterator[str]:
    for sentence in read_sentences(path, fmt):
        text = clean(sentence)
        if text is not None:
            yield text


def _files(sources: list[tuple[str, str]]) -> list[tuple[str, Path]]:
    return [(fmt, path) for fmt, pattern in sources for path in expand_source(pattern)]


def _write_lines(f: TextIO, lines) -> tuple[int, int]:
    n_sent = n_tok = 0
    for line in lines:
        f.write(line)
        f.write("\n")
        n_sent += 1
        n_tok += line.count(" ") + 1
    return n_sent, n_tok


def _read_all(files: list[tuple[str, Path]], clean: _Cleaner, stats: list[dict]) -> list[str]:
    sentences: list[str] = []
    for fmt, path in files:
        before = len(sentences)
        sentences.extend(_cleaned_file(path, fmt, clean))
        if len(sentences) == before:
            raise InputFileError(path, f"no sentences after cleaning ({fmt} format); is it the right file/format?")
        stats.append({"file": str(path), "format": fmt, "sentences": len(sentences) - before})
    return sentences


def _heldout_count(total: int, heldout: float) -> int:
    return int(heldout) if heldout >= 1 else int(round(total * heldout))


def prepare_corpus(config: CorpusConfig, out_dir: str | Path) -> dict:
    """Write train shards, heldout.txt and stats.json under ``out_dir``; return the stats."""
    out_dir = Path(out_dir)
    clean = _Cleaner(config.lowercase, config.max_length)
    train_files = _files(config.sources)
    heldout_files = _files(config.heldout_sources)
    stats: dict = {"sources": [], "heldout_sources": [], "shards": []}
    inputs = {"--source": [p for _, p in train_files], "--heldout-source": [p for _, p in heldout_files]}
    with output_directory(out_dir, "corpus", inputs) as tmp:
        (tmp / "train").mkdir()
        if config.num_shards is None:
            for i, (fmt, path) in enumerate(train_files):
                with open(tmp / "train" / shard_name(i), "w", encoding="utf-8", newline="\n") as f:
                    n_sent, n_tok = _write_lines(f, _cleaned_file(path, fmt, clean))
                if n_sent == 0:
                    raise InputFileError(path, f"no sentences after cleaning ({fmt} format)")
                stats["sources"].append({"file": str(path), "format": fmt, "sentences": n_sent})
                stats["shards"].append({"name": shard_name(i), "sentences": n_sent, "tokens": n_tok})
            heldout = _read_all(heldout_files, clean, stats["heldout_sources"])
        else:
            sentences = _read_all(train_files, clean, stats["sources"])
            order = np.random.default_rng(config.seed).permutation(len(sentences))
            sentences = [sentences[i] for i in order]
            if heldout_files:
                heldout = _read_all(heldout_files, clean, stats["heldout_sources"])
            else:
                n_held = _heldout_count(len(sentences), config.heldout)
                if n_held < 1 and config.heldout > 0:
                    raise ConfigError(f"heldout={config.heldout} of {len(sentences)} sentences rounds to 0; raise it")
                heldout, sentences = sentences[:n_held], sentences[n_held:]
            if len(sentences) < config.num_shards:
                raise ConfigError(
                    f"only {len(sentences)} training sentences for num_shards={config.num_shards}; lower num_shards"
                )
            bounds = np.linspace(0, len(sentences), config.num_shards + 1).round().astype(int)
            for i in range(config.num_shards):
                with open(tmp / "train" / shard_name(i), "w", encoding="utf-8", newline="\n") as f:
                    n_sent, n_tok = _write_lines(f, sentences[bounds[i]:bounds[i + 1]])
                stats["shards"].append({"name": shard_name(i), "sentences": n_sent, "tokens": n_tok})
        if not heldout:
            raise ConfigError("the heldout set is empty; set heldout > 0 or give heldout_sources")
        with open(tmp / "heldout.txt", "w", encoding="utf-8", newline="\n") as f:
            stats["heldout_sentences"], stats["heldout_tokens"] = _write_lines(f, heldout)
        stats["train_sentences"] = sum(s["sentences"] for s in stats["shards"])
        stats["train_tokens"] = sum(s["tokens"] for s in stats["shards"])
        stats["dropped_empty"] = clean.dropped_empty
        stats["dropped_too_long"] = clean.dropped_long
        (tmp / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    log.info(
        "corpus: %d train sentences (%d tokens) in %d shard(s), %d heldout sentences; dropped %d empty, %d too long",
        stats["train_sentences"], stats["train_tokens"], len(stats["shards"]), stats["heldout_sentences"],
        clean.dropped_empty, clean.dropped_long,
    )
    return stats


def shard_paths(train_dir: str | Path) -> list[Path]:
    """The ``shard_*.txt`` files of a prepared corpus, sorted; an error if none."""
    train_dir = Path(train_dir)
    shards = sorted(train_dir.glob("shard_*.txt"))
    if not shards:
        raise InputFileError(train_dir, "no shard_*.txt files here; run `elmoc corpus` first")
    return shards
