"""Span F1 with the chunk semantics of the CoNLL ``conlleval`` script.

Tags are ``O`` or ``<prefix>-<TYPE>`` with prefix B, I, L/E (last) or U/S (unit),
so IOB1, IOB2/BIO and BIOUL/BIOES sequences are all read the way conlleval reads
them: a chunk starts at B/U, or at I/L after O, L, U or a chunk of another type;
it ends before a B/U/O, after an L/U, or when the type changes.  Ill-formed
sequences (``O I-PER``) therefore still yield chunks, exactly like conlleval and
``seqeval``'s default mode (cross-checked in the tests).

Hand-written: the logic is ~40 lines and the tasks need it on tensors of tag ids
without a dependency at run time.
"""
from __future__ import annotations

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
    """Micro-averaged chunk precision, recall and F1 over all types.

    ``update(predictions, batch)``: ``predictions`` is a list of predicted tag-string
    lists, ``batch[gold_key]`` the gold tag-string lists (same lengths).
    ``ignore_types``: chunk types left out of the counts (e.g. SRL's ``V``).
    """

    def __init__(self, gold_key: str = "tags", ignore_types: Iterable[str] = ()):
        self.gold_key = gold_key
        self.ignore_types = set(ignore_types)
        self.reset()

    def reset(self) -> None:
        self.true_positives = 0
        self.num_predicted = 0
        self.num_gold = 0

    def add(self, predicted: Sequence[str], gold: Sequence[str]) -> None:
        if len(predicted) != len(gold):
            raise ValueError(f"{len(predicted)} predicted tags for {len(gold)} gold tags")
        p = {s for s in spans(predicted) if s[0] not in self.ignore_types}
        g = {s for s in spans(gold) if s[0] not in self.ignore_types}
        self.true_positives += len(p & g)
        self.num_predicted += len(p)
        self.num_gold += len(g)

    def update(self, predictions, batch: dict) -> None:
        for predicted, gold in zip(predictions, batch[self.gold_key], strict=True):
            self.add(predicted, gold)

    def compute(self) -> dict[str, float]:
        precision = self.true_positives / self.num_predicted if self.num_predicted else 0.0
        recall = self.true_positives / self.num_gold if self.num_gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"precision": precision, "recall": recall, "f1": f1}
