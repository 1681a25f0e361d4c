"""benchmarks/gpu_check.py (issue 33): the GPU check's driver, its FLOP count and its CPU rehearsal."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from benchmark_scripts import BENCHMARKS, load_benchmark

gpu_check = load_benchmark("gpu_check")
SCRIPT = BENCHMARKS / "gpu_check.sh"


def run_check(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})


def test_a_cuda_request_without_a_gpu_is_refused_in_one_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = run_check("--out", str(tmp_path / "out"), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "needs a CUDA GPU" in proc.stderr
    assert "--device cpu --tiny" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_steps_and_groups():
    assert gpu_check.parse_args(["--steps", "embed,device"]).step_list == ["device", "embed"]  # the plan's order
    assert gpu_check.parse_args(["--steps", "B"]).step_list == list(gpu_check.GROUPS["B"])
    assert sorted(s for g in gpu_check.GROUPS.values() for s in g if s != "device") == sorted(
        s for s in gpu_check.STEPS if s != "device")  # the three device commands run every step once
    for steps in gpu_check.GROUPS.values():  # each fits the device tool's 10-minute command
        assert sum(gpu_check.LIMITS[s][0] for s in steps) <= 580
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--steps", "nope"])


def test_elmo_c_flops_are_the_bench_formula_less_the_frozen_input_gradient():
    """ELMo-C's count equals elmoc.bench's elmo_step_flops, except the input projection of the frozen
    FastText table, which has no input gradient (2x its forward, not 3x)."""
    from elmoc.bench.measure import elmo_step_flops

    m = gpu_check.throughput_models(tiny=False)[0]
    assert m["name"] == "ELMo-C" and m["batch"] == 768 and not m["joint"]
    tokens = 768 * 20
    bench = elmo_step_flops(tokens, 300, 4096, 512, 2, 300)
    assert gpu_check.step_flops(m) == pytest.approx(bench - 2 * 300 * 512 * tokens, rel=1e-12)
    assert 225e6 < gpu_check.step_flops(m) / tokens < 230e6  # ~228 MFLOP per token


def test_adaptive_flops_count_the_tail_tokens_and_joint_models_both_directions():
    models = {m["name"]: m for m in gpu_check.throughput_models(tiny=False)}
    a = models["ELMo-A"]
    base = gpu_check.step_flops(a, {})
    # one token in the first tail (cutoffs 100000, 600000; div 4): projection 512 -> 128, then 500,000 words
    assert gpu_check.step_flops(a, {1: 1}) - base == 3 * (2 * 512 * 128 + 2 * 128 * 500_000)
    elmo = models["ELMo"]
    assert elmo["joint"] and elmo["batch"] == 128 and elmo["spec"]["output"]["num_samples"] == 8192
    single = dict(elmo, joint=False)
    assert gpu_check.step_flops(elmo) == pytest.approx(2 * gpu_check.step_flops(single))


def test_a_step_past_its_limit_is_recorded_and_the_rest_not_lost(tmp_path):
    """--budget-s 8 gives the resume step 8 s (it needs four trainer processes, each importing torch),
    so `timeout` stops it and the driver records that; the next step finds the budget spent; the summary
    is written all the same."""
    out = tmp_path / "out"
    proc = run_check("--device", "cpu", "--tiny", "--steps", "resume,throughput", "--budget-s", "8", "--out",
                     str(out), "--scratch", str(tmp_path / "scratch"), timeout=120)
    assert proc.returncode == 1
    status = json.loads((out / "summary.json").read_text())["status"]
    assert status["resume"]["status"].startswith("timed out") and 5 <= status["resume"]["limit_s"] <= 8
    assert status["throughput"]["status"] == "not run: budget spent"
    assert not (out / "resume.json").exists()
    assert "| resume | timed out" in (out / "summary.md").read_text()
    time.sleep(2)  # the stopped trainer saves and exits (SIGTERM from timeout, passed on by with-gpus)
    assert not processes_using(tmp_path / "scratch"), "a step's processes outlived its time limit"


def processes_using(path: Path) -> list[int]:
    """PIDs whose command line names ``path`` or whose working directory is under it."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (str(path).encode() in (entry / "cmdline").read_bytes()
                                         or os.readlink(entry / "cwd").startswith(str(path))):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_summarize_merges_the_device_commands_and_renders_what_it_can(tmp_path):
    """--summarize over the folders of several runs (the three device commands' unpacked): every step from
    the folder that ran it, statuses from <step>.status.json, every folder's device named when they
    differ, and a result it cannot render named, not fatal."""
    def device(name):
        return {"device": "cuda", "name": name, "memory_gib": 79.2, "multiprocessors": 132, "driver": "580.159.04",
                "torch": "2.11.0", "cuda": "13.0", "cudnn": 91000, "commit": "abc1234", "matmul_size": 8192,
                "matmul_peak_flops": {"fp32": 5.0e13, "tf32": 4.0e14, "bf16": 7.9e14}}

    a, b = tmp_path / "gc-A", tmp_path / "gc-B"
    for folder, name in ((a, "NVIDIA H100 80GB HBM3"), (b, "NVIDIA H200")):
        folder.mkdir()
        (folder / "device.json").write_text(json.dumps(device(name)))
        (folder / "device.status.json").write_text(json.dumps({"status": "ok", "seconds": 12.0, "limit_s": 40}))
    (a / "embed.status.json").write_text(json.dumps({"status": "timed out", "seconds": 330, "limit_s": 330}))
    (b / "table5.json").write_text(json.dumps({"command": "x"}))  # no rows
    (b / "table5.status.json").write_text(json.dumps({"status": "ok", "seconds": 100.0, "limit_s": 200}))
    out = tmp_path / "merged"
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py"), "--summarize", str(a), str(b),
                           "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    md = (out / "summary.md").read_text()
    assert "NVIDIA H100 80GB HBM3" in md and "driver 580.159.04" in md and "bf16 790.0 TFLOP/s" in md
    assert "| embed | timed out | 330 | 330 |" in md and "| table5 | ok | 100 | 200 |" in md
    assert "**table5**: its result could not be rendered" in md
    assert "ran on different devices: NVIDIA H100 80GB HBM3" in md and "NVIDIA H200 (driver" in md
    merged = json.loads((out / "summary.json").read_text())
    assert merged["status"]["table5"]["from"] == str(b) and len(merged["devices"]) == 2


