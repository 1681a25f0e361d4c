"""Span F1 over BIO tags, as AllenNLP's ``SpanBasedF1Measure`` reports SRL (spec 6).

A span is ``(label, start, end)`` (inclusive).  Spans of the ignored classes
(``V`` for SRL: the predicate is given, so scoring it would inflate F1) count
neither as predicted nor as gold.  Micro-averaged precision, recall and F1 over
all remaining labels, plus per-label F1.

:func:`bio_to_spans` reads a tag sequence the way AllenNLP's ``bio_tags_to_spans``
does: an ``I-X`` that does not continue an ``X`` span starts a new one, so
ill-formed sequences are still scored (constrained Viterbi never produces them).
Continuation (``C-ARG1``) and reference (``R-ARG0``) arguments are labels of their
own, as in AllenNLP (the official CoNLL-2005 script merges C-X into X, one
reason AllenNLP's numbers are lower: paper footnote 6).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence


def bio_to_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Labelled inclusive spans of a BIO tag sequence (``O`` and unknown prefixes end a span)."""
    spans: list[tuple[str, int, int]] = []
    label, start = None, 0
    for i, tag in enumerate(tags):
        prefix, _, name = tag.partition("-")
        if prefix == "I" and label == name:
            continue
        if label is not None:
            spans.append((label, start, i - 1))
            label = None
        if prefix in ("B", "I") and name:
            label, start = name, i
    if label is not None:
        spans.append((label, start, len(tags) - 1))
    return spans


class SpanF1:
    """Accumulates span matches over sentences.

    Args:
        ignore: labels whose spans are not scored (``("V",)`` for SRL).
    """

    def __init__(self, ignore: Iterable[str] = ("V",)):
        self.ignore = frozenset(ignore)
        self.reset()

    def reset(self) -> None:
        self.true_positives: Counter = Counter()
        self.false_positives: Counter = Counter()
        self.false_negatives: Counter = Counter()

    def update(self, gold: Sequence[str], predicted: Sequence[str]) -> None:
        """One sentence's gold and predicted BIO tags (same length)."""
        if len(gold) != len(predicted):
            raise ValueError(f"gold has {len(gold)} tags but the prediction {len(predicted)}")
        gold_spans = {s for s in bio_to_spans(gold) if s[0] not in self.ignore}
        pred_spans = {s for s in bio_to_spans(predicted) if s[0] not in self.ignore}
        for label, _, _ in pred_spans & gold_spans:
            self.true_positives[label] += 1
        for label, _, _ in pred_spans - gold_spans:
            self.false_positives[label] += 1
        for label, _, _ in gold_spans - pred_spans:
            self.false_negatives[label] += 1

    @staticmethod
    def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        return p, r, (2 * p * r / (p + r) if p + r else 0.0)

    def compute(self) -> dict[str, float]:
        """``precision``, ``recall``, ``f1`` (micro, in [0, 1]) and ``f1-<label>`` per label."""
        tp, fp, fn = (sum(c.values()) for c in (self.true_positives, self.false_positives, self.false_negatives))
        p, r, f = self._prf(tp, fp, fn)
        out = {"precision": p, "recall": r, "f1": f}
        labels = set(self.true_positives) | set(self.false_positives) | set(self.false_negatives)
        for label in sorted(labels):
            out[f"f1-{label}"] = self._prf(self.true_positives[label], self.false_positives[label], self.false_negatives[label])[2]
        return out
