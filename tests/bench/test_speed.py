"""Protocols of the speed tables (elmoc.bench.speed): Table 5 as the paper timed it (S3:
data-parallel processes at the largest batch that fits, OOM recorded), the fixed-batch CPU
fallback, and S1 with the GPU's asynchronous execution disabled."""
from __future__ import annotations

import os

import pytest
import torch

from elmoc.bench import speed
from elmoc.bench.report import to_markdown
from elmoc.bench.speed import BenchSettings, run_table5, s1_environment, table5_protocol
from elmoc.errors import ConfigError
from elmoc.tables.speed import table5


def test_table5_protocol_auto_is_s3_on_cuda_and_fixed_on_cpu():
    assert BenchSettings(device="cuda").resolved_table5_protocol() == "s3"
    assert BenchSettings(device="cpu").resolved_table5_protocol() == "fixed"
    assert BenchSettings(device="cpu", table5_protocol="s3").resolved_table5_protocol() == "s3"
    assert BenchSettings(device="cuda", table5_protocol="fixed").resolved_table5_protocol() == "fixed"
    assert BenchSettings(device="cuda", skip_s3=True).resolved_table5_protocol() == "fixed"
    assert BenchSettings.quick(device="cuda").resolved_table5_protocol() == "fixed"  # as before: --quick skips S3
    label = table5_protocol(BenchSettings(device="cuda", world=4, memory_budget_mb=11000))["label"]
    assert "4 data-parallel processes (NCCL" in label and "11000 MB" in label and "OOM" in label
    assert "CPU fallback" in table5_protocol(BenchSettings())["label"]
    with pytest.raises(ConfigError, match="table5_protocol"):
        BenchSettings(table5_protocol="s2")
    with pytest.raises(ConfigError, match="Table 4 row"):
        BenchSettings(table4_rows=["CONT", "ADAPTIVE 1M"])
    with pytest.raises(ConfigError, match="scenarios"):
        BenchSettings(scenarios=["s4"])


def test_s1_disables_asynchronous_cuda_execution():
    """The paper's S1 runs with synchronous CUDA: CUDA_LAUNCH_BLOCKING=1 in the S1 process."""
    assert s1_environment(torch.device("cuda", 0)) == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert s1_environment(torch.device("cpu")) == {}


def _s3_settings(**kw) -> BenchSettings:
    return BenchSettings.quick(**{"table5_protocol": "s3", "world": 2, "table5_encoders": ["LSTM", "GPT"], **kw})


def test_table5_s3_records_oom_as_the_paper(monkeypatch, tmp_path):
    """No batch fits (search) or the data-parallel step runs out (None from the group): OOM,
    no time, no ratio; the table cells say OOM and the caption names the protocol."""
    seen_jobs = []

    def max_batch(model, settings, device):
        return (0, 0.0, []) if model.label.startswith("SAMPLED") else (6, 1.0, [])

    def data_parallel(jobs, settings, device):
        seen_jobs.extend(jobs)
        return {j["label"]: (None if j["label"] == "GPT/ADAPTIVE" else 0.5 if "CONT" in j["label"] else 1.0)
                for j in jobs}

    monkeypatch.setattr(speed, "_max_batch", max_batch)
    monkeypatch.setattr(speed, "_data_parallel_seconds", data_parallel)
    settings = _s3_settings()
    rows = run_table5(settings, tmp_path)
    by = {(r["encoder"], r["layer"]): r for r in rows}
    assert {j["label"] for j in seen_jobs} == {f"{e}/{x}" for e in ("LSTM", "GPT")
                                               for x in ("CONT", "FIXED", "SUBWORD", "ADAPTIVE")}
    assert all(j["batch"] == 6 for j in seen_jobs)
    assert by["LSTM", "SAMPLED"]["oom"] and by["LSTM", "SAMPLED"]["ratio"] is None
    assert by["GPT", "ADAPTIVE"]["oom"] and by["GPT", "ADAPTIVE"]["s_per_mwords"] is None
    assert by["LSTM", "FIXED"]["ratio"] == pytest.approx(2.0) and not by["LSTM", "FIXED"]["oom"]
    assert all(r["protocol"] == "s3" and r["processes"] == 2 for r in rows)
    # seconds per 1M words count the words of both processes
    words = 2 * 6 * 20
    assert by["LSTM", "CONT"]["s_per_mwords"] == pytest.approx(0.5 / words * 1e6)
    result = {"settings": vars(settings), "table5": rows, "table5_protocol": table5_protocol(settings)}
    md = to_markdown(result)
    assert "| SAMPLED | OOM (paper 2.5x) |" in md and "S3 protocol" in md and "gloo on CPU" in md
    t5 = table5(result)
    cells = dict(zip(t5.columns, next(r for r in t5.rows if r[0] == "SAMPLED")))
    assert cells["LSTM"].startswith("OOM") and cells["TRANS LARGE (paper)"] == "OOM"
    assert "S3 protocol" in t5.caption and "S3, 2 x CPU process" in t5.title


