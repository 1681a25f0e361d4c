"""Coreference metrics: MUC, B-cubed, CEAF-phi4 and their average (the CoNLL F1),
computed the way the official CoNLL scorer v8.01 (``reference-coreference-scorers``,
Pradhan et al. 2014) computes them, repeated mentions included.

Definitions (``K`` key clusters, ``R`` response clusters):

* MUC (Vilain et al. 1995): recall = sum_K (|K| - |p(K)|) / sum_K (|K| - 1), where
  p(K) is the partition of K by the response (a key mention missing from the
  response is a part of its own); precision swaps key and response.
* B-cubed (Bagga & Baldwin 1998): recall = sum_K sum_R |K n R|^2 / |K| over all key
  mentions; precision swaps the roles.
* CEAF-phi4 (Luo 2005): phi4(K, R) = 2 |K n R| / (|K| + |R|); the best one-to-one
  alignment of key and response clusters (``scipy.optimize.linear_sum_assignment``)
  maximises the summed phi4; recall divides it by the number of key clusters,
  precision by the number of response clusters.

Repeated mentions (one span in several places) are handled as the scorer's
``IdentifMentions`` does, in the order the scorer reads clusters from a file
(:func:`file_order`: by the token where a cluster's first mention starts):

* every key mention gets an id; a span repeated in the key keeps the id of its
  last occurrence (the scorer only prints "Repeated mention in the key"), so it
  counts once per occurrence but is the same mention everywhere;
* a response mention whose span is a key mention already matched by an earlier
  response mention is removed ("Repeated mention in the response"); clusters left
  empty are dropped;
* response mentions that are not key mentions get new ids; a repeated one shares
  its id (it is not removed).

The scorer refuses to score a file with more than 10 removed response mentions;
this metric scores anyway (a span-ranking model never repeats a span).  Scores
over a corpus sum numerators and denominators over documents (what the scorer
reports), then divide.  No singleton filtering is done (the scorer's default).
Mentions are inclusive ``(start, end)`` token offsets.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Mention = tuple[int, int]
Cluster = Sequence[Mention]


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _ratio(num: float, den: float) -> float:
    return 0.0 if den == 0 else num / den


def file_order(clusters: Sequence[Cluster]) -> list[list[Mention]]:
    """Non-empty clusters in the order the scorer numbers them when reading a CoNLL file.

    The scorer numbers a cluster when its id first appears, i.e. at the token where
    its earliest mention starts; on one token, one-token mentions ``(N)`` are read
    before openings ``(N``; remaining ties keep the given order (the order the items
    are written in the cell).
    """
    def rank(item: tuple[int, list[Mention]]) -> tuple[int, int, int]:
        index, cluster = item
        first = min(start for start, _ in cluster)
        one_token = any(start == end == first for start, end in cluster)
        return first, 0 if one_token else 1, index

    nonempty = [(i, [tuple(m) for m in c]) for i, c in enumerate(clusters) if len(c)]
    return [cluster for _, cluster in sorted(nonempty, key=rank)]


@dataclass
class Chains:
    """Key and response clusters as mention ids, after the scorer's de-duplication.

    Attributes:
        key: key clusters of mention ids (a repeated key span has one id throughout).
        response: response clusters of ids, repeated key mentions removed, no empty cluster.
        removed: number of response mentions removed as repeats.
    """

    key: list[list[int]]
    response: list[list[int]]
    removed: int


def scorer_chains(key: Sequence[Cluster], response: Sequence[Cluster]) -> Chains:
    """The scorer's mention ids of one document (see the module docstring)."""
    key, response = file_order(key), file_order(response)
    ids: dict[Mention, int] = {}
    for n, mention in enumerate(m for cluster in key for m in cluster):
        ids[mention] = n  # a repeated key span: the last occurrence's id wins
    next_id = sum(len(c) for c in key)
    matched: dict[Mention, int] = {}
    kept: list[list[Mention]] = []
    removed = 0
    for cluster in response:
        out = []
        for mention in cluster:
            if mention in matched:
                removed += 1
                continue
            if mention in ids:
                matched[mention] = ids[mention]
            out.append(mention)
        if out:
            kept.append(out)
    for cluster in kept:
        for mention in cluster:
            if mention not in matched:
                matched[mention] = next_id
                next_id += 1
    return Chains([[ids[m] for m in c] for c in key], [[matched[m] for m in c] for c in kept], removed)


def _cluster_of(chains: list[list[int]]) -> dict[int, int]:
    """Id -> index of the last chain holding it (the scorer's ``Indexa``)."""
    return {m: i for i, chain in enumerate(chains) for m in chain}


@dataclass
class Counts:
    """Recall numerator/denominator and precision numerator/denominator of one metric."""

    recall_num: float = 0.0
    recall_den: float = 0.0
    precision_num: float = 0.0
    precision_den: float = 0.0

    def add(self, other: "Counts") -> None:
        self.recall_num += other.recall_num
        self.recall_den += other.recall_den
        self.precision_num += other.precision_num
        self.precision_den += other.precision_den


def muc(chains: Chains) -> Counts:
    """Correct links: in each response cluster, every mention but the last of each key cluster."""
    where = _cluster_of(chains.key)
    correct = 0
    for cluster in chains.response:
        per_key = Counter(where[m] for m in cluster if m in where)
        correct += sum(n - 1 for n in per_key.values())
    key_links = sum(len(c) - 1 for c in chains.key)
    response_links = sum(len(c) - 1 for c in chains.response)
    return Counts(correct, key_links, correct, response_links)


def b_cubed(chains: Chains) -> Counts:
    """Per response mention: |R n K(m)| / |R| (precision) and / |K(m)| (recall)."""
    where = _cluster_of(chains.key)
    key_sets = [set(c) for c in chains.key]
    recall = precision = 0.0
    for cluster in chains.response:
        for m in cluster:
            if m not in where:
                continue  # no key cluster: adds 0 to both numerators
            k = where[m]
            common = sum(1 for r in cluster if r in key_sets[k])
            precision += common / len(cluster)
            recall += common / len(chains.key[k])
    return Counts(recall, sum(len(c) for c in chains.key), precision, sum(len(c) for c in chains.response))


def ceaf_e(chains: Chains) -> Counts:
    """Best one-to-one summed phi4 over the number of key / response clusters."""
    from scipy.optimize import linear_sum_assignment  # here: ~1 s of import every `elmoc task` would pay

    key, response = chains.key, chains.response
    total = 0.0
    if key and response:
        response_sets = [set(r) for r in response]
        phi4 = np.array([[2 * sum(1 for m in k if m in r) / (len(k) + len(r)) for r in response_sets]
                         for k in key])
        rows, cols = linear_sum_assignment(phi4, maximize=True)
        total = float(phi4[rows, cols].sum())
    return Counts(total, len(key), total, len(response))


METRICS = {"muc": muc, "b3": b_cubed, "ceafe": ceaf_e}


@dataclass
class PRF:
    precision: float
    recall: float
    f1: float


class CorefScores:
    """Corpus-level accumulator of MUC, B-cubed and CEAF-phi4.

    ``update(key_clusters, response_clusters)`` once per document; ``compute()``
    gives ``{muc_p, muc_r, muc_f1, b3_..., ceafe_..., conll_f1}`` in [0, 1], where
    ``conll_f1`` is the average of the three F1s (the CoNLL-2012 official score).
    ``removed_repeats`` counts response mentions removed as repeats.
    """

    NAMES = tuple(METRICS)

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.counts = {name: Counts() for name in self.NAMES}
        self.documents = 0
        self.removed_repeats = 0

    def update(self, key: Sequence[Cluster], response: Sequence[Cluster]) -> None:
        chains = scorer_chains(key, response)
        for name, fn in METRICS.items():
            self.counts[name].add(fn(chains))
        self.removed_repeats += chains.removed
        self.documents += 1

    def scores(self) -> dict[str, PRF]:
        out = {}
        for name, c in self.counts.items():
            p, r = _ratio(c.precision_num, c.precision_den), _ratio(c.recall_num, c.recall_den)
            out[name] = PRF(p, r, _f1(p, r))
        return out

    def compute(self) -> dict[str, float]:
        result: dict[str, float] = {}
        scores = self.scores()
        for name, s in scores.items():
            result[f"{name}_p"], result[f"{name}_r"], result[f"{name}_f1"] = s.precision, s.recall, s.f1
        result["conll_f1"] = sum(s.f1 for s in scores.values()) / len(scores)
        return result