@pytest.mark.slow
def test_cpu_rehearsal_runs_every_step(tmp_path):
    """`gpu_check.sh --device cpu --tiny`: every step at tiny sizes (2 min 11 s on a quiet 2-core VM),
    as on the GPU except what needs CUDA: the suite's CUDA variants skip, the resume is exact, the
    tables, the three models' throughput in fp32/TF32/bf16 (and bf16 on the old LSTM path), the profile in
    every precision with the operator and cast counts (host syncs need CUDA), the
    embedding with its 16-bit copies and the task stage (issue 45: the five task models, SRL's loops,
    its encoder alone; AllenNLP is not here)."""
    out = tmp_path / "out"
    proc = run_check("--device", "cpu", "--tiny", "--out", str(out), "--scratch", str(tmp_path / "scratch"),
                     timeout=2400)
    logs = {p.name: p.read_text()[-3000:] for p in out.glob("*.log")}
    assert proc.returncode == 0, (proc.stdout, logs)
    summary = json.loads((out / "summary.json").read_text())
    assert {k: s["status"] for k, s in summary["status"].items()} == {k: "ok" for k in gpu_check.STEPS}
    r = summary["results"]
    assert set(r["device"]["matmul_peak_flops"]) == {"fp32", "tf32", "bf16"}
    assert r["tests"]["counts"] == {"skipped": len(r["tests"]["cases"])} and len(r["tests"]["cases"]) >= 7
    resume = r["resume"]
    assert resume["stop_exit"] == 75 and resume["stopped_at_step"] < resume["sizes"]["steps"]
    assert resume["resumed"]["bit_equal"] and resume["tolerance"] == 0.0
    assert len(r["table4"]["rows"]) == 9 and all(x["s1_step_s"] and x["s2_s_per_mwords"] for x in r["table4"]["rows"])
    assert len(r["table5"]["rows"]) == 30
    rows = r["throughput"]["rows"]
    assert [(x["model"], x["precision"], x["path"]) for x in rows] == [  # every precision, the old bf16 path once
        (m, p, path) for m in ("ELMo-C", "ELMo-A", "ELMo") for p, path in (
            ("fp32", "new"), ("tf32", "new"), ("bf16", "new"), ("bf16", "old"))]
    assert all(x["tokens_per_s"] > 0 and 0 < x["mfu"] and x["peak_mem_gib"] is None for x in rows)
    assert r["profile"]["top"] and r["profile"]["host_syncs"]["exit"] == 2  # host syncs need CUDA
    assert set(r["profile"]["by_precision"]) == {"fp32", "tf32", "bf16"}
    counts = {(c["model"], c["precision"], c["path"], c["bptt"]): c for c in r["profile"]["counts"]}
    for model in ("ELMo-C", "ELMo"):  # the new bf16 path: casts per step independent of bptt, products in bf16
        short, long = counts[(model, "bf16", "new", 10)], counts[(model, "bf16", "new", 20)]
        assert short["casts"] == long["casts"] and long["mm_bf16"] > short["mm_bf16"]
        assert counts[(model, "bf16", "old", 20)]["mm_bf16"] == counts[(model, "bf16", "old", 10)]["mm_bf16"]
    embed = r["embed"]
    assert embed["elmoc"]["device_vs_cpu"]["max_abs_diff"] == 0.0  # "device" is the CPU here
    assert set(embed["copies"]) == {"float16", "bfloat16"}
    assert all(0 < c["max_abs_diff_vs_float32"] < 0.1 for c in embed["copies"].values())
    fused = r["fused"]  # the fused cell (torch.compile) in every precision, and its operator counts
    runs = [(p, "fused") for p in ("fp32", "tf32", "bf16")] + [("bf16", "layer")]  # the whole-layer graph: bf16 in --tiny
    assert [(x["precision"], x["path"]) for x in fused["rows"]] == runs
    assert all(x["tokens_per_s"] > 0 for x in fused["rows"])
    assert [(c["precision"], c["path"]) for c in fused["counts"]] == runs and all(c["ops"] > 0 for c in fused["counts"])
    md = (out / "summary.md").read_text()
    for heading in ("**Suite on the device**", "**Resume**", "**Table 4**", "**Table 5**", "**Training throughput**",
                    "**Profile of the ELMo-C step**", "**Embedding**", "**ELMo-C with the fused cell**"):
        assert heading in md
    check_tasks_rehearsal(r["tasks"], md)


