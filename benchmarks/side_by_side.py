"""Two sides timed side by side, each in its own long-lived worker process (issue 45): the worker's
loop, starting a worker, and the driver's alternating rounds. Used by
``highway_lstm_vs_allennlp.py`` and ``task_models_vs_allennlp.py``, whose workers are the script
itself run with ``--worker SIDE`` in that side's Python (AllenNLP's in its own venv).

The protocol: a worker builds its model and batch, runs one warm-up step, prints one JSON line
(``ready``: what it runs, torch's version and threads, the device, the warm-up's seconds), then for
each ``step`` line on stdin times one step and prints ``{"wall_s", "cpu_s"}``; any other line or
the end of stdin ends it. The driver asks each side in turn, alternating which goes first, and
keeps the best (least) wall and CPU seconds of each side.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


def add_arguments(p: argparse.ArgumentParser, seed: int) -> None:
    """The options every side-by-side script has: the hidden ``--worker``, threads, rounds, seed,
    device and the JSON output."""
    p.add_argument("--worker", choices=("elmoc", "allennlp"), help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5, help="timed steps per side, alternating which goes first")
    p.add_argument("--seed", type=int, default=seed)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]: both sides on that device")
    p.add_argument("--json", type=Path, help="write the figures here")


def refuse_a_missing_gpu(p: argparse.ArgumentParser, device: str) -> None:
    """A ``cuda`` device where none is visible: the parser's error (exit 2, one line)."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            p.error(f"--device {device}: no CUDA GPU is visible here; use --device cpu")


def worker_device(args: argparse.Namespace, what: str) -> tuple[object, Callable[[], None], dict]:
    """(torch device, its sync, the ready line's common part) of a worker: torch's threads and seed
    set from ``args``; ``what`` names the side's model."""
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    ready = {"ready": what, "torch": torch.__version__, "threads": torch.get_num_threads(), "device": str(device)}
    if device.type == "cuda":
        ready["device_name"] = torch.cuda.get_device_name(device)
    return device, sync, ready


def serve(step: Callable[[], None], sync: Callable[[], None], ready: dict) -> int:
    """The worker's side: ``step()`` once as the warm-up, print ``ready`` (with ``warmup_s``),
    then time one ``step()`` (``sync()`` before and after: a GPU's queued work) per ``step`` line."""
    start = time.perf_counter()
    step()
    sync()
    print(json.dumps({**ready, "warmup_s": time.perf_counter() - start}), flush=True)
    for line in sys.stdin:
        if line.strip() != "step":
            break
        sync()
        cpu, wall = time.process_time(), time.perf_counter()
        step()
        sync()
        print(json.dumps({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}), flush=True)
    return 0


def start(script: str | Path, python: str, side: str, argv: list[str], threads: int,
          src: Path | None = None) -> tuple[subprocess.Popen, dict]:
    """Start ``python script --worker side *argv`` with ``threads`` OpenMP/MKL threads (``src`` put
    first on its PYTHONPATH) and wait for its ready line; a worker that dies first is one line."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if src is not None:
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([python, str(Path(script).resolve()), "--worker", side, *argv], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{Path(script).stem}: error: the {side} worker ({python}) exited "
                         f"with {proc.wait()} before it was ready; see its messages above")
    return proc, json.loads(line)


def step(proc: subprocess.Popen) -> dict:
    """One timed step of a started worker."""
    proc.stdin.write("step\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def rounds(starters: dict[str, Callable[[], tuple[subprocess.Popen, dict]]], count: int) -> dict:
    """Start every side (``starters[side]()``), time ``count`` rounds, alternating which side goes
    first, and stop the workers. Returns ``{side: {**ready, "best": {wall_s, cpu_s}, "steps": [...]}}``."""
    sides: dict[str, tuple[subprocess.Popen, dict]] = {}
    try:
        for side, begin in starters.items():
            sides[side] = begin()
        times: dict[str, list[dict]] = {side: [] for side in sides}
        for r in range(count):
            for side in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                times[side].append(step(sides[side][0]))
    finally:
        for proc, _ in sides.values():
            if proc.poll() is None:
                proc.stdin.close()
                proc.wait()
    return {side: {**sides[side][1], "best": {k: min(t[k] for t in times[side]) for k in ("wall_s", "cpu_s")},
                   "steps": times[side]} for side in sides}


def ratio(result: dict) -> dict | None:
    """AllenNLP's best over elmoc's, wall and CPU; None when AllenNLP's side did not run."""
    if "allennlp" not in result:
        return None
    return {k: result["allennlp"]["best"][k] / result["elmoc"]["best"][k] for k in ("wall_s", "cpu_s")}


def finish(args: argparse.Namespace, result: dict) -> int:
    """Write ``result`` to ``--json`` where given; the driver's exit status."""
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0
