"""Coreference metrics: MUC, B-cubed, CEAF-phi4 and their average (the CoNLL F1).

Definitions follow the reference scorer (Pradhan et al. 2014, "Scoring coreference
partitions of predicted mentions: a reference implementation"):

* MUC (Vilain et al. 1995): recall = sum_K (|K| - |p(K)|) / sum_K (|K| - 1), where
  p(K) is the partition of key cluster K by the response clusters (a key mention
  missing from the response is a part of its own); precision swaps key and response.
* B-cubed (Bagga & Baldwin 1998): recall = sum_K sum_R |K n R|^2 / |K| over all key
  mentions; precision swaps the roles.
* CEAF-phi4 (Luo 2005): phi4(K, R) = 2 |K n R| / (|K| + |R|); the best one-to-one
  alignment of key and response clusters maximises the summed phi4; recall divides
  it by the number of key clusters, precision by the number of response clusters.

Scores over a corpus sum numerators and denominators over documents (what the
scorer reports), then divide.  Mentions are any hashable values, typically
inclusive ``(start, end)`` token offsets.  No singleton filtering is done:
CoNLL-2012 keys have no singletons and span-ranking models predict none, so this
equals the official scorer on that data.

The alignment uses :func:`max_weight_assignment`, a hand-written Kuhn-Munkres
(Hungarian) algorithm, because scipy is only a test dependency of elmoc; the test
checks it against ``scipy.optimize.linear_sum_assignment``.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

Cluster = Sequence[Hashable]


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _ratio(num: float, den: float) -> float:
    return 0.0 if den == 0 else num / den


def _mention_to_cluster(clusters: Sequence[Cluster]) -> dict[Hashable, int]:
    index = {}
    for i, cluster in enumerate(clusters):
        for mention in cluster:
            index[mention] = i
    return index


def muc_counts(key: Sequence[Cluster], response: Sequence[Cluster]) -> tuple[float, float]:
    """MUC recall numerator and denominator of ``key`` against ``response``
    (call with the arguments swapped for precision)."""
    where = _mention_to_cluster(response)
    num = den = 0.0
    for cluster in key:
        if not cluster:
            continue
        parts = set()
        unaligned = 0
        for mention in cluster:
            if mention in where:
                parts.add(where[mention])
            else:
                unaligned += 1
        num += len(cluster) - (len(parts) + unaligned)
        den += len(cluster) - 1
    return num, den


def b_cubed_counts(key: Sequence[Cluster], response: Sequence[Cluster]) -> tuple[float, float]:
    """B-cubed recall numerator (sum over key clusters of sum |K n R|^2 / |K|) and
    denominator (number of key mentions); swap the arguments for precision."""
    where = _mention_to_cluster(response)
    num = den = 0.0
    for cluster in key:
        if not cluster:
            continue
        overlap: dict[int, int] = {}
        for mention in cluster:
            if mention in where:
                overlap[where[mention]] = overlap.get(where[mention], 0) + 1
        num += sum(c * c for c in overlap.values()) / len(cluster)
        den += len(cluster)
    return num, den


def max_weight_assignment(weights: Sequence[Sequence[float]]) -> list[tuple[int, int]]:
    """One-to-one assignment of rows to columns maximising the summed weight.

    Kuhn-Munkres with row/column potentials and shortest augmenting paths, O(n^2 m)
    for an n x m matrix: rows are added one at a time; for each, a Dijkstra-like
    search over columns with reduced costs ``cost - u[row] - v[col]`` finds the
    cheapest augmenting path, then potentials are updated so reduced costs stay
    non-negative.  Costs are the negated weights, so minimum cost = maximum weight.

    Args:
        weights: a rectangular matrix (rows x cols), any sizes (including 0).
    Returns:
        ``(row, col)`` pairs, min(rows, cols) of them, sorted by row.
    """
    rows = len(weights)
    cols = len(weights[0]) if rows else 0
    if rows == 0 or cols == 0:
        return []
    transpose = rows > cols
    if transpose:  # the search below needs rows <= cols
        weights = [[weights[r][c] for r in range(rows)] for c in range(cols)]
        rows, cols = cols, rows
    inf = float("inf")
    cost = [[-float(w) for w in row] for row in weights]
    # 1-based arrays; column 0 is a virtual column holding the row being inserted
    u = [0.0] * (rows + 1)
    v = [0.0] * (cols + 1)
    owner = [0] * (cols + 1)  # owner[col] = row assigned to col (0 = free)
    previous = [0] * (cols + 1)
    for row in range(1, rows + 1):
        owner[0] = row
        col0 = 0
        best = [inf] * (cols + 1)
        used = [False] * (cols + 1)
        while True:
            used[col0] = True
            r = owner[col0]
            delta, col1 = inf, 0
            for c in range(1, cols + 1):
                if used[c]:
                    continue
                reduced = cost[r - 1][c - 1] - u[r] - v[c]
                if reduced < best[c]:
                    best[c], previous[c] = reduced, col0
                if best[c] < delta:
                    delta, col1 = best[c], c
            for c in range(cols + 1):
                if used[c]:
                    u[owner[c]] += delta
                    v[c] -= delta
                else:
                    best[c] -= delta
            col0 = col1
            if owner[col0] == 0:
                break
        while col0:  # flip the augmenting path
            col1 = previous[col0]
            owner[col0] = owner[col1]
            col0 = col1
    pairs = [(owner[c] - 1, c - 1) for c in range(1, cols + 1) if owner[c]]
    if transpose:
        pairs = [(c, r) for r, c in pairs]
    return sorted(pairs)


def ceaf_phi4_counts(key: Sequence[Cluster], response: Sequence[Cluster]) -> tuple[float, float, float]:
    """Best summed phi4 similarity, number of key clusters, number of response clusters."""
    key = [set(c) for c in key if c]
    response = [set(c) for c in response if c]
    if not key or not response:
        return 0.0, float(len(key)), float(len(response))
    sim = [[2 * len(k & r) / (len(k) + len(r)) for r in response] for k in key]
    total = sum(sim[i][j] for i, j in max_weight_assignment(sim))
    return total, float(len(key)), float(len(response))


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
    """

    NAMES = ("muc", "b3", "ceafe")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        # per metric: [recall num, recall den, precision num, precision den]
        self.counts = {name: [0.0, 0.0, 0.0, 0.0] for name in self.NAMES}
        self.documents = 0

    def update(self, key: Sequence[Cluster], response: Sequence[Cluster]) -> None:
        for name, fn in (("muc", muc_counts), ("b3", b_cubed_counts)):
            rn, rd = fn(key, response)
            pn, pd = fn(response, key)
            c = self.counts[name]
            c[0] += rn; c[1] += rd; c[2] += pn; c[3] += pd  # noqa: E702
        total, nk, nr = ceaf_phi4_counts(key, response)
        c = self.counts["ceafe"]
        c[0] += total; c[1] += nk; c[2] += total; c[3] += nr  # noqa: E702
        self.documents += 1

    def scores(self) -> dict[str, PRF]:
        out = {}
        for name, (rn, rd, pn, pd) in self.counts.items():
            p, r = _ratio(pn, pd), _ratio(rn, rd)
            out[name] = PRF(p, r, _f1(p, r))
        return out

    def compute(self) -> dict[str, float]:
        result: dict[str, float] = {}
        scores = self.scores()
        for name, s in scores.items():
            result[f"{name}_p"], result[f"{name}_r"], result[f"{name}_f1"] = s.precision, s.recall, s.f1
        result["conll_f1"] = sum(s.f1 for s in scores.values()) / len(scores)
        return result
