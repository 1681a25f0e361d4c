"""SRL span F1 (AllenNLP SpanBasedF1Measure, V excluded) on hand-computed cases."""
from __future__ import annotations

import pytest

from elmoc.metrics.srl import SpanF1, bio_to_spans


def test_bio_to_spans():
    tags = ["B-ARG0", "I-ARG0", "B-V", "O", "B-C-ARG1", "I-C-ARG1", "I-ARG2", "B-R-ARG0"]
    assert bio_to_spans(tags) == [("ARG0", 0, 1), ("V", 2, 2), ("C-ARG1", 4, 5), ("ARG2", 6, 6), ("R-ARG0", 7, 7)]
    assert bio_to_spans(["O", "O"]) == []
    assert bio_to_spans(["B-A", "B-A"]) == [("A", 0, 0), ("A", 1, 1)]


def test_span_f1_excludes_v():
    metric = SpanF1()
    gold = ["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "I-ARG1"]
    pred = ["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "O"]  # ARG0 right, ARG1 wrong boundary
    metric.update(gold, pred)
    metric.update(["B-V", "B-ARGM-TMP"], ["B-V", "O"])  # one miss
    metric.update(["O", "B-V"], ["B-ARG2", "B-V"])  # one false positive
    out = metric.compute()
    # tp = 1 (ARG0); fp = ARG1(3,3) + ARG2 = 2; fn = ARG1(3,4) + ARGM-TMP = 2; V never counted
    assert out["precision"] == pytest.approx(1 / 3)
    assert out["recall"] == pytest.approx(1 / 3)
    assert out["f1"] == pytest.approx(1 / 3)
    assert out["f1-ARG0"] == 1.0 and out["f1-ARG1"] == 0.0
    assert "f1-V" not in out


def test_counting_v_changes_the_score_and_reset():
    metric = SpanF1(ignore=())
    metric.update(["B-V", "B-ARG0"], ["B-V", "O"])
    assert metric.compute()["precision"] == 1.0 and metric.compute()["recall"] == 0.5
    metric.reset()
    assert metric.compute()["f1"] == 0.0
    with pytest.raises(ValueError, match="tags"):
        metric.update(["O"], ["O", "O"])
