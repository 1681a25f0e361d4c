"""The one span F1 of the sequence-labelling tasks (NER, SRL), with the chunk
semantics of the CoNLL ``conlleval`` script.

Tags are ``O`` or ``<prefix>-<TYPE>`` with prefix B, I, L/E (last) or U/S (unit),
so IOB1, IOB2/BIO and BIOUL/BIOES sequences are all read the way conlleval reads
them: a chunk starts at B/U, or at I/L after O, L, U or a chunk of another type;
it ends before a B/U/O, after an L/U, or when the type changes.  Ill-formed
sequences (``O I-PER``) therefore still yield chunks, exactly like conlleval and
``seqeval``'s default mode (cross-checked in the tests).  On BIO tags this is also
what AllenNLP's ``bio_tags_to_spans`` / ``SpanBasedF1Measure`` reads (SRL): an
``I-X`` that does not continue an ``X`` chunk starts a new one.  A type may contain
hyphens (``B-C-ARG1`` is type ``C-ARG1``): continuation and reference arguments
are labels of their own, as in AllenNLP.

Hand-written: the logic is ~40 lines and the tasks need it on tag strings
without a dependency at run time.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from elmoc.metrics.base import Metric

_CANONICAL = {"B": "B", "I": "I", "L": "E", "E": "E", "U": "S", "S": "S"}


def _split(tag: str) -> tuple[str, str]:
    if tag == "O":
        return "O", ""
    prefix, sep, kind = tag.partition("-")
    if not sep or prefix not in _CANONICAL or not kind:
        raise ValueError(f"tag {tag!r} is not O or B/I/L/U/E/S-TYPE")
    return _CANONICAL[prefix], kind


def _chunk_end(prev: str, prev_type: str, cur: str, cur_type: str) -> bool:
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and cur in ("B", "S", "O"):
        return True
    return prev != "O" and prev_type != cur_type


def _chunk_start(prev: str, prev_type: str, cur: str, cur_type: str) -> bool:
    if cur in ("B", "S"):
        return True
    if prev in ("E", "S", "O") and cur in ("I", "E"):
        return True
    return cur != "O" and prev_type != cur_type


def spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Chunks of one sentence as ``(type, first, last)`` (inclusive token indices)."""
    out = []
    prev, prev_type, start = "O", "", None
    for i, tag in enumerate(list(tags) + ["O"]):
        cur, cur_type = _split(tag)
        if start is not None and _chunk_end(prev, prev_type, cur, cur_type):
            out.append((prev_type, start, i - 1))
            start = None
        if _chunk_start(prev, prev_type, cur, cur_type):
            start = i
        prev, prev_type = cur, cur_type
    return out


class SpanF1(Metric):
    """Micro-averaged chunk precision, recall and F1 over all types, plus F1 per type.

    ``update(predictions, batch)`` (the metric contract): ``predictions`` is a list of
    predicted tag-string lists, ``batch[gold_key]`` the gold tag-string lists (same
    lengths).  ``add(predicted, gold)`` scores one sentence.
    ``ignore_types``: chunk types left out of the counts (SRL's ``V``: the predicate is given).
    """

    def __init__(self, gold_key: str = "tags", ignore_types: Iterable[str] = ()):
        self.gold_key = gold_key
        self.ignore_types = set(ignore_types)
        self.reset()

    def reset(self) -> None:
        self.true_positives: Counter = Counter()
        self.false_positives: Counter = Counter()
        self.false_negatives: Counter = Counter()

    @property
    def num_predicted(self) -> int:
        return sum(self.true_positives.values()) + sum(self.false_positives.values())

    @property
    def num_gold(self) -> int:
        return sum(self.true_positives.values()) + sum(self.false_negatives.values())

    def add(self, predicted: Sequence[str], gold: Sequence[str]) -> None:
        if len(predicted) != len(gold):
            raise ValueError(f"{len(predicted)} predicted tags for {len(gold)} gold tags")
        p = {s for s in spans(predicted) if s[0] not in self.ignore_types}
        g = {s for s in spans(gold) if s[0] not in self.ignore_types}
        self.true_positives.update(kind for kind, _, _ in p & g)
        self.false_positives.update(kind for kind, _, _ in p - g)
        self.false_negatives.update(kind for kind, _, _ in g - p)

    def update(self, predictions, batch: dict) -> None:
        for predicted, gold in zip(predictions, batch[self.gold_key], strict=True):
            self.add(predicted, gold)

    @staticmethod
    def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        return p, r, (2 * p * r / (p + r) if p + r else 0.0)

    def compute(self) -> dict[str, float]:
        """``precision``, ``recall``, ``f1`` (micro, in [0, 1]) and ``f1-<type>`` per type."""
        tp, fp, fn = (sum(c.values()) for c in (self.true_positives, self.false_positives, self.false_negatives))
        p, r, f = self._prf(tp, fp, fn)
        out = {"precision": p, "recall": r, "f1": f}
        for kind in sorted(set(self.true_positives) | set(self.false_positives) | set(self.false_negatives)):
            out[f"f1-{kind}"] = self._prf(self.true_positives[kind], self.false_positives[kind],
                                          self.false_negatives[kind])[2]
        return out
