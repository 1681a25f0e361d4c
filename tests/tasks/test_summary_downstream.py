"""The demo summary's downstream lines: per-variant mean/std over seeds, points vs the FastText
baseline, the baseline and the majority class first (elmoc.tables.summary)."""
import math

import pandas as pd
import pytest

from elmoc.tables.summary import downstream_rows, summary_text


def _runs(rows):
    return pd.DataFrame([{"task": "sentiment", "variant": v, "seed": s, "metric": "accuracy", "test": t,
                          "status": "ok"} for v, s, t in rows])


RUNS = _runs([("elmo-c", 1, 0.70), ("elmo-c", 2, 0.74), ("fasttext", 1, 0.78), ("fasttext", 2, 0.76),
              ("fasttext", 3, 0.80), ("elmo", 1, 0.81)])


def test_rows_arithmetic_and_order():
    df = downstream_rows(RUNS).set_index("variant")
    assert list(df.index) == ["fasttext", "elmo", "elmo-c"]  # baseline, then the paper's order
    assert df.loc["fasttext", "mean"] == pytest.approx(78.0) and df.loc["fasttext", "std"] == pytest.approx(2.0)
    assert df.loc["elmo-c", "mean"] == pytest.approx(72.0) and df.loc["elmo-c", "n"] == 2
    assert df.loc["elmo-c", "vs_fasttext"] == pytest.approx(-6.0)
    assert df.loc["elmo", "vs_fasttext"] == pytest.approx(3.0) and math.isnan(df.loc["elmo", "std"])
    assert math.isnan(df.loc["fasttext", "vs_fasttext"])


def test_without_baseline_no_difference():
    df = downstream_rows(_runs([("elmo-c", 1, 0.5)]))
    assert math.isnan(df.iloc[0]["vs_fasttext"])


def test_summary_lines():
    majority = pd.DataFrame([{"task": "sentiment", "variant": "majority", "seed": 0, "test": 0.4767}])
    lines = summary_text([], RUNS, majority).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Downstream sentiment"))
    assert lines[start + 1:start + 5] == [
        "  majority class   47.67",
        "  fasttext         78.00 ± 2.00 (n=3)",
        "  elmo             81.00 (n=1)  +3.00 vs FastText (n=1 vs 3 seed(s): a single run has no spread; "
        "set tasks.seeds to several)",
        # the standard error of the difference: sqrt(2.83²/2 + 2²/3)
        "  elmo-c           72.00 ± 2.83 (n=2)  -6.00 ± 2.31 vs FastText (n=2 vs 3 seeds)",
    ]
