import random

import pytest
from seqeval.metrics import f1_score, precision_score, recall_score

from elmoc.metrics.span_f1 import SpanF1, spans


def test_spans_hand_worked():
    assert spans(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    assert spans(["U-PER", "B-ORG", "I-ORG", "L-ORG", "O"]) == [("PER", 0, 0), ("ORG", 1, 3)]
    # IOB1: I starts a chunk; B only splits two touching chunks of one type
    assert spans(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == [("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)]
    # conlleval is lenient with ill-formed input: a type change or I after O starts a chunk
    assert spans(["O", "I-PER", "I-LOC", "L-LOC"]) == [("PER", 1, 1), ("LOC", 2, 3)]


def test_f1_hand_computed():
    metric = SpanF1()
    metric.add(["B-PER", "L-PER", "O", "U-LOC"], ["B-PER", "L-PER", "O", "U-ORG"])
    metric.add(["O", "O"], ["U-MISC", "O"])
    # predicted {PER, LOC}, gold {PER, ORG, MISC}: tp 1, P 1/2, R 1/3, F1 0.4
    got = metric.compute()
    assert got["precision"] == pytest.approx(0.5) and got["recall"] == pytest.approx(1 / 3)
    assert got["f1"] == pytest.approx(0.4)


def test_ignore_types():
    metric = SpanF1(ignore_types=["V"])
    metric.add(["B-V", "B-ARG0"], ["B-V", "B-ARG1"])
    assert metric.compute()["f1"] == 0.0 and metric.num_gold == 1


def _random_tags(rng, n, prefixes):
    return [rng.choice(["O"] + [f"{p}-{k}" for p in prefixes for k in ("PER", "LOC")]) for _ in range(n)]


@pytest.mark.parametrize("prefixes", ["BI", "BILU"])
def test_agrees_with_seqeval(prefixes):
    """Random (often ill-formed) sequences: our counts equal seqeval's conlleval-mode scores."""
    rng = random.Random(0)
    to_seqeval = {"L": "E", "U": "S"}
    for _ in range(30):
        gold = [_random_tags(rng, rng.randint(1, 12), prefixes) for _ in range(8)]
        pred = [_random_tags(rng, len(g), prefixes) for g in gold]
        metric = SpanF1()
        for p, g in zip(pred, gold):
            metric.add(p, g)
        conv = lambda seqs: [[to_seqeval.get(t[0], t[0]) + t[1:] for t in s] for s in seqs]  # noqa: E731
        got = metric.compute()
        assert got["f1"] == pytest.approx(f1_score(conv(gold), conv(pred)))
        assert got["precision"] == pytest.approx(precision_score(conv(gold), conv(pred)))
        assert got["recall"] == pytest.approx(recall_score(conv(gold), conv(pred)))


# SRL: BIO tags with hyphenated types, V excluded (AllenNLP's SpanBasedF1Measure on SRL)
def test_bio_spans_with_continuation_and_reference_labels():
    tags = ["B-ARG0", "I-ARG0", "B-V", "O", "B-C-ARG1", "I-C-ARG1", "I-ARG2", "B-R-ARG0"]
    assert spans(tags) == [("ARG0", 0, 1), ("V", 2, 2), ("C-ARG1", 4, 5), ("ARG2", 6, 6), ("R-ARG0", 7, 7)]
    assert spans(["O", "O"]) == []
    assert spans(["B-A", "B-A"]) == [("A", 0, 0), ("A", 1, 1)]


def test_srl_counts_exclude_v_and_report_per_label_f1():
    metric = SpanF1("gold_tags", ignore_types=("V",))
    gold = [["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "I-ARG1"], ["B-V", "B-ARGM-TMP"], ["O", "B-V"]]
    pred = [["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "O"], ["B-V", "O"], ["B-ARG2", "B-V"]]
    metric.update(pred, {"gold_tags": gold})
    out = metric.compute()
    # tp = 1 (ARG0); fp = ARG1(3,3) + ARG2 = 2; fn = ARG1(3,4) + ARGM-TMP = 2; V never counted
    assert out["precision"] == pytest.approx(1 / 3) and out["recall"] == pytest.approx(1 / 3)
    assert out["f1"] == pytest.approx(1 / 3)
    assert out["f1-ARG0"] == 1.0 and out["f1-ARG1"] == 0.0 and "f1-V" not in out
    metric.reset()
    assert metric.compute()["f1"] == 0.0
    with pytest.raises(ValueError, match="tags"):
        metric.add(["O"], ["O", "O"])


def test_counting_v_changes_the_score():
    metric = SpanF1()
    metric.add(["B-V", "O"], ["B-V", "B-ARG0"])
    assert metric.compute()["precision"] == 1.0 and metric.compute()["recall"] == 0.5
