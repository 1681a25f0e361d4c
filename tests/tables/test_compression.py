"""Issue 36.4: the compression table from a summary (elmoc.tables.compression): role
groups and order, seed spread, the cells as printed, and the figure."""
from __future__ import annotations

import pytest

from elmoc.errors import ConfigError
from elmoc.tables.compression import build_table, draw_figure, role_group, role_order, spread
from elmoc.tables.render import to_markdown


def _row(role, params=1_000_000, nonzero=None, size=4e6, speed=100.0, ratio=1.0, cosine=(1.0, 1.0), scores=None,
         heldout=None, pairs=None):
    return {"role": role, "parameters": params, "nonzero": nonzero or params, "weights_bytes": size / 2,
            "size_bytes": size, "tokens_per_s": speed, "speed_ratio": ratio, "mean_cosine": list(cosine),
            "layer_pairs": pairs or [(i, i) for i in range(len(cosine))], "heldout": heldout,
            "downstream": {"sentiment": {"metric": "accuracy", "test": scores}} if scores else {}}


SUMMARY = {
    "original": "/m/elmo-c", "date": "2026-11-26 04:00 UTC", "tasks": ["sentiment"],
    "task_metrics": {"sentiment": "accuracy"}, "seeds": [1, 2],
    "measured": {"sentences": 10, "tokens": 120, "sentences_file": "/d/heldout.txt", "batch_size": 64, "rounds": 3,
                 "threads": 1, "load_average": [1.0, 2.0, 3.0], "machine": "2 CPUs"},
    "rows": [
        _row("pruned-0.5", nonzero=500_000, speed=100.0, cosine=(1.0, 0.9), scores={"1": 0.70, "2": 0.74},
             heldout={"metric": "cosine", "value": 0.85}),
        _row("original", scores={"1": 0.76, "2": 0.78}, heldout={"metric": "cosine", "value": 0.9}),
        _row("int8", size=1e6, speed=200.0, ratio=2.0, cosine=(1.0, 0.999), scores={"1": 0.77},
             heldout={"metric": "cosine", "value": 0.9, "inherited": True}),
        _row("student", params=250_000, cosine=(1.0, 0.8), pairs=[(0, 0), (1, 2)]),
    ],
}


def test_role_groups_and_order():
    assert [role_group(r) for r in ("original", "bfloat16", "int8", "student-one-layer", "pruned-0.9", "ticket-control")] \
        == ["original", "cast", "quantized", "distilled", "pruned", "ticket"]
    assert role_order(["ticket", "pruned-0.9", "int8", "student", "pruned-0.5", "original", "ticket-control"]) == \
        ["original", "int8", "student", "pruned-0.5", "pruned-0.9", "ticket", "ticket-control"]
    with pytest.raises(ConfigError, match="model role 'pruned' is not one of: original, bfloat16, float16, int8, student"):
        role_group("pruned")


def test_spread_over_seeds():
    s = spread({"1": 0.5, "2": 0.7, "3": 0.6})
    assert s["mean"] == pytest.approx(0.6) and s["sd"] == pytest.approx(0.1) and (s["min"], s["max"], s["n"]) == (0.5, 0.7, 3)
    assert spread({"1": 0.5})["sd"] is None and spread({})["mean"] is None


def test_cells_as_printed():
    table = build_table(SUMMARY)
    rows = {r[0]: r for r in table.rows}
    assert [r[0] for r in table.rows] == ["original", "int8", "student", "pruned-0.5"]
    assert rows["original"][1:] == ["1M", "2.00", "4.0 (1.00×)", "100 (1.00×)", "1.0000, 1.0000", "0.9000",
                                    "77.0 ± 1.4"]
    assert rows["int8"][3:5] == ["1.0 (0.25×)", "200 (2.00×)"]
    assert rows["int8"][6:] == ["0.9000†", "77.0 [seed 1] (+0.0)"]  # one of the two seeds: no spread, named
    assert rows["pruned-0.5"][1] == "1M (0.5M ≠ 0)" and rows["pruned-0.5"][7] == "72.0 ± 2.8 (-5.0)"
    assert rows["student"][5] == "1.0000, 0.8000 (layers 0↔0, 1↔2)" and rows["student"][6:] == [None, None]
    md = to_markdown(table)
    assert "heldout cosine" in md and "† the original's run" in md and "load average 1.00, 2.00, 3.00" in md


def test_figure_with_and_without_scores(tmp_path):
    paths = draw_figure(SUMMARY, tmp_path / "fig")
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in paths)
    assert draw_figure({**SUMMARY, "tasks": []}, tmp_path / "bare")[0].is_file()
