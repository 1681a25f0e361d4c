"""benchmarks/task_durations.py: the GPU duration of a paper task run from CPU timings of the real task
models; the whole script at tiny sizes, and its arithmetic (hours per seed, 24-hour jobs) on known numbers."""
from __future__ import annotations

import json
import math
import os

import pytest
import torch
from benchmark_scripts import load_benchmark

durations = load_benchmark("task_durations")


@pytest.fixture(autouse=True)
def _same_threads_after():
    """The script sets torch's thread count (--threads): later tests get this process's back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_every_task_model_is_timed_with_the_paper_sections(tmp_path):
    out = tmp_path / "durations.json"
    assert durations.main(["--tiny", "--steps", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    sections = durations.task_sections()
    assert set(result["tasks"]) == set(durations.TASKS)
    for name, row in result["tasks"].items():
        trainer = sections[name]["trainer"]
        assert (row["epochs"], row["patience"]) == (trainer["epochs"], trainer["patience"])
        assert row["with_fasttext"] == sections[name]["with_fasttext"]
        layers, dim = durations.TINY_SIZES["features"]
        assert row["input_dim"] == dim + (durations.TINY_SIZES["fasttext"] if row["with_fasttext"] else 0), name
        assert row["batch_size"] == min(4, trainer["batch_size"])  # --tiny caps the paper batch
        for key in ("train_collate_s", "train_model_s", "eval_collate_s", "eval_model_s"):
            assert row[key] > 0, (name, key)
        assert row["train_kernels"] > row["eval_kernels"] > 0, name  # backward and optimizer add kernels
        assert row["train_steps"] == math.ceil(row["dataset"]["train"] / row["batch_size"])
        assert row["low"]["seed_h"] < row["high"]["seed_h"]
        assert (row["low"]["epochs"], row["high"]["epochs"]) == (trainer["patience"] + 1, trainer["epochs"])
    # the paper's inputs: FastText next to the features for BCN, NER and coref, ELMo only for ESIM and SRL
    assert {n for n, r in result["tasks"].items() if r["with_fasttext"]} == {"sst5", "ner", "coref"}
    assert not list(tmp_path.glob("*.hdf5"))  # the synthetic feature files live in a temporary folder


def test_hours_per_seed_follow_from_steps_epochs_and_the_factor():
    m = {"batch_size": 10, "eval_batch_size": 20, "epochs": 7, "patience": 2,
         "train_collate_s": 0.01, "train_model_s": 2.0, "train_kernels": 1000,
         "eval_collate_s": 0.02, "eval_model_s": 4.0, "eval_kernels": 500}
    data = durations.Dataset(train=95, dev=41, train_length=5, dev_length=5)
    e = durations.estimate(m, data, factors=(100.0, 400.0))
    assert (e["train_steps"], e["dev_batches"]) == (10, 3)
    high_step = 0.01 + 2.0 / 100 + 1000 * 20e-6  # slow factor, 20 us a kernel, summed
    high_eval = 0.02 + 4.0 / 100 + 500 * 20e-6
    epoch = 10 * high_step + 3 * high_eval
    assert e["high"]["step_s"] == pytest.approx(high_step)
    assert e["high"]["seed_h"] == pytest.approx((7 * epoch + 3 * high_eval) / 3600)  # max epochs + a test pass
    low_step = 0.01 + max(2.0 / 400, 1000 * 10e-6)  # fast factor, 10 us a kernel, overlapped
    low_eval = 0.02 + max(4.0 / 400, 500 * 10e-6)
    assert e["low"]["seed_h"] == pytest.approx((3 * (10 * low_step + 3 * low_eval) + 3 * low_eval) / 3600)


@pytest.mark.parametrize("hours, jobs, runtime, retries", [
    (0.2, 1, 60, 2),      # at least an hour
    (5.0, 1, 600, 2),     # one job with twice the estimate
    (12.0, 1, 1440, 2),   # twice the estimate is just the limit
    (12.5, 1, 1440, 2),   # over half the limit: full-length jobs, one of them enough
    (100.0, 5, 1440, 6),  # 100 h / 23.5 h per job -> 5 jobs: 4 retries + 2 spare
])
def test_jobs_under_a_24_hour_limit(hours, jobs, runtime, retries):
    assert durations.plan_jobs(hours) == {"jobs": jobs, "runtime": runtime, "retries": retries}


def test_kernels_are_operations_that_write_memory_not_views():
    counter = durations.KernelCounter()
    with counter:
        x = torch.ones(6)          # 1: fills memory
        y = x + 1                  # 2
        z = y.view(2, 3).t()[0]    # views: no kernel
        z.mul_(2)                  # 3: in place, writes
        (z * 3).sum()              # 4, 5
    assert counter.count == 5


def test_compare_python_loop_measures_each_task_with_both_time_loops(tmp_path, monkeypatch):
    from elmoc.nn import alternating_lstm

    if alternating_lstm.native_ops() is None:
        pytest.fail(f"native highway LSTM kernel did not build: {alternating_lstm.native_status()}")
    monkeypatch.delenv("ELMOC_NATIVE_LSTM", raising=False)
    out = tmp_path / "durations.json"
    assert durations.main(["--tiny", "--steps", "1", "--tasks", "srl", "--compare-python-loop",
                           "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["tasks"]
    assert list(rows) == ["srl", "srl (Python loop)"]
    # the native loop: a few operations per step; the Python loop: every pointwise op of every step
    assert rows["srl (Python loop)"]["train_kernels"] > 2 * rows["srl"]["train_kernels"]
    assert "ELMOC_NATIVE_LSTM" not in os.environ  # given back
