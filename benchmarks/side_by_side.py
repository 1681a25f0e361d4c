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

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


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
