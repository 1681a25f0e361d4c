"""The GPU check (issue 33): everything a GPU must measure, in one time-boxed command.

Runs these steps in order, each in a child process under coreutils ``timeout``, each
writing ``<step>.json`` and ``<step>.log`` into ``--out`` (so a step that fails or runs
out of time leaves the others' results), and rewrites ``summary.json`` and
``summary.md`` (the Markdown fragment that docs/benchmarks.md's GPU section takes)
after every step:

  device      device name, driver, torch / CUDA / cuDNN versions, and the matmul peaks
              (FLOP/s of a square product) in fp32, TF32 and bf16, measured here
  tests       the suite's CUDA variants: `pytest -m gpu` over the test files that hold
              a `@pytest.mark.gpu` test (listed in tests.json)
  resume      single-device pretraining with recurrent dropout through `elmoc with-gpus
              1 -- elmoc train`: two uninterrupted runs, and one stopped by SIGTERM after
              its first checkpoint and rerun; model.pt compared.  Tolerance: on the CPU
              exact; on a GPU the resumed run may differ from the reference by no more
              than the second uninterrupted run does (the kernels' run-to-run noise), so
              exact again when those two are bit-equal
  table4      Table 4 with `elmoc bench --tables 4 --no-s3` at paper size: S1 from a run
              under CUDA_LAUNCH_BLOCKING=1 (the paper's synchronous CUDA), S2 from a run
              without it (S3 needs several GPUs)
  table5      Table 5 (and the LSTM kernel table) with `elmoc bench --tables 5,lstm` at
              paper size, batch 128 (config/paper.yaml's) on one GPU
  throughput  paper-size training steps of ELMo-C (one direction, 768 rows), ELMo-A (joint,
              256 rows) and ELMo (char-CNN + sampled softmax, joint, 128 rows) at 793,471
              words, in fp32, TF32 and bf16, and bf16 once more on the old LSTM path (float32
              recurrence, ELMOC_LSTM_BF16_RECURRENCE=0) for the gain: tokens/s, peak memory, MFU
  profile     torch.profiler over the ELMo-C step in fp32, TF32 and bf16 (top kernels of fp32,
              kernel launches per step of each; fp32 trace in profile_trace.json.gz),
              `benchmarks/lstm_profile.py`'s operators, casts, products and launches per step
              of the tiny ELMo-C and ELMo at bptt 10 and 20 (every precision, new and old
              path), and `benchmarks/host_syncs.py` (host syncs per step of every output
              layer; CONT and FIXED again host-resident)
  fused       ELMo-C's step with the encoder's `fused_cell: true` (issue 44: the LSTM's time
              loops compiled by torch.compile, CUDA graphs on CUDA) in fp32, TF32 and bf16,
              its warm-up (compiling) time apart, and lstm_profile.py's counts with it (after
              its warm-up to replay: kernel and graph launches, graphs recorded, skips) and
              the CUDA graph trees' log (recordings, re-recordings and why, skips); beside
              it `fused_cell: layer` (each layer one compiled graph with its autograd
              backward, path `layer`) timed in TF32 and bf16, counted in fp32 and bf16
  embed       `elmoc embed --device cuda` against AllenNLP's `_ElmoBiLm` on the same GPU
              and random original-size weights (`benchmarks/elmo_vs_allennlp.py
              --device`; only with a Python that imports AllenNLP, --allennlp-python),
              the GPU output against the CPU's, and the float16 / bfloat16 copies
              (`elmoc compress`) embedded on the GPU
  tasks       (issue 45) the five paper task models on the device at paper size, features in the
              contiguous float16 layout: `benchmarks/task_durations.py --device` (synchronized step
              times, collate's share, CUDA launches per step, GPU hours per seed measured), SRL
              once more with its highway LSTM's cells eager and with the reference autograd loop
              (`--compare-python-loop`), and SRL's encoder alone, forward and backward, against
              AllenNLP's `StackedAlternatingLstm` on the same device
              (`benchmarks/highway_lstm_vs_allennlp.py --device`; AllenNLP's side only with a
              Python that imports AllenNLP, as the embed step)

`--device cpu --tiny` runs every step at tiny sizes on a CPU (the rehearsal), with the LSTM's
Python time loop (ELMOC_NATIVE_LSTM=0 unless set), the one CUDA tensors take; the CUDA-only parts
(host syncs, peak memory) then say so in their result.  A CUDA request without a GPU is
refused in one line.  `--steps` runs a subset; `--plan` prints the
plan; `--summarize DIR... --out OUT` writes the summary of folders of step results (e.g.
the unpacked results of the three device commands) into OUT.

Sizing (the default plan on one H100; `--plan` prints it, docs/full-run.md, "On a GPU",
derives it): each step's estimate is its FLOPs at an assumed achieved rate (30 TFLOP/s in
fp32, 150 in TF32, 300 in bf16 for the large products; the LSTM's time loop at about
1,000 kernel launches of 8 us per window and direction) plus its fixed costs (process
starts, building models, writing random tables), taken from the CPU rehearsal's
timings of the same work; the first GPU run (an H200, 2026-11-26) replaced the derived
figures of the steps it finished by their measured times.  Each step also has a hard limit (LIMITS), and --budget-s
(default 1500 s = 25 minutes) caps the limits' sum: a step gets at most what is left.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STEPS = ("device", "tests", "resume", "table4", "table5", "throughput", "profile", "embed", "fused", "tasks")
# hard limits (seconds) per step: the default CUDA plan / the tiny CPU rehearsal
LIMITS = {"device": (40, 120), "tests": (120, 300), "resume": (130, 420), "table4": (530, 300),
          "table5": (200, 300), "throughput": (120, 400), "profile": (130, 450), "embed": (330, 400),
          "fused": (530, 600), "tasks": (480, 300)}
# estimated seconds of each step of the default CUDA plan on one H100/H200 (derivation in docs/full-run.md,
# "On a GPU"; table4's S1 as measured on an H200 on 2026-11-26, table4's S2 from its 8 of 9 rows done in 211 s;
# device, tests (9 CUDA tests, 83 s), resume, throughput (12 rows) and profile as measured on an H100 on
# 2026-11-27; fused stopped there after 202 s, in its operator counts (Dynamo's recompile limit, since raised),
# its three paper-size rows done (91 s of it compiling), so 240 stayed derived, and fused_cell: layer's two rows,
# four count rows and gpu test (issue 44.2) add ~160 s (derived: ~30 s per compiled shape and precision, as
# the loops' rows took); table5 and embed still derived; tasks (issue 45, group E) derived from its FLOPs,
# launches and compiles, docs/full-run.md)
ESTIMATES = {"device": 10, "tests": 85, "resume": 100, "table4": 430, "table5": 120, "throughput": 55,
             "profile": 100, "embed": 200, "fused": 400, "tasks": 150}
# the device commands of docs/full-run.md, each within the tool's 10-minute limit (limits' sums 540, 570, 570,
# 570 and 520 s)
GROUPS = {"A": ("device", "tests", "resume", "throughput", "profile"), "B": ("device", "table4"),
          "C": ("device", "table5", "embed"), "D": ("device", "fused"), "E": ("device", "tasks")}
PAPER_VOCAB = 793_471  # bilm-tf's vocab-2016-09-10.txt, the paper's 793K words
PRECISIONS = ("fp32", "tf32", "bf16")
# The fused step's whole-layer graph (fused_cell: layer): timed in TF32 and bf16, the precisions where the
# loops' copies cost most against the step (H100: the loops 8% slower in TF32, 1.22x in bf16) and where a
# researcher trains, and counted in fp32 (what its gpu test asserts on, compiled here first) and bf16: four
# more compilations beside the loops' nine keep the step within its limit (the loops compiled 20-39 s per
# precision at paper size on the H100).  The --tiny rehearsal runs it in bf16 only (its rows and counts share
# one compiled shape).
LAYER_PRECISIONS = ("tf32", "bf16")
LAYER_COUNT_PRECISIONS = ("fp32", "bf16")
# Table 4 and 5 of the paper (seconds; ratios to CONT), for the Markdown beside ours
PAPER_T4 = {"CONT": (640, 0.47, 115.28), "FIXED": (512, 1.17, 1.24), "SUBWORD": (320, 1.09, 1.53),
            "ADAPTIVE 40K": (384, 1.08, 1.30), "ADAPTIVE 800K": (256, 1.16, 1.47),
            "ADAPTIVE 2000K": (192, 1.25, 1.82), "SAMPLED 40K": (512, 1.07, 1.18),
            "SAMPLED 800K": (256, 1.15, 1.35), "SAMPLED 2000K": (64, 1.16, 2.35)}
PAPER_T5 = {"LSTM": {"CONT": 3.97, "FIXED": 1.93, "SUBWORD": 2.32, "ADAPTIVE": 4.58, "SAMPLED": 2.50},
            "LSTMX2": {"CONT": 10.42, "FIXED": 1.32, "SUBWORD": 1.49, "ADAPTIVE": 2.20, "SAMPLED": 1.60},
            "TRANS BASE": {"CONT": 15.87, "FIXED": 1.52, "SUBWORD": 1.78, "ADAPTIVE": 2.62, "SAMPLED": 2.91},
            "ELMO": {"CONT": 34.58, "FIXED": 1.24, "SUBWORD": 1.55, "ADAPTIVE": 1.89, "SAMPLED": 1.91},
            "TRANS LARGE": {"CONT": 48.55, "FIXED": 1.37, "SUBWORD": 1.72, "ADAPTIVE": 3.28, "SAMPLED": None},
            "GPT": {"CONT": 43.53, "FIXED": 1.14, "SUBWORD": 1.44, "ADAPTIVE": 2.33, "SAMPLED": 8.31}}


# --------------------------------------------------------------------------- helpers


def elmoc_cmd() -> list[str]:
    return [sys.executable, "-m", "elmoc.cli"]


def child_env(**extra: str) -> dict[str, str]:
    """This environment with src/ importable (the device machine runs from the tree, not an install)."""
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def shown(cmd: list[str], scratch: Path | None = None) -> str:
    """``cmd`` as a shell line for the summary: ``python`` for this interpreter, paths relative to the
    repository, the scratch folder as ``$SCRATCH``."""
    text = shlex.join(["python" if c == sys.executable else c for c in cmd])
    if scratch is not None:
        text = text.replace(str(scratch), "$SCRATCH")
    return text.replace(str(ROOT) + "/", "")


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def run(cmd: list[str], log, env: dict | None = None, cwd: Path | None = None, check: bool = True) -> float:
    """Run ``cmd`` with its output appended to ``log``; wall seconds.  A failure raises with the log's tail."""
    log.write(f"$ {shlex.join(cmd)}\n")
    log.flush()
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env or child_env(), cwd=cwd)
    seconds = time.perf_counter() - start
    log.write(f"[exit {proc.returncode} after {seconds:.1f} s]\n")
    log.flush()
    if check and proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {shlex.join(cmd)}")
    return seconds


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def set_fp32_mode(tf32: bool) -> None:
    """TF32 on or off for float32 matmuls and cuDNN (process-wide; elmoc's apply_tf32 only turns it on)."""
    import torch

    mode = "tf32" if tf32 else "ieee"
    torch.backends.cuda.matmul.fp32_precision = mode
    torch.backends.cudnn.fp32_precision = mode


