"""Helpers of the data-parallel tests (tests/train/test_ddp.py, tests/joint/test_joint_ddp.py,
tests/masked/test_masked_ddp.py, tests/train/test_transformer_lm.py): a free TCP port for the gloo
rendezvous, the spawn of the workers and their common ending, the largest difference of two nested
states, and the 1-process reference of a data-parallel run whose output layer draws negatives per rank.

A worker process that dies after its work is done, in gloo's teardown or the interpreter's exit (a
C++ ``std::terminate`` seen once in CI: "terminate called without an active exception", SIGABRT,
no Python traceback), must neither fail the test nor hide a death during the work:
:func:`spawn_runs` records every rank's Python stacks on a fatal signal (``faulthandler``), and
:func:`finish_worker` writes the report and then waits for every rank before the teardown, so
"every report written" means every rank finished the work the test checks.  A death after that is
a warning with the stacks; a death before it fails with them."""
from __future__ import annotations

import faulthandler
import json
import os
import socket
import sys
import warnings
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.masking import MaskedLMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.train.heldout import evaluate_heldout
from elmoc.train.loop import detach_state, seed_everything
from elmoc.train.optim import build_optimizer, clip_global_norm


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _traced(rank: int, worker: Callable[[int, int, str], None], port: int, tmp: str) -> None:
    """``worker(rank, port, tmp)`` with this process's Python stacks written to
    ``tmp/fault{rank}.txt`` should a fatal signal (SIGABRT, SIGSEGV, ...) kill it."""
    with open(os.path.join(tmp, f"fault{rank}.txt"), "w") as trace:
        faulthandler.enable(trace, all_threads=True)
        worker(rank, port, tmp)
        sys.stdout.flush()
        sys.stderr.flush()


def join_gloo(rank: int, port: int, world: int) -> None:
    """The start of every worker: the torchrun variables set (so elmoc's ``train()`` sees a
    data-parallel run and joins this group rather than making one), one thread, and the gloo
    group joined at ``127.0.0.1:port``."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def finish_worker(tmp: str, rank: int, report: Any) -> None:
    """The end of every worker: ``tmp/report{rank}.json`` written (atomically), a barrier (so
    every rank has written its report before any tears down) and the process group destroyed."""
    path = os.path.join(tmp, f"report{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f)
    os.replace(path + ".tmp", path)
    dist.barrier()
    dist.destroy_process_group()


def spawn_runs(tmp: str, worker: Callable[[int, int, str], None], world: int, vocab_size: int,
               dim: int) -> list[dict]:
    """Writes ``tmp/vec.npy`` ((vocab_size, dim) standard normal floats, seed 0), runs
    ``worker(rank, port, tmp)`` in `world` spawned processes (a free port for the gloo
    rendezvous; the worker ends with :func:`finish_worker`) and returns what each rank
    wrote to ``tmp/report{rank}.json``.

    A process killed by a signal fails the call with every rank's stacks, unless every
    rank had written its report: then the death was in the teardown, after the work, and
    it is a warning (with the stacks) instead."""
    np.save(os.path.join(tmp, "vec.npy"),
            np.random.default_rng(0).standard_normal((vocab_size, dim)).astype("float32"))
    reports = [os.path.join(tmp, f"report{rank}.json") for rank in range(world)]
    try:
        mp.spawn(_traced, args=(worker, free_port(), tmp), nprocs=world, join=True)
    except mp.ProcessExitedException as e:
        stacks = "\n".join(f"--- rank {rank}:\n{_read(os.path.join(tmp, f'fault{rank}.txt'))}"
                           for rank in range(world))
        if e.signal_name is None or not all(os.path.exists(r) for r in reports):
            raise AssertionError(f"a worker died during the work: {e}\n{stacks}") from e
        warnings.warn(f"a worker died after every rank wrote its report (in the teardown): {e}\n{stacks}")
    out = []
    for path in reports:
        with open(path) as f:
            out.append(json.load(f))
    return out


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip() or "(no fatal signal recorded)"
    except OSError as e:
        return f"(unreadable: {e})"


def max_abs_diff(a, b, where="") -> float:
    """Largest |a - b| over nested dicts/lists of tensors; other values must be equal."""
    if isinstance(a, dict):
        assert sorted(a, key=str) == sorted(b, key=str), where
        return max([max_abs_diff(a[k], b[k], f"{where}.{k}") for k in a] or [0.0])
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        return max([max_abs_diff(x, y, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b))] or [0.0])
    if isinstance(a, torch.Tensor):
        assert a.shape == b.shape, where
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    assert a == b, f"{where}: {a!r} != {b!r}"
    return 0.0


def _rows_of(batch: LMBatch | BiLMBatch | MaskedLMBatch, rows: slice) -> LMBatch | BiLMBatch | MaskedLMBatch:
    """The rows `rows` of a window (of both directions' windows for a joint batch)."""
    if isinstance(batch, MaskedLMBatch):
        return batch.rows(rows)
    if isinstance(batch, BiLMBatch):
        return BiLMBatch(_rows_of(batch.forward, rows), _rows_of(batch.backward, rows))
    return LMBatch(batch.inputs[rows], batch.targets[rows], batch.mask[rows])


def reference_sampled(
    model_class: type[LanguageModel] | type[BidirectionalLM] | type,
    spec: dict[str, Any],
    vocab: Vocabulary,
    make_batches: Callable[[dict | None, int, int], Iterator],
    make_heldout: Callable[[], Iterator],
    world: int,
    draws_per_step: int = 1,
) -> tuple[dict, dict, dict]:
    """What `world` processes do, in one: the global batch of `make_batches(None, 0, 1)`,
    rank r's rows (the r-th of `world` equal slices) scored with rank r's negatives, and the
    per-rank mean losses averaged; the trainer's default clip_norm 1.0.

    Rank r's negatives at step s start at draw `draws_per_step * s` of its stream
    (seed, r): 1 for a one-direction LM, 2 for a joint bi-LM (forward, then backward).
    Returns (model state_dict, optimizer state_dict, heldout record of the final model
    on `make_heldout()` with carried state)."""
    seed_everything(spec["train"]["seed"])
    model = model_class.from_spec(spec, vocab)
    batch_size = spec["train"]["batch_size"]
    bundle = build_optimizer(spec["optimizer"], model, batch_size)
    params = [p for p in model.parameters() if p.requires_grad]
    layer, per = model.output_layer, batch_size // world
    states = [None] * world
    for step, (batch, _) in enumerate(make_batches(None, 0, 1)):
        bundle.set_lr(step + 1)
        bundle.zero_grad()
        for r in range(world):
            layer.set_process_rank(r)
            if hasattr(layer, "sampler"):  # a deterministic layer (a masked LM's CONT) draws nothing
                layer.sampler.draws = draws_per_step * step
            out, new_state = model(_rows_of(batch, slice(r * per, (r + 1) * per)), states[r])
            (out.loss_sum / out.num_tokens.clamp(min=1.0) / world).backward()
            states[r] = detach_state(new_state)
        clip_global_norm(params, 1.0)
        bundle.step()
    layer.set_process_rank(0)
    heldout = evaluate_heldout(model, make_heldout(), torch.device("cpu"), reset_state=False)
    return model.state_dict(), bundle.state_dict(), heldout
