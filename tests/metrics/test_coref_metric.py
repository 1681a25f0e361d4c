"""Coreference metrics on worked examples from the literature, computed by hand here."""
from __future__ import annotations

import itertools
import random

import pytest

from elmoc.metrics.coref import (
    CorefScores,
    b_cubed_counts,
    ceaf_phi4_counts,
    max_weight_assignment,
    muc_counts,
)


def prf(counts_fn, key, response):
    rn, rd = counts_fn(key, response)[:2]
    pn, pd = counts_fn(response, key)[:2]
    return pn / pd, rn / rd


# Pradhan et al. 2014, worked example: key {a,b,c} {d,e,f,g}; response {a,b} {c,d} {f,g,h,i}
KEY = [["a", "b", "c"], ["d", "e", "f", "g"]]
RESPONSE = [["a", "b"], ["c", "d"], ["f", "g", "h", "i"]]


def test_muc_pradhan_example():
    # recall: K1 split {a,b}{c} -> 3-2; K2 split {d}{e}{f,g} -> 4-3; over (2 + 3)
    # precision: R1 -> 2-1; R2 {c}{d} -> 2-2; R3 {f,g}{h}{i} -> 4-3; over (1 + 1 + 3)
    p, r = prf(muc_counts, KEY, RESPONSE)
    assert r == pytest.approx(2 / 5) and p == pytest.approx(2 / 5)


def test_b_cubed_pradhan_example():
    # recall = (2^2/3 + 1^2/3 + 1^2/4 + 2^2/4) / 7; precision = (2^2/2 + 1/2 + 1/2 + 2^2/4) / 8
    p, r = prf(b_cubed_counts, KEY, RESPONSE)
    assert r == pytest.approx((4 / 3 + 1 / 3 + 1 / 4 + 1) / 7)
    assert p == pytest.approx((2 + 0.5 + 0.5 + 1) / 8)


def test_ceaf_phi4_pradhan_example():
    # phi4(K1,R1)=4/5, phi4(K2,R3)=4/8 is the best alignment (1.3) vs K1R1+K2R2 = 0.8+1/3
    total, nk, nr = ceaf_phi4_counts(KEY, RESPONSE)
    assert total == pytest.approx(1.3)
    assert (total / nk, total / nr) == (pytest.approx(0.65), pytest.approx(1.3 / 3))


# Luo 2005, Figure 1: key {1..5} {6,7} {8,9,A,B,C}
LUO_KEY = [list("12345"), list("67"), list("89ABC")]


def test_luo_response_a_needs_the_assignment():
    response = [list("12345"), list("6789ABC")]
    # CEAF-phi4: {1..5}->R1 = 1, {8..C}->R2 = 2*5/12 beats {6,7}->R2 = 2*2/9
    total, nk, nr = ceaf_phi4_counts(LUO_KEY, response)
    assert total == pytest.approx(1 + 10 / 12)
    assert nk == 3 and nr == 2
    # MUC: recall (4 + 1 + 4) / 9 = 1; precision (4 + (7 - 2)) / (4 + 6) = 0.9
    p, r = prf(muc_counts, LUO_KEY, response)
    assert r == pytest.approx(1.0) and p == pytest.approx(0.9)


def test_luo_response_c_all_in_one_and_d_all_singletons():
    one = [list("123456789ABC")]
    p, r = prf(muc_counts, LUO_KEY, one)
    assert r == pytest.approx(1.0) and p == pytest.approx(9 / 11)
    p, r = prf(b_cubed_counts, LUO_KEY, one)
    assert r == pytest.approx(1.0) and p == pytest.approx((25 + 4 + 25) / 12 / 12)
    singletons = [[m] for m in "123456789ABC"]
    p, r = prf(b_cubed_counts, LUO_KEY, singletons)
    assert p == pytest.approx(1.0) and r == pytest.approx(3 / 12)
    assert muc_counts(LUO_KEY, singletons)[0] == 0


def test_perfect_and_empty_response():
    scores = CorefScores()
    scores.update(KEY, KEY)
    assert scores.compute()["conll_f1"] == pytest.approx(1.0)
    scores = CorefScores()
    scores.update(KEY, [])
    out = scores.compute()
    assert out["conll_f1"] == 0.0 and out["muc_p"] == 0.0


def test_corpus_level_sums_counts_over_documents():
    scores = CorefScores()
    scores.update(KEY, RESPONSE)
    scores.update(LUO_KEY, [list("123456789ABC")])
    out = scores.compute()
    # MUC recall: (2 + 9) / (5 + 9); precision (2 + 9) / (5 + 11)
    assert out["muc_r"] == pytest.approx(11 / 14) and out["muc_p"] == pytest.approx(11 / 16)
    # CEAF: (1.3 + phi4({1..5},all)=10/17 best) / (2 + 3) key clusters
    best_c = max(2 * 5 / 17, 2 * 2 / 14)
    assert out["ceafe_r"] == pytest.approx((1.3 + best_c) / 5)
    assert out["conll_f1"] == pytest.approx((out["muc_f1"] + out["b3_f1"] + out["ceafe_f1"]) / 3)


def brute_force(weights):
    rows, cols = len(weights), len(weights[0])
    if rows <= cols:
        return max(sum(weights[i][p[i]] for i in range(rows)) for p in itertools.permutations(range(cols), rows))
    return max(sum(weights[p[j]][j] for j in range(cols)) for p in itertools.permutations(range(rows), cols))


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 5), (5, 2), (4, 6), (6, 6)])
def test_assignment_is_optimal_and_one_to_one(shape):
    rng = random.Random(sum(shape))
    for _ in range(20):
        w = [[rng.choice([0.0, rng.random()]) for _ in range(shape[1])] for _ in range(shape[0])]
        pairs = max_weight_assignment(w)
        assert len(pairs) == min(shape)
        assert len({r for r, _ in pairs}) == len(pairs) == len({c for _, c in pairs})
        assert sum(w[r][c] for r, c in pairs) == pytest.approx(brute_force(w))


def test_assignment_matches_scipy():
    scipy_opt = pytest.importorskip("scipy.optimize")
    import numpy as np

    rng = np.random.default_rng(0)
    w = rng.random((12, 17))
    rows, cols = scipy_opt.linear_sum_assignment(w, maximize=True)
    ours = max_weight_assignment(w.tolist())
    assert sum(w[r, c] for r, c in ours) == pytest.approx(float(w[rows, cols].sum()))
    assert max_weight_assignment([]) == []
