"""Measuring one training step: time, peak memory, matmul peak.

The step is the trainer's own (:func:`elmoc.train.loop.train_step`): forward under the
precision context, token-mean loss, backward, sparse-gradient exchange when data
parallel, global-norm clipping, optimizer step.  Batches are synthetic uniform token
ids (speed does not depend on the text).

Peak memory: on CUDA, ``torch.cuda.max_memory_allocated``.  On CPU there is no
allocator statistic, so the step runs in a forked child and the child's peak
resident set (``os.wait4`` rusage) minus that of an idle fork is the step's memory
(model, optimizer state and activations).
"""
from __future__ import annotations

import importlib
import logging
import os
import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from elmoc.data.batches import LMBatch
from elmoc.train.distributed import sparse_gradient_parameters
from elmoc.train.loop import TrainSettings, train_step
from elmoc.train.optim import build_optimizer

log = logging.getLogger(__name__)

OPTIMIZER = {"type": "scheduled_adam", "base_scale": 1.0e-4, "warmup": 10000}


def synthetic_batch(vocab_size: int, batch: int, seq_len: int, seed: int, device: torch.device) -> LMBatch:
    """Uniform random ids in ``[4, vocab)`` (past the specials).  Shapes (batch, seq_len)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab_size, (batch, seq_len + 1), generator=g)
    return LMBatch(ids[:, :-1].contiguous(), ids[:, 1:].contiguous(),
                   torch.ones(batch, seq_len, dtype=torch.bool)).to(device)


class TrainStep:
    """A callable doing one full training step of ``model`` on ``batch``: the trainer's
    :func:`~elmoc.train.loop.train_step` (so also its sparse-gradient exchange when
    ``model`` is data-parallel, from :func:`~elmoc.train.distributed.wrap_model`)."""

    def __init__(self, model: torch.nn.Module, batch: LMBatch, device: torch.device, precision: str = "fp32",
                 clip_norm: float = 1.0):
        self.model = model
        core = model.module if isinstance(model, DistributedDataParallel) else model
        self.world_size = dist.get_world_size() if core is not model else 1
        self.batch = batch
        self.device = device
        self.settings = TrainSettings(precision=precision, clip_norm=clip_norm)
        self.bundle = build_optimizer(OPTIMIZER, core, batch.inputs.shape[0] * self.world_size)
        self.params = [p for p in core.parameters() if p.requires_grad]
        self.sparse_params = sparse_gradient_parameters(core)
        self.steps = 0

    def __call__(self) -> float:
        self.model.train()
        self.steps += 1
        self.bundle.set_lr(self.steps)
        loss, _, _, _ = train_step(self.model, self.batch, None, self.bundle, self.params, self.settings,
                                   self.device, self.sparse_params, self.world_size)
        return float(loss)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int = 1) -> list[float]:
    """Wall seconds of ``repeats`` calls after ``warmup`` calls (device synchronized)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return times


def robust_seconds(times: list[float]) -> float:
    """The median: the machines are shared and noisy, a mean would follow the outliers."""
    return statistics.median(times)


def _fork_peak_kib(work: Callable[[], object] | None) -> int:
    """Peak RSS (KiB) of a forked child that runs ``work`` (or nothing) and exits."""
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            if work is not None:
                work()
        except BaseException:  # noqa: BLE001 - report failure (e.g. MemoryError) by exit code
            code = 3
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return -1
    return int(usage.ru_maxrss)


def peak_step_bytes(make_step: Callable[[], Callable[[], object]], device: torch.device) -> int:
    """Peak memory of building the step (optimizer, batch) and running it twice.

    Returns -1 when the step fails (e.g. out of memory).
    """
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        try:
            step = make_step()
            step()
            step()
        except torch.OutOfMemoryError:
            return -1
        return int(torch.cuda.max_memory_allocated(device) - base)
    # The first optimizer of a process imports torch._dynamo (seconds); imported here once, every
    # forked probe inherits it instead of importing it again (it was most of a probe's time).  Not
    # as ``import torch._dynamo``: that statement makes ``torch`` a local name of this whole
    # function, and the CUDA branch above failed with UnboundLocalError on its first GPU run.
    importlib.import_module("torch._dynamo")

    idle = _fork_peak_kib(None)

    def work():
        step = make_step()
        step()
        step()

    peak = _fork_peak_kib(work)
    return -1 if peak < 0 else max(0, peak - idle) * 1024


def max_batch_under_budget(peak_at: Callable[[int], int], budget_bytes: int, start: int = 8,
                           limit: int = 1 << 14, max_probes: int = 8) -> tuple[int, int]:
    """Largest batch whose measured peak memory fits ``budget_bytes``.

    Memory is affine in the batch, so from two fitting measurements the next probe is
    the extrapolated fit (at most 4x the last one); past the budget it bisects.  When
    ``start`` does not fit it halves the batch down to 1 (these probes are not counted in
    ``max_probes``).  Returns ``(batch, measured_peak_bytes)``; ``(0, peak of batch 1)``
    when even batch 1 does not fit: out of memory, as the paper's Table 5 records it.
    """
    fits: list[tuple[int, int]] = []
    too_big = limit + 1
    batch = start
    while True:  # down from start until one fits
        m = peak_at(batch)
        if 0 <= m <= budget_bytes:
            fits.append((batch, m))
            break
        too_big = batch
        if batch == 1:
            return 0, m
        batch = max(1, batch // 2)
    for _ in range(max_probes - 1):
        best, best_mem = max(fits)
        if too_big <= limit:
            nxt = (best + too_big) // 2
        elif len(fits) >= 2:
            (b1, m1), (b2, m2) = sorted(fits)[-2:]
            per_row = max((m2 - m1) / max(b2 - b1, 1), 1.0)
            nxt = min(4 * best, limit, int(best + (budget_bytes - best_mem) / per_row))
        else:
            nxt = min(2 * best, limit)
        if nxt <= best or nxt >= too_big:
            break
        m = peak_at(nxt)
        if 0 <= m <= budget_bytes:
            fits.append((nxt, m))
        else:
            too_big = nxt
    return max(fits)


def matmul_peak_flops(device: torch.device, size: int = 1024, seconds: float = 0.5,
                      dtype: torch.dtype = torch.float32) -> float:
    """Achieved FLOP/s of a square matmul on ``device`` (the best of several runs)."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    synchronize(device)
    best = 0.0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        a @ b
        synchronize(device)
        best = max(best, 2 * size**3 / (time.perf_counter() - t0))
    return best


def elmo_step_flops(tokens: int, input_dim: int, cell: int, proj: int, layers: int, out_dim: int) -> float:
    """Matmul FLOPs of a CONT training step on the ELMo encoder (forward x 3 for fwd+bwd)."""
    per_token = 2 * input_dim * proj  # input projection
    per_token += layers * 2 * (proj * 4 * cell + proj * 4 * cell + cell * proj)  # gates + projection
    per_token += 2 * proj * out_dim  # CONT projection
    return 3.0 * per_token * tokens