def test_old_bench_results_are_labelled_fixed_batch():
    bench = {"settings": {"device": "cpu", "table5_batch": 64, "gpt_length": 512, "world": 2},
             "table5": [{"encoder": "LSTM", "layer": "CONT", "s_per_mwords": 3.0, "ratio": 1.0}]}
    t5 = table5(bench)
    assert "fixed batch 64, 1 process" in t5.title and "not the paper's S3" in t5.caption


@pytest.mark.slow
def test_table5_s3_protocol_runs_on_gloo_processes(tmp_path):
    """The GPU path rehearsed on CPU: max-batch search, then 2 gloo processes per model."""
    settings = _s3_settings(table5_encoders=["LSTM"], memory_budget_mb=400.0)
    rows = run_table5(settings, tmp_path)
    assert [r["layer"] for r in rows] == ["CONT", "FIXED", "SUBWORD", "ADAPTIVE", "SAMPLED"]
    for r in rows:
        assert r["protocol"] == "s3" and r["processes"] == 2 and not r["oom"], r
        assert r["batch"] >= 1 and r["s_per_mwords"] > 0, r
    assert rows[0]["ratio"] == 1.0


@pytest.mark.slow
def test_s1_runs_in_its_own_process_with_launch_blocking(monkeypatch, tmp_path):
    """Where S1 needs an environment (CUDA; faked here on CPU) it runs in a spawned process
    that starts with it, and this process's environment is left as it was."""
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")  # the spawned child would spend ~50 s loading the C++ loop
    monkeypatch.setattr(speed, "s1_environment", lambda device: {"CUDA_LAUNCH_BLOCKING": "1"})
    settings = BenchSettings.quick(table4_rows=["FIXED"], scenarios=["s1"], repeats=1)
    rows = speed.run_table4(settings, tmp_path)
    assert [r["label"] for r in rows] == ["CONT", "FIXED"]
    assert all(r["s1_environment"] == {"CUDA_LAUNCH_BLOCKING": "1"} and r["s1_step_s"] > 0 for r in rows)
    assert rows[1]["s1_ratio"] > 0 and rows[0]["max_batch"] is None and rows[0]["s2_s_per_mwords"] is None
    assert "CUDA_LAUNCH_BLOCKING" not in os.environ


def test_s1_interleave_forces_round_robin_above_the_size_limit(monkeypatch, tmp_path):
    """--s1-interleave: every model's batch-1 calls alternate, even past the parameter limit
    where the models would otherwise be timed one after another (_step_seconds)."""
    from elmoc.bench.scenarios import Scale, build_spec

    models = [build_spec(layer, None, "ELMO", Scale(1 / 32, 0.005), tmp_path) for layer in ("CONT", "FIXED")]
    monkeypatch.setattr(speed, "INTERLEAVE_S1_MAX_PARAMS", 0)
    sequential = []
    monkeypatch.setattr(speed, "_step_seconds", lambda m, *a, **k: sequential.append(m.label) or 1.0)
    got = speed._s1_seconds(models, BenchSettings.quick(repeats=1), torch.device("cpu"))
    assert sequential == ["CONT", "FIXED"] and got == {"CONT": 1.0, "FIXED": 1.0}
    sequential.clear()
    got = speed._s1_seconds(models, BenchSettings.quick(repeats=1, s1_interleave=True), torch.device("cpu"))
    assert sequential == [] and set(got) == {"CONT", "FIXED"} and all(v > 0 for v in got.values())
