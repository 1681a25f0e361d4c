"""The ELMo LSTM's three implementations side by side: C++ loop, Python loop, per-step reference.

Forward + backward of the 2-layer ``elmo_lstm`` encoder (same parameters, same
dropout masks) at the two sizes of the issue "Speed": batch 32 x 20 steps, cell
256 / projection 64 (demo size), and batch 64 x 20, 1024 / 256.  The three are
timed in interleaved rounds in one process; each figure is the fastest call.
``elmoc bench --tables lstm`` reports the C++-vs-reference ratio inside the full
benchmark; this script adds the Python loop, which isolates what the C++ loop buys.

Usage: python benchmarks/lstm_loops.py [--threads 1] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from elmoc.bench.reference_lstm import reference_forward
from elmoc.encoders.native import native_status
from elmoc.registry import build
from elmoc.train.precision import retain_freed_host_memory

SIZES = [(32, 20, 256, 64, 64), (64, 20, 1024, 256, 300)]  # batch, time, cell, projection, input


def fastest(fn, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_host_memory()
    print(f"threads {args.threads}; {native_status()}")
    print("batch x time, cell/proj | C++ loop ms | Python loop ms | reference ms | ref/C++ | ref/Python")
    for batch, steps, cell, proj, dim in SIZES:
        torch.manual_seed(0)
        enc = build("encoder", {"type": "elmo_lstm", "cell_size": cell, "projection_size": proj}, input_dim=dim)
        enc.train()
        x = torch.randn(batch, steps, dim)
        mask = torch.ones(batch, steps, dtype=torch.bool)

        def native_loop():
            torch.manual_seed(3)
            enc(x, mask).output.sum().backward()

        def python_loop():
            os.environ["ELMOC_NATIVE_LSTM"] = "0"
            try:
                native_loop()
            finally:
                os.environ.pop("ELMOC_NATIVE_LSTM")

        def reference():
            torch.manual_seed(3)
            masks = [enc._dropout_mask(batch, x) for _ in enc.lstm_layers]
            reference_forward(enc, x, mask, None, masks).output.sum().backward()

        runs = {"native": native_loop, "python": python_loop, "reference": reference}
        for fn in runs.values():
            fn()  # warm-up
        calls = 10 if cell <= 256 else 3
        best = {name: float("inf") for name in runs}
        for _ in range(args.rounds):
            for name, fn in runs.items():
                best[name] = min(best[name], fastest(fn, calls))
        ms = {name: 1e3 * s for name, s in best.items()}
        print(f"{batch}x{steps}, {cell}/{proj} | {ms['native']:.1f} | {ms['python']:.1f} | {ms['reference']:.1f} | "
              f"{ms['reference'] / ms['native']:.2f}x | {ms['reference'] / ms['python']:.2f}x")


if __name__ == "__main__":
    main()
