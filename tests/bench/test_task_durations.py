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


def test_measured_gpu_hours_take_the_step_times_as_they_are():
    """--device cuda: no factor, no assumed launch time; the low bound a step of max(collate, model)
    (collate built ahead) for patience + 1 epochs, the high bound their sum for the maximum epochs."""
    m = {"batch_size": 10, "eval_batch_size": 20, "epochs": 7, "patience": 2,
         "train_collate_s": 0.01, "train_model_s": 0.03, "train_kernels": 1000,
         "eval_collate_s": 0.02, "eval_model_s": 0.01, "eval_kernels": 500}
    data = durations.Dataset(train=95, dev=41, train_length=5, dev_length=5)
    e = durations.estimate(m, data, factors=None)
    assert e["gpu_hours"] == "measured" and durations.estimate(m, data, (1.0, 2.0))["gpu_hours"] == "derived"
    assert e["low"]["step_s"] == pytest.approx(0.03) and e["low"]["eval_batch_s"] == pytest.approx(0.02)
    assert e["high"]["step_s"] == pytest.approx(0.04) and e["high"]["eval_batch_s"] == pytest.approx(0.03)
    assert e["high"]["seed_h"] == pytest.approx((7 * (10 * 0.04 + 3 * 0.03) + 3 * 0.03) / 3600)
    assert e["low"]["seed_h"] == pytest.approx((3 * (10 * 0.03 + 3 * 0.02) + 3 * 0.02) / 3600)
    for bound in ("low", "high"):  # collate's share: of the step that waits for it, and what prefetch leaves
        assert e[bound]["train_collate_share"] == pytest.approx(0.25)
        assert e[bound]["train_collate_exposed"] == 0.0  # 10 ms of collate hide behind 30 ms of model
        assert e[bound]["eval_collate_exposed"] == pytest.approx(0.5)  # 20 ms behind 10: 10 ms exposed


def test_the_cuda_comparison_measures_compiled_eager_and_reference_loops(tmp_path, monkeypatch):
    """On CUDA --compare-python-loop measures SRL with its cells eager and with the reference autograd
    loop (ELMOC_NATIVE_LSTM changes nothing there); the same switches run here on the CPU, where each
    loop makes a different number of operations, and the loop choice is given back after."""
    from elmoc.nn import alternating_lstm

    if alternating_lstm.native_ops() is None:
        pytest.fail(f"native highway LSTM kernel did not build: {alternating_lstm.native_status()}")
    monkeypatch.delenv("ELMOC_NATIVE_LSTM", raising=False)
    monkeypatch.setitem(durations.COMPARED_LOOPS, "cpu", durations.COMPARED_LOOPS["cuda"])
    chosen = alternating_lstm.time_loops
    out = tmp_path / "durations.json"
    assert durations.main(["--tiny", "--steps", "1", "--tasks", "srl", "--compare-python-loop",
                           "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["tasks"]
    assert list(rows) == ["srl", "srl (eager cells)", "srl (Python loop)"]
    counts = [rows[k]["train_kernels"] for k in rows]
    assert len(set(counts)) == 3 and min(counts[1:]) > 2 * counts[0], counts  # C++ loop; two Python loops
    assert alternating_lstm.time_loops is chosen


def test_a_cuda_request_without_a_gpu_or_an_unknown_device_is_one_line(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert durations.main(["--tiny", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU is visible here" in err and "--device cpu" in err
    assert durations.main(["--tiny", "--device", "meta"]) == 2
    assert "only cpu and cuda" in capsys.readouterr().err


def test_task_sections_without_snakemake_are_the_workflow_s(monkeypatch):
    """The GPU machine has no Snakemake: each section is then checked and completed by its task class
    alone, which gives config/paper.yaml's task sections as the workflow's schema validation does."""
    import sys

    validated = durations.task_sections()
    monkeypatch.setitem(sys.modules, "snakemake.utils", None)  # `from snakemake.utils import ...` fails
    alone = durations.task_sections()
    assert {k: v for k, v in alone.items() if isinstance(v, dict) and "type" in v} == {
        k: v for k, v in validated.items() if isinstance(v, dict) and "type" in v}
    assert set(durations.TASKS) <= set(alone)
