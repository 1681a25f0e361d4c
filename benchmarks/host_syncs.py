"""Host syncs and time of one training step on a GPU, per output layer (issue #19 item 9).

For each output layer on the ELMo encoder (reduced by ``--width`` / ``--vocab`` like
``elmoc bench``), the trainer's ``train_step`` runs on a synthetic window moved with
``LMBatch.to`` (which keeps the CPU originals, as the trainer's ``to_device`` does):

* syncs/step: synchronizing CUDA calls per step, counted with
  ``torch.cuda.set_sync_debug_mode("warn")`` over ``--steps`` steps, and the source
  lines they come from (the step's own, not the benchmark's);
* ms/step: the median wall time of a step, the device synchronized after each.

A CPU cannot show either figure (nothing there waits for a device), so the script
needs CUDA and exits with status 2 without it.  Compare two commits by running it on
each (same machine, same arguments).

Usage: python benchmarks/host_syncs.py [--width 0.25] [--vocab 0.05] [--batch 64]
       [--steps 20] [--host-resident] [--layers SAMPLED FIXED ...]
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from elmoc.bench.measure import TrainStep, synthetic_batch
from elmoc.bench.scenarios import OUTPUT_LAYERS, Scale, build_spec
from elmoc.bench.speed import build_model
from elmoc.train.loop import train_step


def one_step(step: TrainStep) -> None:
    """``TrainStep`` without its ``float(loss)`` (a sync of the benchmark, not of the step)."""
    step.model.train()
    step.steps += 1
    step.bundle.set_lr(step.steps)
    train_step(step.model, step.batch, None, step.bundle, step.params, step.settings, step.device,
               step.sparse_params, 1)


def count_syncs(step: TrainStep, steps: int) -> tuple[float, collections.Counter]:
    """Synchronizing CUDA calls per step and a count per source line."""
    sites: collections.Counter = collections.Counter()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(steps):
                one_step(step)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for w in caught:
        if "synchronizing" in str(w.message):
            sites[f"{Path(w.filename).name}:{w.lineno}"] += 1
    return sum(sites.values()) / steps, sites


def step_ms(step: TrainStep, steps: int) -> float:
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        one_step(step)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=float, default=0.25)
    parser.add_argument("--vocab", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "tf32"))
    parser.add_argument("--host-resident", action="store_true", help="CONT/FIXED tables stay in CPU memory")
    parser.add_argument("--layers", nargs="+", default=list(OUTPUT_LAYERS), choices=OUTPUT_LAYERS)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("host_syncs.py measures a GPU's step; no CUDA device here", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    scale = Scale(width=args.width, vocab=args.vocab)
    print(f"{torch.cuda.get_device_name(device)}, width {args.width}, vocab {args.vocab}, batch {args.batch}, "
          f"{args.precision}, host_resident={args.host_resident}")
    print(f"{'layer':<10} {'syncs/step':>10} {'ms/step':>8}  sites (count over {args.steps} steps)")
    with tempfile.TemporaryDirectory() as scratch:
        for layer in args.layers:
            model = build_spec(layer, None, "ELMO", scale, Path(scratch), host_resident=args.host_resident)
            lm = build_model(model, device)
            batch = synthetic_batch(model.vocab_size, args.batch, model.seq_len, seed=0, device=device)
            step = TrainStep(lm, batch, device, precision=args.precision)
            for _ in range(3):  # warm-up: allocator, cuDNN/cuBLAS handles
                one_step(step)
            torch.cuda.synchronize()
            per_step, sites = count_syncs(step, args.steps)
            ms = step_ms(step, args.steps)
            where = ", ".join(f"{site} x{n}" for site, n in sites.most_common())
            print(f"{layer:<10} {per_step:>10.1f} {ms:>8.2f}  {where or '-'}")
            del step, lm, batch
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
