"""Intrinsic evaluation of word vectors: Spearman correlation on word-similarity sets.

Files (WordSim-353, SimLex-999 as shipped in gensim's test data): ``#`` comment
lines, then ``word1<TAB>word2<TAB>score`` lines; extra columns are ignored.

Spearman's rho comes from ``scipy.stats.spearmanr`` (ties share their mean
rank).  Each set is scored twice: on *all* pairs (fastText composes a vector
for any string from its character n-grams) and on the *covered* pairs whose two
words are both in the model's own vocabulary, with the number of covered pairs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from elmoc.data.corpus.readers import read_lines
from elmoc.errors import InputFileError


@dataclass(frozen=True)
class SimilarityPair:
    word1: str
    word2: str
    score: float


def read_similarity_file(path: str | Path) -> list[SimilarityPair]:
    """Pairs of a word-similarity file; malformed lines are errors naming the line."""
    pairs = []
    for lineno, line in read_lines(path):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 3:
            raise InputFileError(path, f"expected 'word1<TAB>word2<TAB>score', got {line!r}", lineno)
        try:
            score = float(fields[2])
        except ValueError:
            raise InputFileError(path, f"score {fields[2]!r} is not a number", lineno) from None
        pairs.append(SimilarityPair(fields[0].strip(), fields[1].strip(), score))
    if not pairs:
        raise InputFileError(path, "no word pairs found")
    return pairs


def spearman(x: Iterable[float], y: Iterable[float]) -> float:
    """Spearman's rho of two equal-length sequences (``scipy.stats.spearmanr``; ties
    share their mean rank); NaN if fewer than 2 values or either side is constant."""
    from scipy.stats import spearmanr

    x, y = np.asarray(list(x), dtype=float), np.asarray(list(y), dtype=float)
    if len(x) != len(y):
        raise ValueError(f"spearman needs equal lengths, got {len(x)} and {len(y)}")
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors; 0 when either is all-zero."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return 0.0 if na == 0 or nb == 0 else float(a @ b) / (na * nb)


def evaluate_pairs(
    pairs: list[SimilarityPair], vector: Callable[[str], np.ndarray], in_vocab: Callable[[str], bool]
) -> dict:
    """Spearman of model cosines vs. human scores, on all and on covered pairs."""
    model = [cosine(vector(p.word1), vector(p.word2)) for p in pairs]
    human = [p.score for p in pairs]
    covered = [i for i, p in enumerate(pairs) if in_vocab(p.word1) and in_vocab(p.word2)]

    def _json(v: float) -> float | None:
        return None if np.isnan(v) else round(v, 6)

    return {
        "pairs": len(pairs),
        "covered": len(covered),
        "spearman_all": _json(spearman(model, human)),
        "spearman_covered": _json(spearman([model[i] for i in covered], [human[i] for i in covered])),
    }
