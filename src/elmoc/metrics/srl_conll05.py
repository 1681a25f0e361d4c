"""The official CoNLL-2005 SRL score (``srl-eval.pl``'s argument semantics) in Python.

The SRL literature reports the CoNLL-2005 script; AllenNLP's span F1 (what the paper
printed, :mod:`elmoc.metrics.span_f1`) differs from it because the script scores
*arguments*, not labelled spans:

* a proposition's phrases are read in order of their start; a phrase typed ``C-X``
  continues the most recent argument of type ``X`` of the same proposition (it is
  appended as one more piece, and the argument now ends where the piece ends);
* a ``C-X`` with no earlier ``X`` (an orphan) becomes an argument of type ``X``, and
  later ``C-X`` pieces continue it;
* ``R-X`` is a type of its own, like every other label;
* a predicted argument is correct when a gold argument has the same first and last
  token, both are single pieces of the same type, or both have several pieces, the
  same type and exactly the same set of pieces; a single-piece and a multi-piece
  argument never match.  Gold arguments are looked up by (first, last) token, so a
  later one with the same extent replaces an earlier one (as the script's table does);
* ``V`` (the given predicate) is left out of the totals; so are sentences without a
  predicate (the script skips a predicted proposition without a gold one).

Precision, recall and F1 are micro-averaged over arguments; per type, an argument
counts under its own type (correct and excess: the predicted one's; missed: the gold
one's).  Agreement with the script on real fixtures is tested in
``tests/metrics/test_srl_conll05.py`` (it runs ``srl-eval.pl`` from the allennlp 0.9.0 wheel).

Input is BIO tags (one list per proposition), read into labelled spans by
:func:`elmoc.metrics.span_f1.spans`; :func:`props_column` writes the same tags in the
script's bracketed props format (``(A0*``, ``*``, ``*)``, ``(V*)``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from elmoc.metrics.base import Metric
from elmoc.metrics.span_f1 import spans

EXCLUDED = frozenset({"V"})
CONTINUATION = "C-"


@dataclass
class Argument:
    """One argument of a proposition: its type and its pieces ``(first, last)`` (inclusive)."""

    type: str
    pieces: list[tuple[int, int]]

    @property
    def extent(self) -> tuple[int, int]:
        return self.pieces[0][0], self.pieces[-1][1]

    @property
    def single(self) -> bool:
        return len(self.pieces) == 1


def arguments(phrases: Iterable[tuple[str, int, int]]) -> list[Argument]:
    """Labelled phrases ``(type, first, last)`` of one proposition -> its arguments.

    Continuations are attached as described in the module docstring; phrases are taken
    in order of their first token (ties: the longer first).
    """
    out: list[Argument] = []
    latest: dict[str, Argument] = {}
    for kind, first, last in sorted(phrases, key=lambda p: (p[1], -p[2])):
        if kind.startswith(CONTINUATION):
            base = kind[len(CONTINUATION):]
            if base in latest:
                latest[base].pieces.append((first, last))
                continue
            kind = base  # orphan continuation: an argument of the base type
        arg = Argument(kind, [(first, last)])
        out.append(arg)
        latest[kind] = arg
    return out


def compare(gold: Sequence[Argument], predicted: Sequence[Argument]) -> tuple[list[str], list[str], list[str]]:
    """Types of the (correct, excess, missed) arguments of one proposition, V included."""
    table = {g.extent: g for g in gold}
    correct, excess = [], []
    for p in predicted:
        g = table.get(p.extent)
        match = (g is not None and g.type == p.type and g.single == p.single
                 and set(g.pieces) == set(p.pieces) and len(set(p.pieces)) == len(p.pieces))
        if match:
            correct.append(p.type)
            del table[p.extent]
        else:
            excess.append(p.type)
    return correct, excess, [g.type for g in table.values()]


def props_column(tags: Sequence[str]) -> list[str]:
    """BIO tags of one proposition -> its column in the script's props format.

    Example: ``B-A0 I-A0 B-V O`` -> ``(A0* *) (V*) *``.
    """
    starts: dict[int, str] = {}
    ends: Counter = Counter()
    for kind, first, last in spans(tags):
        starts[first] = kind
        ends[last] += 1
    return [(f"({starts[i]}" if i in starts else "") + "*" + ")" * ends[i] for i in range(len(tags))]


def _prf(correct: int, excess: int, missed: int) -> tuple[float, float, float]:
    p = correct / (correct + excess) if correct + excess else 0.0
    r = correct / (correct + missed) if correct + missed else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


class Conll05Score(Metric):
    """Argument precision, recall and F1 of ``srl-eval.pl`` (fractions in [0, 1]).

    ``update(predictions, batch)`` (the metric contract): ``predictions`` are predicted
    BIO tag lists, ``batch[gold_key]`` the gold ones and ``batch[predicate_key]`` each
    proposition's predicate index (None: a sentence without predicates, not scored).
    ``add(predicted, gold)`` scores one proposition.
    """

    def __init__(self, gold_key: str = "gold_tags", predicate_key: str = "predicate_indices"):
        self.gold_key = gold_key
        self.predicate_key = predicate_key
        self.reset()

    def reset(self) -> None:
        self.correct: Counter = Counter()
        self.excess: Counter = Counter()
        self.missed: Counter = Counter()
        self.propositions = 0
        self.perfect = 0

    def add(self, predicted: Sequence[str], gold: Sequence[str]) -> None:
        if len(predicted) != len(gold):
            raise ValueError(f"{len(predicted)} predicted tags for {len(gold)} gold tags")
        ok, op, ms = compare(arguments(spans(gold)), arguments(spans(predicted)))
        ok, op, ms = ([t for t in types if t not in EXCLUDED] for types in (ok, op, ms))
        self.correct.update(ok)
        self.excess.update(op)
        self.missed.update(ms)
        self.propositions += 1
        self.perfect += not op and not ms

    def update(self, predictions, batch: dict) -> None:
        golds, predicates = batch[self.gold_key], batch[self.predicate_key]
        for predicted, gold, predicate in zip(predictions, golds, predicates, strict=True):
            if predicate is not None:
                self.add(predicted, gold)

    def counts(self) -> tuple[int, int, int]:
        """(correct, excess, missed) arguments over all types but V: the script's ``Overall`` row."""
        return sum(self.correct.values()), sum(self.excess.values()), sum(self.missed.values())

    def compute(self) -> dict[str, float]:
        """``precision``, ``recall``, ``f1``, ``perfect_props`` and ``f1-<type>`` per type."""
        p, r, f = _prf(*self.counts())
        out = {"precision": p, "recall": r, "f1": f,
               "perfect_props": self.perfect / self.propositions if self.propositions else 0.0}
        for kind in sorted(set(self.correct) | set(self.excess) | set(self.missed)):
            out[f"f1-{kind}"] = _prf(self.correct[kind], self.excess[kind], self.missed[kind])[2]
        return out