def check_tasks_rehearsal(tasks: dict, md: str) -> None:
    """The tasks step of a CPU rehearsal: every task model timed with the contiguous float16 features,
    SRL again beside its Python loop, SRL's encoder alone without AllenNLP, and its summary lines."""
    durations = tasks["durations"]
    assert list(durations["tasks"]) == list(gpu_check.TASK_NAMES) and durations["device"] == "cpu"
    assert (durations["features_layout"], durations["features_dtype"]) == ("contiguous", "float16")
    assert all(t["train_model_s"] > 0 and t["train_kernels"] > 0 and t["high"]["seed_h"] > 0
               for t in durations["tasks"].values())
    assert list(tasks["srl_loops"]["tasks"]) == ["srl", "srl (Python loop)"]
    highway = tasks["highway"]
    assert list(highway["sides"]) == ["elmoc"] and highway["allennlp_over_elmoc"] is None
    assert highway["allennlp_skipped"] and highway["sides"]["elmoc"]["best"]["wall_s"] > 0
    assert "**Task stage on the device**" in md and "| srl (Python loop) | 4 |" in md
    assert "SRL's encoder alone" in md and "AllenNLP not run (no Python with AllenNLP here" in md


def test_the_tasks_summary_of_a_gpu_run(tmp_path):
    """What the tasks step renders from a CUDA run: measured hours, the first (compiling) step, SRL's three
    loops from one process, and the ratio to AllenNLP when it ran (figures made up for the test)."""
    durations = load_benchmark("task_durations")

    def row(model_s: float, kernels: int) -> dict:
        m = {"batch_size": 80, "eval_batch_size": 80, "epochs": 500, "patience": 200, "train_collate_s": 0.004,
             "train_model_s": model_s, "train_kernels": kernels, "eval_collate_s": 0.002, "eval_model_s": model_s / 2,
             "eval_kernels": kernels // 2, "train_warmup_s": 31.0, "eval_warmup_s": 12.0}
        return {**m, **durations.estimate(m, durations.DATASETS["srl"], None)}

    tasks = {"durations": {"command": "python benchmarks/task_durations.py --device cuda", "steps": 3, "device": "cuda",
                           "tasks": {"srl": {**row(0.040, 1500), "train_gpu_kernels": 1480}}},
             "srl_loops": {"command": "python benchmarks/task_durations.py --compare-python-loop", "device": "cuda",
                           "tasks": {"srl": row(0.041, 1500), "srl (eager cells)": row(0.100, 11000),
                                     "srl (Python loop)": row(0.160, 15819)}},
             "highway": {"command": "python benchmarks/highway_lstm_vs_allennlp.py --device cuda",
                         "sizes": {"rounds": 5, "batch": 80, "length": 26, "layers": 8, "hidden": 300},
                         "sides": {side: {"best": {"wall_s": wall}, "warmup_s": 20.0, "ready": side}
                                   for side, wall in (("elmoc", 0.02), ("allennlp", 0.06))},
                         "allennlp_over_elmoc": {"wall_s": 3.0, "cpu_s": 2.5}}}
    (tmp_path / "tasks.json").write_text(json.dumps(tasks))
    gpu_check.write_summary(tmp_path, {"tasks": {"status": "ok", "seconds": 150.0, "limit_s": 480}})
    md = (tmp_path / "summary.md").read_text()
    assert "GPU hours per seed measured" in md and "synchronized wall time" in md
    assert "| srl | 80 | 44.0 (4.0 + 40.0) | 1500, 1480 | 22.0 (2.0 + 20.0) | 31.0 | 9% (0%) |" in md
    assert "kernels/step (GPU: launches, kernels run)" in md
    assert "| srl, beside its loops | 80 | 45.0 (4.0 + 41.0) |" in md
    assert "| srl (Python loop) | 80 | 164.0 (4.0 + 160.0) | 15819 |" in md
    assert "| srl (eager cells) | 80 | 104.0 (4.0 + 100.0) | 11000 |" in md
    assert "AllenNLP / elmoc 3.00x wall" in md and "elmoc 20.0 ms (warm-up 20.0 s" in md


def test_a_failing_tasks_command_is_recorded_and_the_next_ones_still_run(tmp_path, monkeypatch):
    """GPU minutes are scarce: when task_durations.py fails on the device, SRL's loops and the encoder
    comparison still run, the step is marked failed and the summary names the command that failed."""
    ran = []

    def fake_run(cmd, log, **_):
        ran.append(cmd)
        if "--compare-python-loop" not in cmd and "task_durations.py" in cmd[1]:
            raise RuntimeError("exit 1: " + " ".join(cmd))
        Path(cmd[cmd.index("--json") + 1]).write_text(json.dumps({"tasks": {}, "sides": {}}))
        return 1.0

    monkeypatch.setattr(gpu_check, "run", fake_run)
    monkeypatch.setattr(gpu_check, "allennlp_python", lambda args: None)
    args = gpu_check.parse_args(["--device", "cpu", "--tiny", "--steps", "tasks"])
    result = gpu_check.step_tasks(args, tmp_path, log=None)
    assert len(ran) == 3 and result["durations"]["error"] == "exit 1" and not result["ok"]
    assert result["srl_loops"]["seconds"] == 1.0 and result["highway"]["allennlp_skipped"]
    (tmp_path / "tasks.json").write_text(json.dumps(result))
    gpu_check.write_summary(tmp_path, {"tasks": {"status": "failed (checks)", "seconds": 3.0, "limit_s": 300}})
    md = (tmp_path / "summary.md").read_text()
    assert "**Task stage on the device**: `python benchmarks/task_durations.py --device cpu" in md
    assert "failed (exit 1; see tasks.log)" in md and "its result could not be rendered" not in md