# --------------------------------------------------------------------------- step: device


def matmul_peaks(device, size: int, seconds: float) -> dict[str, float]:
    """Best achieved FLOP/s of a ``size``-cubed product per precision (fp32 strict, TF32, bf16)."""
    import torch

    from elmoc.bench.measure import matmul_peak_flops

    peaks = {}
    for name in PRECISIONS:
        set_fp32_mode(name == "tf32")
        dtype = torch.bfloat16 if name == "bf16" else torch.float32
        peaks[name] = matmul_peak_flops(device, size=size, seconds=seconds, dtype=dtype)
    set_fp32_mode(False)
    return peaks


def step_device(args, out: Path, log) -> dict:
    import torch

    device = torch.device(args.device)
    info = {"device": args.device, "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "host": socket.gethostname(), "cpu_count": os.cpu_count(),
            "machine": platform.machine(), "commit": args.commit}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}",
                    multiprocessors=props.multi_processor_count, memory_gib=props.total_memory / 2**30,
                    cudnn=torch.backends.cudnn.version())
        smi = shutil.which("nvidia-smi")
        if smi:
            q = subprocess.run([smi, "--query-gpu=driver_version,name,clocks.max.sm",
                                "--format=csv,noheader"], capture_output=True, text=True)
            info["nvidia_smi"] = q.stdout.strip()
            info["driver"] = q.stdout.split(",")[0].strip() if q.returncode == 0 else None
    else:
        info.update(name=platform.processor() or platform.machine(), driver=None)
    size, seconds = (256, 0.3) if args.tiny else (8192, 1.0)
    start = time.perf_counter()
    info["matmul_size"] = size
    info["matmul_peak_flops"] = matmul_peaks(device, size, seconds)
    log.write(f"matmul peaks ({size}^3, {time.perf_counter() - start:.1f} s): "
              + ", ".join(f"{k} {v / 1e12:.2f} TFLOP/s" for k, v in info["matmul_peak_flops"].items()) + "\n")
    return info


# --------------------------------------------------------------------------- step: tests


def gpu_test_files() -> list[str]:
    """Test files holding a ``@pytest.mark.gpu`` test (the suite's CUDA variants)."""
    files = [p for p in sorted((ROOT / "tests").rglob("test_*.py")) if "pytest.mark.gpu" in p.read_text()]
    return [str(p.relative_to(ROOT)) for p in files]


def step_tests(args, out: Path, log) -> dict:
    files = gpu_test_files()
    junit = out / "tests.xml"
    # the slow ones compile (the fused cell's): the fused step runs them
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu and not slow", "-p", "no:cacheprovider",
           f"--junitxml={junit}", *files]
    seconds = run(cmd, log, cwd=ROOT, check=False)
    result = junit_cases(junit)
    result.update(files=files, command=shown(cmd), seconds=seconds)
    return result


def junit_cases(junit: Path) -> dict:
    """Outcome of each test case of a pytest JUnit XML file, their counts and ``ok``."""
    import xml.etree.ElementTree as ET

    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                detail = (child.get("message") or "")[:300]
                break
        else:
            detail = ""
        cases.append({"test": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome, "detail": detail})
    counts = Counter(c["outcome"] for c in cases)
    return {"counts": dict(counts), "cases": cases,
            "ok": counts.get("failed", 0) == 0 and counts.get("error", 0) == 0 and bool(cases)}


# --------------------------------------------------------------------------- step: resume


def zipf_sentences(rng, words: list[str], n: int, mean_len: int) -> list[str]:
    """``n`` sentences of Zipf-distributed words (rank r with probability ~ 1/r)."""
    import numpy as np

    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    lengths = np.clip(rng.poisson(mean_len, size=n), 3, 4 * mean_len)
    flat = rng.choice(len(words), size=int(lengths.sum()), p=p)
    out, at = [], 0
    for n_words in lengths:
        out.append(" ".join(words[i] for i in flat[at:at + n_words]))
        at += n_words
    return out


def write_training_dir(root: Path, sizes: dict) -> None:
    """A synthetic corpus (shards, stats.json, heldout), vocabulary, random vectors and an ELMo-C-style
    spec with recurrent dropout, carried state and checkpoints, all relative to ``root``."""
    import numpy as np
    import yaml

    from elmoc.data.vocab.vocabulary import Vocabulary

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(sizes["words"])]
    train = root / "corpus/train"
    train.mkdir(parents=True)
    stats, counts = [], Counter()
    for i in range(2):
        lines = zipf_sentences(rng, words, sizes["sentences"], 12)
        (train / f"shard_{i:03d}.txt").write_text("\n".join(lines) + "\n")
        stats.append({"name": f"shard_{i:03d}.txt", "sentences": len(lines),
                      "tokens": sum(len(s.split()) for s in lines)})
        counts.update(" ".join(lines).split())
    (root / "corpus/stats.json").write_text(json.dumps({"shards": stats}))
    (root / "corpus/heldout.txt").write_text("\n".join(zipf_sentences(rng, words, 40, 12)) + "\n")
    vocab = Vocabulary.from_counts(counts)
    vocab.save(root / "vocab.txt")
    np.save(root / "vec.npy", rng.standard_normal((len(vocab), sizes["dim"])).astype("float32"))
    spec = {"name": "gpu-check-resume",
            "input": {"type": "fasttext", "vectors": "vec.npy"},
            "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": sizes["cell"],
                        "projection_size": sizes["proj"], "cell_clip": 3.0, "proj_clip": 3.0, "layer_norm": True,
                        "recurrent_dropout": 0.1},
            "output": {"type": "cosine", "vectors": "vec.npy"},
            "optimizer": {"type": "adam", "lr": 0.001},
            "train": {"batch_size": sizes["batch"], "bptt": sizes["bptt"], "epochs": 1000, "max_steps": sizes["steps"],
                      "checkpoint_every": sizes["every"], "log_every": sizes["every"], "reset_state": False, "seed": 1,
                      "eval_batch_size": sizes["batch"], "eval_max_windows": 4},
            "data": {"train": "corpus/train", "heldout": "corpus/heldout.txt"},
            "vocab": "vocab.txt"}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))


def model_difference(a: Path, b: Path) -> dict:
    """Largest absolute difference of two model.pt files' tensors, and whether every tensor is equal."""
    import torch

    from elmoc.model_file import load_checkpoint

    ma, mb = load_checkpoint(a), load_checkpoint(b)
    if ma["model"].keys() != mb["model"].keys():
        raise RuntimeError(f"{a} and {b} hold different tensors")
    worst, equal = 0.0, True
    for k, x in ma["model"].items():
        y = mb["model"][k]
        equal = equal and torch.equal(x, y)
        if x.is_floating_point() and x.numel():
            worst = max(worst, float((x.double() - y.double()).abs().max()))
    return {"bit_equal": equal, "max_abs_diff": worst, "steps": [ma["step"], mb["step"]],
            "tokens": [ma["tokens"], mb["tokens"]]}


