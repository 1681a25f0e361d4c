"""benchmarks/highway_lstm_vs_allennlp.py (issue 45): the batch both sides time, the worker protocol
on elmoc's side, and a clear line when the AllenNLP side cannot start. AllenNLP itself is not needed."""
from __future__ import annotations

import argparse
import sys

import pytest
import torch
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("highway_lstm_vs_allennlp")


def _args(**changes):
    values = dict(batch=3, length=5, spread=0, input_dim=4, hidden=6, layers=2, dropout=0.1, threads=1, seed=0,
                  worker=None, device="cpu")
    return argparse.Namespace(**{**values, **changes})


def test_both_sides_get_the_same_batch_and_the_lengths_asked_for(bench):
    x, mask, weights = bench._batch(_args(spread=2, length=6))
    again, mask_again, _ = bench._batch(_args(spread=2, length=6))
    assert torch.equal(x, again) and torch.equal(mask, mask_again) and x.requires_grad
    lengths = mask.sum(1)
    assert lengths.min() >= 4 and lengths.max() <= 8 and x.shape == (3, int(lengths.max()), 4)
    assert weights.shape == (3, int(lengths.max()), 6)
    assert bench._batch(_args())[1].all()  # spread 0: every sequence has --length tokens


@pytest.mark.slow  # starts worker processes
def test_the_elmoc_worker_times_steps_and_a_missing_allennlp_is_one_clear_line(bench, capsys):
    proc, ready = bench._start(sys.executable, "elmoc", _args())
    try:
        assert "elmoc AlternatingHighwayLstm" in ready["ready"] and ready["threads"] == 1
        steps = [bench.side_by_side.step(proc) for _ in range(2)]
        assert all(s["cpu_s"] > 0 and s["wall_s"] > 0 for s in steps)
    finally:
        proc.stdin.close()
        assert proc.wait() == 0
    # this venv has no AllenNLP: its worker dies before it is ready, and the driver says so in one line
    with pytest.raises(SystemExit, match="the allennlp worker .* exited with 1 before it was ready"):
        bench.main(["--allennlp-python", sys.executable, "--batch", "2", "--length", "3", "--input-dim", "4",
                    "--hidden", "4", "--layers", "1", "--rounds", "1"])


@pytest.mark.slow  # starts a worker process
def test_without_allennlp_only_elmoc_s_side_runs(bench, tmp_path, capsys):
    out = tmp_path / "highway.json"
    assert bench.main(["--batch", "2", "--length", "3", "--input-dim", "4", "--hidden", "4", "--layers", "1",
                       "--rounds", "2", "--device", "cpu", "--json", str(out)]) == 0
    import json

    result = json.loads(out.read_text())
    assert list(result["sides"]) == ["elmoc"] and result["allennlp_over_elmoc"] is None
    elmoc = result["sides"]["elmoc"]
    assert elmoc["device"] == "cpu" and elmoc["warmup_s"] > 0 and len(elmoc["steps"]) == 2
    assert result["sizes"]["device"] == "cpu"
    assert "AllenNLP: not run (no --allennlp-python)" in capsys.readouterr().out


def test_a_cuda_request_without_a_gpu_is_refused(bench, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--device", "cuda"])
    assert stop.value.code == 2 and "no CUDA GPU is visible here" in capsys.readouterr().err
