"""Coreference metrics on worked examples from the literature (computed by hand here) and
on the official CoNLL scorer's (v8.01) published test cases with repeated mentions."""
from __future__ import annotations

import pytest

from elmoc.metrics.coref import CorefScores, b_cubed, ceaf_e, file_order, muc, scorer_chains


def spans(*clusters: str) -> list[list[tuple[int, int]]]:
    """Letter clusters -> one-token mentions; a capital letter is the same span as its
    small letter (the scorer test cases' notation for a repeated mention)."""
    return [[(ord(ch.lower()) - ord("a"), ord(ch.lower()) - ord("a")) for ch in cluster] for cluster in clusters]


def rates(fn, key, response):
    c = fn(scorer_chains(key, response))
    return c.precision_num / c.precision_den, c.recall_num / c.recall_den


# Pradhan et al. 2014, worked example: key {a,b,c} {d,e,f,g}; response {a,b} {c,d} {f,g,h,i}
KEY = spans("abc", "defg")
RESPONSE = spans("ab", "cd", "fghi")


def test_muc_pradhan_example():
    # recall: K1 split {a,b}{c} -> 3-2; K2 split {d}{e}{f,g} -> 4-3; over (2 + 3)
    # precision: R1 -> 2-1; R2 {c}{d} -> 2-2; R3 {f,g}{h}{i} -> 4-3; over (1 + 1 + 3)
    p, r = rates(muc, KEY, RESPONSE)
    assert r == pytest.approx(2 / 5) and p == pytest.approx(2 / 5)


def test_b_cubed_pradhan_example():
    # recall = (2^2/3 + 1^2/3 + 1^2/4 + 2^2/4) / 7; precision = (2^2/2 + 1/2 + 1/2 + 2^2/4) / 8
    p, r = rates(b_cubed, KEY, RESPONSE)
    assert r == pytest.approx((4 / 3 + 1 / 3 + 1 / 4 + 1) / 7)
    assert p == pytest.approx((2 + 0.5 + 0.5 + 1) / 8)


def test_ceaf_phi4_pradhan_example():
    # phi4(K1,R1)=4/5, phi4(K2,R3)=4/8 is the best alignment (1.3) vs K1R1+K2R2 = 0.8+1/3
    c = ceaf_e(scorer_chains(KEY, RESPONSE))
    assert c.recall_num == pytest.approx(1.3) and (c.recall_den, c.precision_den) == (2, 3)


# Luo 2005, Figure 1: key {1..5} {6,7} {8,9,A,B,C} (letters a..l here)
LUO_KEY = spans("abcde", "fg", "hijkl")


def test_luo_response_a_needs_the_assignment():
    response = spans("abcde", "fghijkl")
    # CEAF-phi4: {1..5}->R1 = 1, {8..C}->R2 = 2*5/12 beats {6,7}->R2 = 2*2/9
    c = ceaf_e(scorer_chains(LUO_KEY, response))
    assert c.recall_num == pytest.approx(1 + 10 / 12)
    assert (c.recall_den, c.precision_den) == (3, 2)
    # MUC: recall (4 + 1 + 4) / 9 = 1; precision (4 + (7 - 2)) / (4 + 6) = 0.9
    p, r = rates(muc, LUO_KEY, response)
    assert r == pytest.approx(1.0) and p == pytest.approx(0.9)


def test_luo_response_c_all_in_one_and_d_all_singletons():
    one = spans("abcdefghijkl")
    p, r = rates(muc, LUO_KEY, one)
    assert r == pytest.approx(1.0) and p == pytest.approx(9 / 11)
    p, r = rates(b_cubed, LUO_KEY, one)
    assert r == pytest.approx(1.0) and p == pytest.approx((25 + 4 + 25) / 12 / 12)
    singletons = spans(*"abcdefghijkl")
    p, r = rates(b_cubed, LUO_KEY, singletons)
    assert p == pytest.approx(1.0) and r == pytest.approx(3 / 12)
    assert muc(scorer_chains(LUO_KEY, singletons)).recall_num == 0


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
    scores.update(LUO_KEY, spans("abcdefghijkl"))
    out = scores.compute()
    # MUC recall: (2 + 9) / (5 + 9); precision (2 + 9) / (5 + 11)
    assert out["muc_r"] == pytest.approx(11 / 14) and out["muc_p"] == pytest.approx(11 / 16)
    # CEAF: (1.3 + phi4({1..5},all)=10/17 best) / (2 + 3) key clusters
    best_c = max(2 * 5 / 17, 2 * 2 / 14)
    assert out["ceafe_r"] == pytest.approx((1.3 + best_c) / 5)
    assert out["conll_f1"] == pytest.approx((out["muc_f1"] + out["b3_f1"] + out["ceafe_f1"]) / 3)


# reference-coreference-scorers v8.01, test/TestCases.README and test/CorefMetricTestConfig.pm:
# key TC-A = {a} {b,c} {d,e,f}; "B" is a second mention with b's boundaries.
TC_A_KEY = spans("a", "bc", "def")
TC_A_REPEATS = {
    "A7": spans("a", "bcxB", "dy", "z"),   # repeated mention in the same cluster
    "A8": spans("a", "bcx", "dy", "Bz"),   # repeated mention in another cluster
    "A9": spans("a", "bcx", "dy", "BBBBBBBBBBz"),  # b repeated 10 times ("B3 can be canned")
}
# expected [recall, precision] from the scorer's test configuration (identical for A7, A8, A9)
TC_A_EXPECTED = {
    "muc": (1 / 3, 1 / 3),
    "b3": ((10 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 7),
    "ceafe": (0.73333, 0.55),
}


@pytest.mark.parametrize("case", sorted(TC_A_REPEATS))
def test_official_scorer_cases_with_repeated_mentions(case):
    scores = CorefScores()
    scores.update(TC_A_KEY, TC_A_REPEATS[case])
    out = scores.compute()
    for name, (recall, precision) in TC_A_EXPECTED.items():
        assert out[f"{name}_r"] == pytest.approx(recall, abs=1e-5), name
        assert out[f"{name}_p"] == pytest.approx(precision, abs=1e-5), name
    assert out["ceafe_f1"] == pytest.approx(0.62857, abs=1e-5)  # 0.59048 without de-duplication (README)
    assert scores.removed_repeats == (10 if case == "A9" else 1)


def test_repeated_key_mention_keeps_its_last_id_and_non_key_repeats_share_an_id():
    # key span (1,1) in two clusters: one id, attributed to the later cluster
    chains = scorer_chains(spans("ab", "bc"), spans("xX"))
    assert chains.key == [[0, 2], [2, 3]]
    # x is not a key mention: both occurrences kept, sharing one new id
    assert chains.response == [[4, 4]] and chains.removed == 0


def test_file_order_first_start_then_one_token_mentions():
    clusters = [[(5, 5)], [(2, 4), (9, 9)], [(2, 2)], []]
    assert file_order(clusters) == [[(2, 2)], [(2, 4), (9, 9)], [(5, 5)]]