def step_resume(args, out: Path, log) -> dict:
    from elmoc.model_file import load_checkpoint

    cuda = args.device.startswith("cuda")
    sizes = (dict(words=300, sentences=400, dim=8, cell=16, proj=8, batch=4, bptt=5, steps=200, every=20)
             if args.tiny else
             dict(words=5000, sentences=20000, dim=64, cell=1024, proj=256, batch=64, bptt=20, steps=300, every=50))
    root = Path(args.scratch) / "resume"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    write_training_dir(root, sizes)
    threads = "1" if not cuda else "4"
    env = child_env(OMP_NUM_THREADS=threads)
    env.pop("CUDA_VISIBLE_DEVICES", None)  # with-gpus then offers torch.cuda.device_count()'s devices

    def train_cmd(name: str) -> list[str]:
        gpus = ["with-gpus", "--lock-dir", str(root / "slots"), "1" if cuda else "0", "--"]
        return elmoc_cmd() + gpus + elmoc_cmd() + [
            "train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", name, "--device", args.device,
            "--threads", threads]

    result = {"sizes": sizes, "device": args.device, "command": shown(train_cmd("OUT"), root)}
    result["reference_seconds"] = run(train_cmd("reference"), log, env, root)
    result["repeat_seconds"] = run(train_cmd("repeat"), log, env, root)
    # the stopped run: SIGTERM to with-gpus (which passes it on) once the first checkpoint exists
    log.write(f"$ {shlex.join(train_cmd('stopped'))}  (SIGTERM after the first checkpoint)\n")
    log.flush()
    proc = subprocess.Popen(train_cmd("stopped"), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    ckpt = root / "stopped/checkpoint.pt"
    while not ckpt.exists() and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    result["stop_exit"] = proc.wait()
    log.write(f"[exit {result['stop_exit']}]\n")
    if result["stop_exit"] != 75:
        raise RuntimeError(f"the stopped run exited {result['stop_exit']}, not 75 (stopped and saved); "
                           f"it must still be training at its first checkpoint: raise max_steps")
    result["stopped_at_step"] = int(load_checkpoint(ckpt)["step"])
    result["rerun_seconds"] = run(train_cmd("stopped"), log, env, root)
    floor = model_difference(root / "reference/model.pt", root / "repeat/model.pt")
    resumed = model_difference(root / "reference/model.pt", root / "stopped/model.pt")
    held = [json.loads((root / f"{n}/heldout.json").read_text()) for n in ("reference", "stopped")]
    # The tolerance: on the CPU, exact (docs/full-run.md: bit for bit).  On a GPU, the resumed run may
    # differ from the reference by no more than a second uninterrupted run does (the kernels' own
    # run-to-run noise, e.g. atomics in a reduction); when those two are bit-equal, it must be too.
    tolerance = 0.0 if not cuda else floor["max_abs_diff"]
    result.update(noise_floor=floor, resumed=resumed, tolerance=tolerance,
                  heldout={"metric": held[0].get("metric"), "uninterrupted": held[0].get("after"),
                           "resumed": held[1].get("after")},
                  ok=resumed["steps"][0] == resumed["steps"][1] and resumed["max_abs_diff"] <= tolerance
                  and (resumed["bit_equal"] or cuda))
    return result


# --------------------------------------------------------------------------- steps: tables 4 and 5


def bench_args(args, tables: str) -> list[str]:
    if args.tiny:
        return ["bench", "--quick", "--tables", tables, "--device", args.device]
    return ["bench", "--tables", tables, "--device", args.device, "--width-scale", "1", "--vocab-scale", "1",
            "--memory-budget-mb", str(args.memory_budget_mb), "--table5-batch", str(args.table5_batch),
            "--threads", "4"]


def step_table4(args, out: Path, log) -> dict:
    scratch = Path(args.scratch) / "bench"
    base = bench_args(args, "4") + ["--no-s3", "--scratch", str(scratch)]
    # S1: the paper timed batch 1 with synchronous CUDA.  The S2 search of this run is cut short by a
    # 1 MB budget (one probe per model), since its S2 comes from the asynchronous run below.
    s1_cmd = elmoc_cmd() + base + ["--memory-budget-mb", "1", "--output-dir", str(out / "table4_s1")]
    s2_cmd = elmoc_cmd() + base + ["--output-dir", str(out / "table4_s2")]
    env = child_env()
    env.pop("CUDA_LAUNCH_BLOCKING", None)
    t1 = run(s1_cmd, log, child_env(CUDA_LAUNCH_BLOCKING="1"))
    t2 = run(s2_cmd, log, env)
    s1 = json.loads((out / "table4_s1/bench.json").read_text())["table4"]
    s2 = json.loads((out / "table4_s2/bench.json").read_text())
    rows = []
    for r1, r2 in zip(s1, s2["table4"]):
        rows.append({"label": r2["label"], "params_paper_size": r2["params_paper_size"], "max_batch": r2["max_batch"],
                     "peak_mb": r2["peak_mb"], "s1_step_s": r1["s1_step_s"], "s1_ratio": r1["s1_ratio"],
                     "s2_s_per_mwords": r2["s2_s_per_mwords"], "s2_ratio": r2["s2_ratio"],
                     "s2_run_s1_step_s": r2["s1_step_s"]})
    return {"commands": {"s1": "CUDA_LAUNCH_BLOCKING=1 " + shown(s1_cmd, scratch.parent),
                         "s2": shown(s2_cmd, scratch.parent)},
            "seconds": {"s1": t1, "s2": t2}, "settings": s2.get("settings"), "rows": rows, "ok": True}


def step_table5(args, out: Path, log) -> dict:
    cmd = elmoc_cmd() + bench_args(args, "5,lstm") + ["--scratch", str(Path(args.scratch) / "bench"),
                                                       "--output-dir", str(out / "table5")]
    env = child_env()
    env.pop("CUDA_LAUNCH_BLOCKING", None)
    seconds = run(cmd, log, env)
    result = json.loads((out / "table5/bench.json").read_text())
    return {"command": shown(cmd, Path(args.scratch)), "seconds": seconds, "settings": result.get("settings"),
            "rows": result["table5"], "lstm": result.get("lstm"), "ok": True}


# --------------------------------------------------------------------------- step: throughput


def preset(name: str) -> dict:
    import yaml

    return yaml.safe_load((ROOT / "config/lm" / f"{name}.yaml").read_text())


def throughput_models(tiny: bool) -> list[dict]:
    """ELMo-C, ELMo-A and ELMo at paper size (or tiny) with the paper's per-card batch (Table 2)."""
    models = [{"name": "ELMo-C", "preset": "elmo-c", "batch": 768, "joint": False},
              {"name": "ELMo-A", "preset": "elmo-a", "batch": 256, "joint": True},
              {"name": "ELMo", "preset": "elmo", "batch": 128, "joint": True}]
    for m in models:
        spec = preset(m["preset"])
        m.update(spec=spec, vocab=PAPER_VOCAB + 4, bptt=20, dim=300, optimizer=spec["optimizer"],
                 clip_norm=spec["train"]["clip_norm"], loss_scale=spec["train"].get("loss_scale", 1.0))
        if tiny:
            m.update(batch=max(2, m["batch"] // 128), vocab=2004, bptt=5, dim=8)
            spec["encoder"].update(cell_size=32, projection_size=16)
            out = spec["output"]
            if out["type"] == "adaptive":
                out["cutoffs"] = [200, 1000]
            if out["type"] == "sampled":
                out["num_samples"] = 64
            if spec["input"]["type"] == "char_cnn":
                o = spec["input"]["options"]
                o["lstm"].update(dim=32, projection_dim=16)
                o["char_cnn"].update(filters=[[1, 4], [2, 8]], n_highway=1, max_characters_per_token=12)
    return models


def step_flops(m: dict, counts: dict | None = None) -> float:
    """Model FLOPs of one training step (2 per multiply-add of the matrix products; elementwise work,
    gathers and the optimizer not counted).  Every product counts 3x its forward (forward, and the
    backward's input and weight gradients), except the input projection of a frozen table (2x: no
    input gradient).  Per direction-token, forward:

    * ELMo LSTM layer (input width p, cell c, projection p): 2 * (p*4c + p*4c + c*p)
    * FastText input: 2 * 300 * p (the Linear 300 -> p, 2x);  char-CNN input: 2 * 16 * sum_f w_f * n_f *
      (chars - w_f + 1) for the convolutions, 2 * 2F*F per highway layer (F = sum n_f), 2 * F * p
    * CONT: 2 * p * 300;  SAMPLED: 2 * p * (K + 1) (K negatives shared by the batch, and the true word)
    * ADAPTIVE (cutoffs c_1 < c_2, div 4): head 2 * p * (c_1 + clusters) for every token, and for a
      token of tail cluster i only: 2 * p * (p / 4^i) + 2 * (p / 4^i) * size_i (PyTorch's
      AdaptiveLogSoftmaxWithLoss computes a tail only for the targets in it; ``counts`` gives the
      batch's tokens per cluster)
    Tokens: batch x bptt per direction (x2 for the joint bi-LMs).
    """
    spec = m["spec"]
    enc, out, inp = spec["encoder"], spec["output"], spec["input"]
    c, p, layers = enc["cell_size"], enc["projection_size"], enc["num_layers"]
    tokens = m["batch"] * m["bptt"] * (2 if m["joint"] else 1)
    per_token = 3 * layers * 2 * (p * 4 * c + p * 4 * c + c * p)
    if inp["type"] == "fasttext":
        per_token += 2 * 2 * m["dim"] * p
    else:
        o = inp["options"]["char_cnn"]
        chars, width = o["max_characters_per_token"], o["embedding"]["dim"]
        filters = sum(n for _, n in o["filters"])
        conv = sum(2 * width * w * n * (chars - w + 1) for w, n in o["filters"])
        per_token += 3 * (conv + o["n_highway"] * 2 * 2 * filters * filters + 2 * filters * p)
    flops = per_token * tokens
    if out["type"] == "cosine":
        flops += 3 * 2 * p * m["dim"] * tokens
    elif out["type"] == "sampled":
        flops += 3 * 2 * p * (out["num_samples"] + 1) * tokens
    elif out["type"] == "adaptive":
        cuts = list(out["cutoffs"]) + [m["vocab"]]
        flops += 3 * 2 * p * (cuts[0] + len(cuts) - 1) * tokens
        for i in range(1, len(cuts)):
            hsz = max(1, int(p // (out.get("div_value", 4.0) ** i)))
            n = (counts or {}).get(i, 0)
            flops += 3 * n * (2 * p * hsz + 2 * hsz * (cuts[i] - cuts[i - 1]))
    return float(flops)


def zipf_ids(rng, vocab: int, shape: tuple[int, ...]):
    """Word ids in [4, vocab) with Zipf frequencies (rank r ~ 1/r), as a frequency-sorted vocabulary sees text."""
    import numpy as np

    ranks = np.arange(1, vocab - 4 + 1, dtype=np.float64)
    cdf = np.cumsum(1.0 / ranks)
    cdf /= cdf[-1]
    return 4 + np.searchsorted(cdf, rng.random(shape)).clip(max=vocab - 5)


def build_throughput_model(m: dict, scratch: Path, device):
    import numpy as np
    import torch

    from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
    from elmoc.lm import BidirectionalLM, LanguageModel

    spec = json.loads(json.dumps(m["spec"]))
    for section in ("input", "output"):
        if "vectors" in spec[section]:
            path = scratch / f"vectors_{m['vocab']}x{m['dim']}.npy"
            if not path.is_file():
                rng = np.random.default_rng(0)
                np.save(path, rng.standard_normal((m["vocab"], m["dim"]), dtype=np.float32))
            spec[section]["vectors"] = str(path)
    for key in ("vocab", "train", "name", "description", "data"):
        spec.pop(key, None)
    vocab = Vocabulary(list(SPECIALS) + [f"w{i}" for i in range(m["vocab"] - 4)])
    torch.manual_seed(1)
    cls = BidirectionalLM if m["joint"] else LanguageModel
    return cls.from_spec(spec, vocab).to(device)


def throughput_batch(m: dict, device, seed: int = 0):
    import numpy as np
    import torch

    from elmoc.data.batches import BiLMBatch, LMBatch

    rng = np.random.default_rng(seed)

    def window():
        ids = torch.from_numpy(zipf_ids(rng, m["vocab"], (m["batch"], m["bptt"] + 1)).astype(np.int64))
        mask = torch.ones(m["batch"], m["bptt"], dtype=torch.bool)
        return LMBatch(ids[:, :-1].contiguous(), ids[:, 1:].contiguous(), mask)

    batch = BiLMBatch(window(), window()) if m["joint"] else window()
    return batch.to(device)


def cluster_counts(m: dict, batch) -> dict[int, int]:
    """Target tokens per tail cluster of an ADAPTIVE output (for its FLOPs)."""
    from elmoc.nn.host_copy import to_host

    out = m["spec"]["output"]
    if out["type"] != "adaptive":
        return {}
    windows = [batch.forward, batch.backward] if m["joint"] else [batch]
    cuts = list(out["cutoffs"]) + [m["vocab"]]
    counts = {}
    for i in range(1, len(cuts)):
        counts[i] = sum(int(((to_host(w.targets) >= cuts[i - 1]) & (to_host(w.targets) < cuts[i])).sum())
                        for w in windows)
    return counts


class Step:
    """One training step of a throughput model, as the trainer runs it (its optimizer, clip, loss scale)."""

    def __init__(self, model, m: dict, batch, device, precision: str):
        from elmoc.train.distributed import sparse_gradient_parameters
        from elmoc.train.optim import build_optimizer
        from elmoc.train.settings import TrainSettings

        self.model, self.batch, self.device = model, batch, device
        self.settings = TrainSettings(precision=precision, clip_norm=m["clip_norm"], loss_scale=m["loss_scale"])
        self.bundle = build_optimizer(m["optimizer"], model, m["batch"])
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.sparse = sparse_gradient_parameters(model)
        self.steps = 0

    def __call__(self):
        from elmoc.train.loop import train_step

        self.model.train()
        self.steps += 1
        self.bundle.set_lr(self.steps)
        return train_step(self.model, self.batch, None, self.bundle, self.params, self.settings, self.device,
                          self.sparse, 1)[0]


def load_peaks(out: Path, device, tiny: bool) -> tuple[dict, str]:
    path = out / "device.json"
    if path.is_file():
        return json.loads(path.read_text())["matmul_peak_flops"], "device.json"
    return matmul_peaks(device, 256 if tiny else 8192, 0.3 if tiny else 1.0), "measured in this step"


def lstm_profile():
    """benchmarks/lstm_profile.py (the LSTM path switch and the per-step operator and cast counts)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import lstm_profile as module

    return module


def step_throughput(args, out: Path, log) -> dict:
    result = throughput_rows(args, out, log, throughput_models(args.tiny), ("new", "old"))
    rows = result["rows"]
    ratios = {}
    for precision in PRECISIONS:
        by = {r["model"]: r.get("tokens_per_s") for r in rows if r["precision"] == precision and r["path"] == "new"}
        if by.get("ELMo-C") and by.get("ELMo"):
            ratios[precision] = {"elmo_c_over_elmo": by["ELMo-C"] / by["ELMo"],
                                 "elmo_c_over_elmo_a": by["ELMo-C"] / by["ELMo-A"] if by.get("ELMo-A") else None}
    result["ratios"] = ratios
    return result


def step_fused(args, out: Path, log) -> dict:
    """ELMo-C's training step with the encoder's fused cell (torch.compile of the LSTM's time loops; CUDA
    graphs on CUDA) in every precision, its first (compiling) steps timed apart, and the operator, cast and
    launch counts of the tiny ELMo-C with it at bptt 10 and 20 (with --tiny at its bptt only); the CUDA graph
    trees' log and ``cudagraph*`` counters over the timed rows (``cudagraphs``) and per count row.  Beside it
    the whole-layer graph (``fused_cell: layer``, path ``layer``) in LAYER_PRECISIONS and its counts in
    LAYER_COUNT_PRECISIONS, to keep the step within its limit (see there)."""
    import copy

    m = throughput_models(args.tiny)[0]  # ELMo-C
    layer = copy.deepcopy(m)
    m["spec"]["encoder"]["fused_cell"] = True
    layer["spec"]["encoder"]["fused_cell"] = "layer"
    lp = lstm_profile()
    # the CUDA graph trees' log (recordings, re-recordings and why, skips) and counters over the timed rows, so
    # that a GPU run says why its graphs do not replay if they do not; each count row carries its own
    with lp.CudagraphLog() as graphs:
        result = throughput_rows(args, out, log, [m], ("fused",))
        layer_rows = throughput_rows(args, out, log, [layer], ("layer",), ("bf16",) if args.tiny else LAYER_PRECISIONS)
    result["rows"] += layer_rows["rows"]
    result["ok"] = result["ok"] and layer_rows["ok"]
    result["cudagraphs"] = graphs.summary()
    log.write(f"CUDA graphs over the timed rows: {json.dumps(result['cudagraphs'])}\n")
    log.write(lp.HEADER + "\n")
    # each window length compiles anew: the CPU rehearsal counts only at its own bptt (compiled above)
    bptts = (m["bptt"],) if args.tiny else (10, 20)
    result["counts"] = lp.profile_table(("ELMo-C",), PRECISIONS, ("fused",), bptts, 1, args.device, log)
    result["counts"] += lp.profile_table(("ELMo-C",), ("bf16",) if args.tiny else LAYER_COUNT_PRECISIONS, ("layer",),
                                         bptts, 1, args.device, log)
    # the fused cell's and the fused layer's gpu tests (CUDA graphs replayed over steps; skip without CUDA)
    junit = out / "fused_tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", f"--junitxml={junit}",
           "tests/encoders/test_fused_lstm.py", "tests/encoders/test_fused_layer.py"]
    run(cmd, log, cwd=ROOT, check=False)
    result["tests"] = junit_cases(junit)
    result["ok"] = result["ok"] and result["tests"]["ok"]
    return result


def throughput_rows(args, out: Path, log, models: list[dict], paths: tuple[str, ...],
                    precisions: tuple[str, ...] = PRECISIONS) -> dict:
    """Timed training steps of each model in each (precision, LSTM path) of ``lstm_profile.runs``."""
    import torch

    device = torch.device(args.device)
    scratch = Path(args.scratch) / "throughput"
    scratch.mkdir(parents=True, exist_ok=True)
    peaks, peaks_from = load_peaks(out, device, args.tiny)
    timed, warmup = (3, 1) if args.tiny else (10, 3)
    rows = []
    for m in models:
        start = time.perf_counter()
        model = build_throughput_model(m, scratch, device)
        build_s = time.perf_counter() - start
        batch = throughput_batch(m, device)
        flops = step_flops(m, cluster_counts(m, batch))
        tokens = m["batch"] * m["bptt"] * (2 if m["joint"] else 1)
        for _, precision, path in lstm_profile().runs([m["name"]], precisions, paths):
            set_fp32_mode(precision == "tf32")
            row = {"model": m["name"], "precision": precision, "path": path, "batch_per_card": m["batch"],
                   "bptt": m["bptt"],
                   "joint": m["joint"], "tokens_per_step": tokens, "vocab": m["vocab"],
                   "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
                   "flops_per_step": flops, "build_s": build_s}
            try:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats(device)
                step = Step(model, m, batch, device, precision)
                with lstm_profile().lstm_path(path):
                    t0 = time.perf_counter()
                    for _ in range(warmup):
                        step()
                    sync(device)
                    row["warmup_s"] = time.perf_counter() - t0  # with the fused cell: its compilation
                    times = []
                    for _ in range(timed):
                        t0 = time.perf_counter()
                        loss = step()
                        sync(device)
                        times.append(time.perf_counter() - t0)
                seconds = statistics.median(times)
                row.update(step_s=seconds, step_s_all=times, tokens_per_s=tokens / seconds,
                           achieved_tflops=flops / seconds / 1e12, mfu=flops / seconds / peaks[precision],
                           loss=float(loss), peak_mem_gib=(torch.cuda.max_memory_allocated(device) / 2**30
                                                           if device.type == "cuda" else None))
                del step
            except torch.OutOfMemoryError as e:
                row.update(error=f"out of memory: {str(e).splitlines()[0]}")
            log.write(json.dumps({k: v for k, v in row.items() if k != "step_s_all"}) + "\n")
            log.flush()
            rows.append(row)
        del model, batch
        if device.type == "cuda":
            torch.cuda.empty_cache()
    set_fp32_mode(False)
    return {"rows": rows, "peaks": peaks, "peaks_from": peaks_from, "timed_steps": timed,
            "warmup_steps": warmup, "flops_formula": step_flops.__doc__, "ok": all("error" not in r for r in rows)}


# --------------------------------------------------------------------------- step: profile


def step_profile(args, out: Path, log) -> dict:
    import torch

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    m = throughput_models(args.tiny)[0]  # ELMo-C
    scratch = Path(args.scratch) / "throughput"
    scratch.mkdir(parents=True, exist_ok=True)
    model = build_throughput_model(m, scratch, device)
    batch = throughput_batch(m, device)
    by_precision = {}
    for precision in PRECISIONS:  # fp32 last: its trace and top kernels are the result's own fields
        set_fp32_mode(precision == "tf32")
        try:
            by_precision[precision] = profile_one(Step(model, m, batch, device, precision), device, out, scratch,
                                                  trace=precision == "fp32")
        finally:
            set_fp32_mode(False)
    result = {"model": "ELMo-C", "batch": m["batch"], "bptt": m["bptt"], "precision": "fp32",
              **by_precision["fp32"], "by_precision": by_precision}
    del model
    if cuda:
        torch.cuda.empty_cache()
    # operators, casts and products per step of ELMo-C and ELMo at two window lengths, every precision, the
    # new LSTM path and (bf16) the old one: benchmarks/lstm_profile.py at the tiny sizes
    lp = lstm_profile()
    log.write(lp.HEADER + "\n")
    result["counts"] = lp.profile_table(("ELMo-C", "ELMo"), PRECISIONS, ("new", "old"), (10, 20), 1, args.device, log)
    result.update(profile_host_syncs(args, log, cuda))
    return result


def profile_one(step, device, out: Path, scratch: Path, trace: bool) -> dict:
    """Top kernels, kernel time and (CUDA) launches and copies per step of 3 profiled steps (after 3)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    cuda = device.type == "cuda"
    active = 3
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, schedule=schedule(wait=1, warmup=2, active=active)) as prof:
        for _ in range(1 + 2 + active):
            step()
            sync(device)
            prof.step()
    events = prof.key_averages()
    time_attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    kernels = [e for e in events if (e.device_type == torch.autograd.DeviceType.CUDA) == cuda
               and not e.key.startswith("ProfilerStep")]
    kernels.sort(key=lambda e: getattr(e, time_attr), reverse=True)
    total = sum(getattr(e, time_attr) for e in kernels) or 1.0
    top = [{"name": e.key[:120], "calls_per_step": e.count / active,
            "ms_per_step": getattr(e, time_attr) / 1e3 / active, "share": getattr(e, time_attr) / total}
           for e in kernels[:15]]
    launch_names = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
                    "cudaGraphLaunch", "cudaLaunchCooperativeKernel")
    launches = sum(e.count for e in events if e.key in launch_names) / active
    memcpy = sum(e.count for e in events if e.key in ("cudaMemcpyAsync", "cudaMemcpy")) / active
    result = {"active_steps": active, "top": top, "kernel_time_ms_per_step": total / 1e3 / active,
              "kernel_launches_per_step": launches if cuda else None,
              "memcpy_calls_per_step": memcpy if cuda else None}
    if trace:
        path = scratch / "profile_trace.json"
        prof.export_chrome_trace(str(path))
        with open(path, "rb") as src, gzip.open(out / "profile_trace.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        result["trace"] = "profile_trace.json.gz"
    return result


def profile_host_syncs(args, log, cuda: bool) -> dict:
    """Host syncs per step of every output layer (benchmarks/host_syncs.py, CUDA only)."""
    result = {}
    # host syncs per step of every output layer, from benchmarks/host_syncs.py (CUDA only), with the tables
    # on the device and again host-resident (vector_table.lookup's pinned gathers)
    width, vocab, batch = ("0.05", "0.005", "4") if args.tiny else ("1", "1", "128")
    runs = []
    for extra in ([], ["--host-resident", "--layers", "CONT", "FIXED"]):
        cmd = [sys.executable, str(HERE / "host_syncs.py"), "--width", width, "--vocab", vocab, "--batch", batch,
               "--steps", "10", *extra]
        log.write(f"$ {shlex.join(cmd)}\n")
        log.flush()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), cwd=ROOT)
        log.write(proc.stdout + proc.stderr + f"[exit {proc.returncode}]\n")
        syncs = {"command": shown(cmd), "exit": proc.returncode}
        if proc.returncode == 0:
            rows = []
            for line in proc.stdout.splitlines()[2:]:
                parts = line.split(None, 3)
                if len(parts) >= 3:
                    rows.append({"layer": parts[0], "syncs_per_step": float(parts[1]), "ms_per_step": float(parts[2]),
                                 "sites": parts[3] if len(parts) > 3 else "-"})
            syncs.update(header=proc.stdout.splitlines()[0], rows=rows)
        else:
            syncs["note"] = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        runs.append(syncs)
    syncs = runs[0]
    result["host_syncs_host_resident"] = runs[1]
    result["host_syncs"] = syncs
    result["ok"] = all(r["exit"] == 0 for r in runs) or not cuda
    return result


# --------------------------------------------------------------------------- step: embed


def synthetic_sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences of random lower-case words (2-10 letters), lengths ~ 1B Word's (mean ~27)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=int(k))) for k in rng.integers(2, 11, size=5000)]
    words = [w for w in vocab]
    return zipf_sentences(rng, words, n, 27)


def allennlp_python(args) -> str | None:
    """The python that imports AllenNLP: --allennlp-python, else .bench-venv/bin/python, else this one."""
    candidates = ([args.allennlp_python] if args.allennlp_python
                  else [str(ROOT / ".bench-venv/bin/python"), sys.executable])
    for python in candidates:
        if python and Path(python).exists():
            probe = subprocess.run([python, "-c", "import allennlp"], capture_output=True, text=True,
                                   env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
            if probe.returncode == 0:
                return python
    return None


def timed_embed(model: Path, src: Path, dst: Path, device: str, log, threads: int) -> float:
    return run(elmoc_cmd() + ["embed", "--model", str(model), "--all", "--batch-size", "64", "--device", device,
                              "--threads", str(threads), str(src), str(dst)], log)


def step_embed(args, out: Path, log) -> dict:
    sys.path.insert(0, str(HERE))
    import elmo_vs_allennlp as eva

    root = Path(args.scratch) / "embed"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    options = None
    if args.tiny:
        options = {"lstm": {"use_skip_connections": True, "projection_dim": 16, "cell_clip": 3, "proj_clip": 3,
                            "dim": 32, "n_layers": 2},
                   "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 8], [3, 8]], "n_highway": 1,
                                "embedding": {"dim": 4}, "n_characters": 262, "max_characters_per_token": 50}}
    start = time.perf_counter()
    options_path, weights = eva.write_random_bilm_tf(root / "weights", options, seed=0)
    result = {"weights": "random, original size (2x4096/512, 2048 char filters)" if not args.tiny else "random, tiny",
              "weights_seconds": time.perf_counter() - start}
    lines = synthetic_sentences(12 if args.tiny else 3000)
    threads = 1 if args.tiny else 8
    sentences = root / "sentences.txt"
    sentences.write_text("\n".join(lines) + "\n")
    result.update(sentences=len(lines), tokens=sum(len(s.split()) for s in lines))
    python = allennlp_python(args)
    if python:
        cmd = [sys.executable, str(HERE / "elmo_vs_allennlp.py"), "--allennlp-python", python, "--options",
               str(options_path), "--weights", str(weights), "--sentences", str(sentences), "--device", args.device,
               "--threads", str(threads), "--batch-size", "64", "--repeats", "2", "--work-dir", str(root / "vs"),
               "--json", str(out / "embed_vs_allennlp.json")]
        result["vs_allennlp_seconds"] = run(cmd, log)
        vs = json.loads((out / "embed_vs_allennlp.json").read_text())
        result["vs_allennlp"] = {"command": shown(cmd, root.parent), "speedup": vs["speedup"],
                                 "speedup_after_startup": vs["speedup_after_startup"],
                                 "max_abs_diff": vs["comparison"]["max_abs_diff"],
                                 "tools": {k: {x: v[x] for x in ("seconds", "startup_seconds", "tokens_per_second",
                                                                  "tokens_per_second_after_startup", "peak_rss_mb")}
                                           for k, v in vs["results"].items()}}
        model = root / "vs/elmoc-model"
    else:
        result["vs_allennlp"] = {"skipped": "no Python with AllenNLP (--allennlp-python, .bench-venv/bin/python or "
                                            "this python): see docs/full-run.md, 'On a GPU'"}
        model = root / "elmoc-model"
        run(elmoc_cmd() + ["export", "--bilm-tf-options", str(options_path), "--bilm-tf-weights", str(weights),
                           "--output-dir", str(model)], log)
    # elmoc on this device (warm-up, then timed), on the CPU (the reference output), and the 16-bit copies
    if args.device != "cpu":  # CUDA context, cuBLAS/cuDNN handles, the allocator's first blocks
        timed_embed(model, sentences, root / "warm.hdf5", args.device, log, threads)
    gpu_s = timed_embed(model, sentences, root / "device.hdf5", args.device, log, threads)
    # the CPU reference on the first 300 sentences (the CPU is ~100x slower at original size)
    subset = root / "subset.txt"
    subset.write_text("\n".join(lines[:300]) + "\n")
    subset_tokens = sum(len(s.split()) for s in lines[:300])
    timed_embed(model, subset, root / "device-subset.hdf5", args.device, log, threads)
    cpu_s = timed_embed(model, subset, root / "cpu.hdf5", "cpu", log, threads)
    result["elmoc"] = {"device_seconds": gpu_s, "cpu_seconds": cpu_s, "tokens_per_s_device": result["tokens"] / gpu_s,
                       "tokens_per_s_cpu": subset_tokens / cpu_s, "cpu_sentences": min(300, len(lines)),
                       "threads": threads,
                       "device_vs_cpu": eva.compare_features(root / "cpu.hdf5", root / "device-subset.hdf5")}
    measure = root / "measure.txt"
    measure.write_text("\n".join(lines[:5 if args.tiny else 20]) + "\n")
    copies = {}
    for fmt in ("float16", "bfloat16"):
        copy = root / f"model-{fmt}"
        run(elmoc_cmd() + ["compress", str(model), "--output-dir", str(copy), "--format", fmt, "--measure", str(measure),
                           "--rounds", "1", "--threads", str(threads)], log)
        seconds = timed_embed(copy, sentences, root / f"{fmt}.hdf5", args.device, log, threads)
        cmp = eva.compare_features(root / "device.hdf5", root / f"{fmt}.hdf5")
        copies[fmt] = {"seconds": seconds, "tokens_per_s": result["tokens"] / seconds,
                       "max_abs_diff_vs_float32": cmp["max_abs_diff"], "max_abs_value": cmp["max_abs_value"],
                       "size_mb": sum(f.stat().st_size for f in copy.rglob("*") if f.is_file()) / 1e6}
    result["copies"] = copies
    result["size_mb_float32"] = sum(f.stat().st_size for f in model.rglob("*") if f.is_file()) / 1e6
    result["ok"] = result["elmoc"]["device_vs_cpu"]["max_abs_diff"] < 1e-3
    return result


# --------------------------------------------------------------------------- step: tasks

TASK_NAMES = ("sst5", "snli", "ner", "srl", "coref")


def step_tasks(args, out: Path, log) -> dict:
    """The task stage on the device (issue 45): every paper task model's step, SRL's time loops compared,
    and SRL's encoder beside AllenNLP's.  Three commands, each writing its own JSON into ``out``; one that
    fails is recorded (``error``, its output in the log) and the next still runs."""
    tiny = ["--tiny"] if args.tiny else []
    steps = ["--steps", "1" if args.tiny else "3"]
    durations = [sys.executable, str(HERE / "task_durations.py"), "--device", args.device, "--features-layout",
                 "contiguous", "--features-dtype", "float16", *steps, *tiny]
    highway = [sys.executable, str(HERE / "highway_lstm_vs_allennlp.py"), "--device", args.device,
               "--rounds", "3" if args.tiny else "5"]
    if args.tiny:
        highway += ["--batch", "4", "--length", "5", "--input-dim", "16", "--hidden", "8", "--layers", "2"]
    python = allennlp_python(args)
    highway += ["--allennlp-python", python] if python else []
    result = {}
    for key, cmd in (("durations", durations + ["--tasks", *TASK_NAMES]),
                     ("srl_loops", durations + ["--tasks", "srl", "--compare-python-loop"]), ("highway", highway)):
        path = out / f"tasks_{key}.json"
        cmd = cmd + ["--json", str(path)]
        result[key] = {"command": shown(cmd).replace(str(out) + "/", "")}
        try:
            result[key]["seconds"] = run(cmd, log)
        except RuntimeError as e:
            result[key]["error"] = str(e).split(":", 1)[0]  # "exit N"; the output is in the step's log
            continue
        result[key].update(json.loads(path.read_text()))
    if not python:
        result["highway"]["allennlp_skipped"] = (
            "no Python with AllenNLP here (--allennlp-python, .bench-venv/bin/python or this python); AllenNLP 2.10.1 "
            "cannot travel to the device as a small bundle: see docs/full-run.md, 'On a GPU'")
    result["ok"] = not any("error" in part for part in result.values() if isinstance(part, dict))
    return result


WORKERS = {"device": step_device, "tests": step_tests, "resume": step_resume, "table4": step_table4,
           "table5": step_table5, "throughput": step_throughput, "profile": step_profile, "embed": step_embed,
           "fused": step_fused, "tasks": step_tasks}


# --------------------------------------------------------------------------- summary


def fmt(x, spec: str = ".3g", none: str = "–") -> str:
    return none if x is None else format(x, spec)


def summary_markdown(results: dict, status: dict) -> str:
    dev = results.get("device") or {}
    lines = ["### GPU check (`benchmarks/gpu_check.py`)", ""]
    if dev:
        peaks = dev.get("matmul_peak_flops", {})
        what = (f"{dev.get('name')} ({dev.get('memory_gib', 0):.0f} GiB, {dev.get('multiprocessors')} SMs), driver "
                f"{dev.get('driver')}" if dev.get("device", "").startswith("cuda") else
                f"CPU ({dev.get('name')}, {dev.get('cpu_count')} cores; the rehearsal)")
        lines += [f"Device: {what}, torch {dev.get('torch')}, CUDA {dev.get('cuda')}, cuDNN {dev.get('cudnn')}, "
                  f"commit {dev.get('commit')}. Measured matmul peaks ({dev.get('matmul_size')}^3): "
                  + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in peaks.items()) + ".", ""]
    lines += ["| step | status | seconds | limit |", "|---|---|---|---|"]
    for name, st in status.items():
        lines.append(f"| {name} | {st['status']} | {fmt(st.get('seconds'), '.0f')} | {fmt(st.get('limit_s'), 'd')} |")
    lines.append("")
    def _tests(t):
        lines = []
        counts = ", ".join(f"{v} {k}" for k, v in t["counts"].items())
        lines += [f"**Suite on the device** (`{t['command']}`): {counts}."]
        lines += [f"- `{c['test']}`: {c['outcome']}" + (f" ({c['detail']})" if c["detail"] else "") for c in t["cases"]]
        lines.append("")
        return lines

    def _resume(r):
        lines = []
        lines += [f"**Resume** (2-layer ELMo LSTM {r['sizes']['cell']}/{r['sizes']['proj']}, recurrent dropout 0.1, "
                  f"carried state, batch {r['sizes']['batch']} x {r['sizes']['bptt']}, {r['sizes']['steps']} steps): "
                  f"SIGTERM after the first checkpoint, stopped at step {r['stopped_at_step']} "
                  f"(exit {r['stop_exit']}), "
                  f"rerun; resumed vs uninterrupted: max |diff| {fmt(r['resumed']['max_abs_diff'])}, bit-equal "
                  f"{r['resumed']['bit_equal']}; two uninterrupted runs: max |diff| "
                  f"{fmt(r['noise_floor']['max_abs_diff'])}"
                  f" (the tolerance); heldout {r['heldout']['metric']} {fmt(r['heldout']['uninterrupted'], '.6g')} / "
                  f"{fmt(r['heldout']['resumed'], '.6g')}. {'PASS' if r['ok'] else 'FAIL'}.", ""]
        return lines

    def _table4(t4):
        lines = []
        lines += [f"**Table 4** (S1: `{t4['commands']['s1']}`; S2: `{t4['commands']['s2']}`)", "",
                  "| Layer | Params | Max batch (peak MB) | S1 | S2 | paper max batch | paper S1 | paper S2 |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in t4["rows"]:
            p = PAPER_T4.get(row["label"], (None, None, None))
            first = row is t4["rows"][0]
            s1_ms = row["s1_step_s"] and row["s1_step_s"] * 1e3
            s1 = f"{fmt(s1_ms, '.1f')} ms" if first else f"{fmt(row['s1_ratio'], '.2f')}x"
            s2 = f"{fmt(row['s2_s_per_mwords'], '.2f')} s/1M words" if first else f"{fmt(row['s2_ratio'], '.2f')}x"
            ps1 = f"{p[1]}s" if first else f"{p[1]:.2f}x"
            ps2 = f"{p[2]}s" if first else f"{p[2]:.2f}x"
            lines.append(f"| {row['label']} | {row['params_paper_size'] / 1e6:.0f}M | {row['max_batch']} "
                         f"({fmt(row['peak_mb'], '.0f')}) | {s1} | {s2} | {p[0]} | {ps1} | {ps2} |")
        lines.append("")
        return lines

    def _table5(t5):
        lines = []
        encoders = list(dict.fromkeys(r["encoder"] for r in t5["rows"]))
        lines += [f"**Table 5** (`{t5['command']}`; seconds per 1M words for CONT, ratio to CONT otherwise; "
                  "paper's in brackets)", "", "| Layer | " + " | ".join(encoders) + " |",
                  "|---|" + "---|" * len(encoders)]
        for layer in dict.fromkeys(r["layer"] for r in t5["rows"]):
            cells = []
            for enc in encoders:
                row = next(r for r in t5["rows"] if r["encoder"] == enc and r["layer"] == layer)
                paper = PAPER_T5.get(enc, {}).get(layer)
                ours = f"{row['s_per_mwords']:.2f}s" if layer == "CONT" else f"{row['ratio']:.2f}x"
                theirs = "OOM" if paper is None else f"{paper:.2f}" + ("s" if layer == "CONT" else "x")
                cells.append(f"{ours} ({theirs})")
            lines.append(f"| {layer} | " + " | ".join(cells) + " |")
        lines.append("")
        return lines

    def _throughput(tp, title="**Training throughput**"):
        lines = []
        lines += [f"{title} (one device; the paper's per-card batch; 793,471 words; MFU against the "
                  "measured matmul peak of the same precision; FLOPs counted as in `step_flops`)", "",
                  "| model | precision | LSTM path | batch x bptt (dirs) | params | tokens/s | step ms | peak GiB "
                  "| TFLOP/s | MFU |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for row in tp["rows"]:
            step_ms = row.get("step_s") and row["step_s"] * 1e3
            mfu = row.get("mfu") and row["mfu"] * 100
            lines.append(f"| {row['model']} | {row['precision']} | {row.get('path', 'old')} "
                         f"| {row['batch_per_card']} x {row['bptt']} "
                         f"({2 if row['joint'] else 1}) | {row['params'] / 1e6:.0f}M | "
                         f"{fmt(row.get('tokens_per_s'), ',.0f')} | {fmt(step_ms, '.1f')} | "
                         f"{fmt(row.get('peak_mem_gib'), '.1f')} | {fmt(row.get('achieved_tflops'), '.1f')} | "
                         f"{fmt(mfu, '.0f')}% |"
                         + (f" {row['error']}" if "error" in row else ""))
        lines += [""] + [f"- {p}: ELMo-C / ELMo tokens/s {v['elmo_c_over_elmo']:.2f}x, ELMo-C / ELMo-A "
                         f"{fmt(v['elmo_c_over_elmo_a'], '.2f')}x (paper: 4.2x ELMo per token)"
                         for p, v in tp.get("ratios", {}).items()]
        lines.append("")
        return lines

    def _counts(counts):
        lines = ["Operators, casts and products per step (`benchmarks/lstm_profile.py`, tiny models; "
                 "`cpu_temps`: casts the CPU backend makes inside mixed-dtype operators; `host`: operators outside "
                 "compiled regions + one per compiled call; kernel and graph launches on CUDA; `records`: CUDA "
                 "graphs recorded during the profiled step, 0 when it replays):", "",
                 "| model | precision | LSTM path | bptt | ops | host | casts | cpu_temps | bf16 products "
                 "| fp32 products | kernel launches | graph launches | records | skips |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {c['model']} | {c['precision']} | {c['path']} | {c['bptt']} | {c['ops']:g} "
                  f"| {fmt(c.get('host'), 'g')} | {fmt(c['casts'], 'g', 'n/r')} "
                  f"| {fmt(c['cpu_temps'], 'g', 'n/r')} | {fmt(c['mm_bf16'], 'g', 'n/r')} "
                  f"| {fmt(c['mm_fp32'], 'g', 'n/r')} | {fmt(c.get('kernel_launches'), '.0f')} "
                  f"| {fmt(c.get('graph_launches'), '.0f')} "
                  f"| {fmt(c.get('graph_records') if c.get('kernel_launches') is not None else None, 'g')} "
                  f"| {fmt(c.get('cudagraph_skips') if c.get('kernel_launches') is not None else None, 'g')} |"
                  for c in counts]
        if any(c["casts"] is None for c in counts):
            lines += ["", "n/r: not recorded; this torch's profiler gives no input dtypes, so casts and products "
                          "cannot be told apart by dtype"]
        return lines + [""]

    def _fused(fu):
        lines = _throughput(fu, "**ELMo-C with the fused cell** (path `fused`: `fused_cell: true`, the compiled time "
                                "loops; path `layer`: `fused_cell: layer`, each layer one graph with its autograd "
                                "backward; warm-up steps, compilation included: "
                                + ", ".join(f"{r.get('path', 'fused')} {r['precision']} {fmt(r.get('warmup_s'), '.0f')} s"
                                            for r in fu["rows"]) + ")")
        tests = fu.get("tests", {})
        lines += ["Its gpu tests (`tests/encoders/test_fused_lstm.py`, `test_fused_layer.py`): " + ", ".join(
            f"{c['test'].rsplit('::', 1)[-1]} {c['outcome']}" for c in tests.get("cases", [])), ""]
        graphs = fu.get("cudagraphs")
        if graphs:
            lines += [f"CUDA graphs over the timed rows: {graphs['recordings']} recordings, {graphs['rerecordings']} "
                      f"re-recordings, {graphs['skips']} skips; counters {graphs['counters']}"]
            lines += [f"- `{m}`" for m in graphs["messages"][:5]]
            lines.append("")
        return lines + _counts(fu["counts"])

    def _profile(pr):
        lines = []
        lines += [f"**Profile of the ELMo-C step** (batch {pr['batch']} x {pr['bptt']}, fp32, "
                  f"{pr['active_steps']} steps): "
                  f"kernel launches per step {fmt(pr['kernel_launches_per_step'], '.0f')}, memcpy calls per step "
                  f"{fmt(pr['memcpy_calls_per_step'], '.0f')}, kernel time {pr['kernel_time_ms_per_step']:.1f} ms "
                  "per step. "
                  "Top kernels:", "", "| kernel | calls/step | ms/step | share |", "|---|---|---|---|"]
        lines += [f"| `{k['name'][:80]}` | {k['calls_per_step']:.0f} | {k['ms_per_step']:.2f} | "
                  f"{k['share'] * 100:.0f}% |"
                  for k in pr["top"][:10]]
        lines.append("")
        for precision, p in pr.get("by_precision", {}).items():
            lines.append(f"- {precision}: kernel launches per step {fmt(p['kernel_launches_per_step'], '.0f')}, "
                         f"kernel time {p['kernel_time_ms_per_step']:.1f} ms per step")
        lines.append("")
        if pr.get("counts"):
            lines += _counts(pr["counts"])
        for hs in (pr["host_syncs"], pr.get("host_syncs_host_resident")):
            if hs:
                lines += [f"Host syncs (`{hs['command']}`): " + ("; ".join(
                    f"{r['layer']} {r['syncs_per_step']:.1f}/step ({r['ms_per_step']:.1f} ms/step; {r['sites']})"
                    for r in hs.get("rows", [])) or hs.get("note", "")), ""]
        return lines

    def _embed(em):
        lines = []
        e = em["elmoc"]
        vs = em["vs_allennlp"]
        lines += [f"**Embedding** ({em['weights']}; {em['sentences']} sentences, {em['tokens']} tokens): "
                  f"`elmoc embed` on the device {e['tokens_per_s_device']:,.0f} tokens/s (whole command, startup "
                  f"included), on the CPU {e['tokens_per_s_cpu']:,.0f} ({e.get('cpu_sentences')} sentences, "
                  f"{e.get('threads')} threads); "
                  f"device vs CPU max |diff| {fmt(e['device_vs_cpu']['max_abs_diff'])}."]
        if "skipped" in vs:
            lines.append(f"AllenNLP: not run ({vs['skipped']}).")
        else:
            lines.append(f"Against AllenNLP `_ElmoBiLm` on the same device (`{vs['command']}`): elmoc / AllenNLP "
                         f"{vs['speedup']:.2f}x tokens/s ({vs['speedup_after_startup']:.2f}x without startup), "
                         "max |diff| "
                         f"{fmt(vs['max_abs_diff'])}.")
        lines += [f"- {k} copy: {c['tokens_per_s']:,.0f} tokens/s on the device, {c['size_mb']:.0f} MB "
                  f"(float32 {em['size_mb_float32']:.0f} MB), max |diff| vs float32 {fmt(c['max_abs_diff_vs_float32'])}"
                  for k, c in em["copies"].items()]
        lines.append("")
        return lines

    def _tasks(ta):
        failed = [f"`{part['command']}` failed ({part['error']}; see tasks.log)" for part in
                  (ta["durations"], ta["srl_loops"], ta["highway"]) if "error" in part]
        lines = [f"**Task stage on the device**: {'; '.join(failed)}.", ""] if failed else []
        if "error" in ta["durations"]:
            return lines
        d = ta["durations"]
        measured = d["device"].startswith("cuda")
        lines += [f"**Task stage on the device** (`{d['command']}`; timed steps {d['steps']} after one warm-up; step ms "
                  + ("synchronized wall time, model + its batch's copy, collate on the host" if measured else
                     "CPU seconds of the process (the rehearsal)")
                  + f"; GPU hours per seed {'measured' if measured else 'derived'}, low-high bound)", "",
                  "| task | batch | step ms (collate + model) | kernels/step" + (" (GPU: launches, kernels run)" if measured else
                                                                     " (CPU: aten ops)")
                  + " | eval ms (collate + model) | first step s "
                  "| collate share (built ahead) | GPU h per seed | 24 h jobs |", "|---|---|---|---|---|---|---|---|---|"]
        rows = {**d["tasks"], **{(k if k != "srl" else "srl, beside its loops"): v
                                 for k, v in ta["srl_loops"].get("tasks", {}).items()}}
        for label, t in rows.items():
            first = max(t.get("train_warmup_s") or 0, t.get("eval_warmup_s") or 0) or None
            lines.append(
                f"| {label} | {t['batch_size']} | {1e3 * (t['train_collate_s'] + t['train_model_s']):.1f} "
                f"({1e3 * t['train_collate_s']:.1f} + {1e3 * t['train_model_s']:.1f}) | {t['train_kernels']}"
                + (f", {t['train_gpu_kernels']}" if "train_gpu_kernels" in t else "") + " "
                f"| {1e3 * (t['eval_collate_s'] + t['eval_model_s']):.1f} ({1e3 * t['eval_collate_s']:.1f} + "
                f"{1e3 * t['eval_model_s']:.1f}) | {fmt(first, '.1f')} | {t['high']['train_collate_share']:.0%} "
                f"({t['high']['train_collate_exposed']:.0%}) | {t['low']['seed_h']:.2f}-{t['high']['seed_h']:.1f} "
                f"| {t['jobs']} |")
        lines += ["", f"SRL's loops (one process, the first row its default loop again): `{ta['srl_loops']['command']}`."]
        hw = ta["highway"]
        if "error" in hw:
            return lines + [""]
        sides = hw["sides"]
        text = "; ".join(f"{side} {v['best']['wall_s'] * 1e3:.1f} ms (warm-up {v['warmup_s']:.1f} s; {v['ready']})"
                         for side, v in sides.items())
        ratio = hw.get("allennlp_over_elmoc")
        lines += ["", f"SRL's encoder alone, forward + backward, best of {hw['sizes']['rounds']} "
                  f"(batch {hw['sizes']['batch']} x {hw['sizes']['length']}, {hw['sizes']['layers']} x "
                  f"{hw['sizes']['hidden']}; `{hw['command']}`): {text}; "
                  + (f"AllenNLP / elmoc {ratio['wall_s']:.2f}x wall." if ratio else
                     f"AllenNLP not run ({hw.get('allennlp_skipped', 'no --allennlp-python')})."), ""]
        return lines

    renderers = {"tests": _tests, "resume": _resume, "table4": _table4, "table5": _table5,
                 "throughput": _throughput, "profile": _profile, "embed": _embed, "fused": _fused, "tasks": _tasks}
    for step, render in renderers.items():
        if results.get(step):
            try:
                lines += render(results[step])
            except (KeyError, TypeError, ValueError, StopIteration) as e:  # an older or partial result
                lines += [f"**{step}**: its result could not be rendered ({type(e).__name__}: {e}); "
                          f"see {step}.json", ""]
    return "\n".join(lines) + "\n"


def write_summary(out: Path, status: dict, sources: list[Path] | None = None) -> None:
    """summary.json and summary.md in ``out`` of every step result in ``sources`` (default ``out``):
    ``<step>.json`` and its outcome ``<step>.status.json``.  With several folders (the device commands'
    runs) each step comes from the first folder that holds it, and every folder's device is listed."""
    results, devices = {}, []
    for folder in sources or [out]:
        if (folder / "device.json").is_file():
            devices.append(json.loads((folder / "device.json").read_text()))
        for name in STEPS:
            path, saved = folder / f"{name}.json", folder / f"{name}.status.json"
            if name in results or not (path.is_file() or saved.is_file()):
                continue
            if path.is_file():
                results[name] = json.loads(path.read_text())
            if name not in status:  # the driver passes the outcomes of the steps it ran
                status[name] = (json.loads(saved.read_text()) if saved.is_file() else
                                {"status": "ok" if results[name].get("ok", True) else "failed (checks)"})
                if len(sources or [out]) > 1:
                    status[name]["from"] = str(folder)
    ordered = {n: status[n] for n in STEPS if n in status}
    write_json(out / "summary.json", {"status": ordered, "results": results, "devices": devices})
    markdown = summary_markdown(results, ordered)
    names = sorted({f"{d.get('name')} (driver {d.get('driver')}, torch {d.get('torch')})" for d in devices})
    if len(names) > 1:
        markdown += "\nThe runs merged here ran on different devices: " + "; ".join(names) + ".\n"
    (out / "summary.md").write_text(markdown)


# --------------------------------------------------------------------------- driver


def worker_main(args) -> int:
    out = Path(args.out)
    os.environ.update(PYTHONPATH=child_env()["PYTHONPATH"])
    sys.path.insert(0, str(ROOT / "src"))
    with open(out / f"{args.worker}.log", "a") as log:
        start = time.perf_counter()
        try:
            result = WORKERS[args.worker](args, out, log)
        except Exception:  # noqa: BLE001 - the step failed: its traceback goes to its log, the driver goes on
            import traceback

            log.write(traceback.format_exc())
            return 3
        result["step_seconds"] = time.perf_counter() - start
        write_json(out / f"{args.worker}.json", result)
    return 0 if result.get("ok", True) else 1


def refuse_without_cuda(device: str) -> str | None:
    if not device.startswith("cuda"):
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (f"gpu_check: --device {device} needs a CUDA GPU and none is visible here (torch {torch.__version__}, "
            f"CUDA build {torch.version.cuda}); rehearse on the CPU with --device cpu --tiny")


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (the CPU rehearsal)")
    groups = "; ".join(f"{k}: {'+'.join(v)}" for k, v in GROUPS.items())
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated steps to run (in the plan's order), or a group of docs/full-run.md "
                        f"({groups}); default all: {','.join(STEPS)}")
    parser.add_argument("--out", default="results/gpu-check", help="output folder (default results/gpu-check)")
    parser.add_argument("--scratch", default=None, help="folder for models, tables and training runs (default: a "
                        "temporary folder, removed at the end)")
    parser.add_argument("--budget-s", type=float, default=1500.0,
                        help="seconds for all the steps together (default 1500 = 25 minutes); a step's limit is its "
                        "own (--plan) or what is left of the budget, whichever is less")
    parser.add_argument("--memory-budget-mb", type=float, default=11000.0,
                        help="Table 4 S2 memory budget (default 11000: the paper's 11 GB GTX 1080 Ti, as "
                        "config/paper.yaml)")
    parser.add_argument("--table5-batch", type=int, default=128,
                        help="Table 5 batch (default 128, config/paper.yaml's)")
    parser.add_argument("--allennlp-python", default=None,
                        help="python of an AllenNLP environment (default: .bench-venv/bin/python, else this python "
                        "if it imports allennlp; without one the embed step runs elmoc alone)")
    parser.add_argument("--commit", default=None,
                        help="commit to record (default: git rev-parse HEAD, where .git exists)")
    parser.add_argument("--plan", action="store_true", help="print the plan (steps, limits, estimates) and exit")
    parser.add_argument("--summarize", metavar="DIR", nargs="+", default=None,
                        help="write summary.json/summary.md into --out from the step results in these folders "
                        "(e.g. the three device commands' unpacked) and exit")
    parser.add_argument("--worker", choices=STEPS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    steps = GROUPS.get(args.steps) or tuple(s.strip() for s in args.steps.split(",") if s.strip())
    bad = sorted(set(steps) - set(STEPS))
    if bad or not steps:
        parser.error(f"--steps: unknown step(s) {', '.join(bad) or '(none)'}; choose from {', '.join(STEPS)} "
                     f"or a group {', '.join(GROUPS)}")
    args.step_list = [s for s in STEPS if s in steps]
    return args


def print_plan(args) -> None:
    col = 1 if args.tiny else 0
    total_limit = total_est = 0
    print(f"{'step':<11} {'limit s':>7} {'estimate s (H100/H200)':>22}")
    for s in args.step_list:
        total_limit += LIMITS[s][col]
        total_est += ESTIMATES[s]
        print(f"{s:<11} {LIMITS[s][col]:>7} {ESTIMATES[s]:>22}")
    print(f"{'total':<11} {total_limit:>7} {total_est:>22}   (budget {args.budget_s:.0f} s caps the limits)")


def end_group(pgid: int, wait_s: float = 10.0) -> None:
    """Kill what is left of a finished step's process group and wait until it is gone.

    ``timeout`` leads the group of its step, but its exit only means the step's own
    process ended: a process that one started (``elmoc train`` saving a checkpoint on the
    SIGTERM the limit sent) may still be running, and the next step must not share the
    machine with it.
    """
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.1)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.summarize:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_summary(out, {}, [Path(d) for d in args.summarize])
        print((out / "summary.md").read_text(), end="")
        return 0
    if args.plan:
        print_plan(args)
        return 0
    refusal = refuse_without_cuda(args.device)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    if args.worker:
        return worker_main(args)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.device == "cpu":
        # the rehearsal runs the Python time loop, the one CUDA tensors take (and no C++ build)
        os.environ.setdefault("ELMOC_NATIVE_LSTM", "0")
    own_scratch = args.scratch is None
    scratch = Path(tempfile.mkdtemp(prefix="elmoc-gpu-check-")) if own_scratch else Path(args.scratch).resolve()
    commit = args.commit or git_commit()
    status: dict[str, dict] = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    deadline = time.monotonic() + args.budget_s
    col = 1 if args.tiny else 0
    try:
        for name in args.step_list:
            limit = int(min(LIMITS[name][col], deadline - time.monotonic()))
            if limit < 5:
                status[name] = {"status": "not run: budget spent", "limit_s": limit}
                write_json(out / f"{name}.status.json", status[name])
                write_summary(out, status)
                continue
            for stale in (out / f"{name}.json", out / f"{name}.log", out / f"{name}.status.json"):
                stale.unlink(missing_ok=True)
            cmd = ["timeout", "--kill-after=15", str(limit), sys.executable, str(Path(__file__).resolve()),
                   "--worker", name, "--device", args.device, "--out", str(out), "--scratch", str(scratch),
                   "--memory-budget-mb", str(args.memory_budget_mb), "--table5-batch", str(args.table5_batch)]
            cmd += ["--tiny"] if args.tiny else []
            cmd += ["--allennlp-python", args.allennlp_python] if args.allennlp_python else []
            cmd += ["--commit", commit] if commit else []
            print(f"[gpu_check] {name} (limit {limit} s) ...", flush=True)
            start = time.perf_counter()
            with open(out / f"{name}.log", "a") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT)
                try:
                    rc = proc.wait()
                except BaseException:  # the driver stopped (SIGTERM, Ctrl-C): so does the step (timeout's group)
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait()
                    status[name] = {"status": "stopped: the check was interrupted", "limit_s": limit,
                                    "seconds": time.perf_counter() - start}
                    write_json(out / f"{name}.status.json", status[name])
                    write_summary(out, status)
                    raise
            seconds = time.perf_counter() - start
            end_group(proc.pid)
            state = {0: "ok", 1: "failed (checks)", 3: "failed (error, see its log)", 124: "timed out",
                     137: "timed out (killed)"}.get(rc, f"failed (exit {rc})")
            if rc not in (0, 1) or not (out / f"{name}.json").is_file():
                (out / f"{name}.json").unlink(missing_ok=True)
            status[name] = {"status": state, "seconds": seconds, "limit_s": limit, "exit": rc}
            write_json(out / f"{name}.status.json", status[name])
            print(f"[gpu_check] {name}: {state} in {seconds:.0f} s (log {out / (name + '.log')})", flush=True)
            write_summary(out, status)
    finally:
        if own_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    write_summary(out, status)
    print(f"[gpu_check] summary: {out / 'summary.md'}")
    return 0 if all(s["status"] == "ok" for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
