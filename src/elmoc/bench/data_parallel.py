"""Scenario S3: several data-parallel processes (DistributedDataParallel).

On a GPU machine each process owns one GPU (NCCL); on CPU the processes use the
gloo backend, one thread each - this measures the cost of exchanging each output
layer's gradients (e.g. SAMPLED's touched rows), not GPU scaling.  The process group,
the DDP wrapping and the step are the trainer's own (:mod:`elmoc.train.distributed`,
:func:`elmoc.train.loop.train_step`).  All models are timed inside one process
group, spawned once.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, jobs: list[dict], out_path: str, device_type: str,
            repeats: int) -> None:
    from elmoc.bench.measure import TrainStep, robust_seconds, synthetic_batch, time_calls
    from elmoc.lm import LanguageModel
    from elmoc.train.distributed import Distributed, wrap_model

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = Distributed(rank=rank, world_size=world, local_rank=rank).setup(device_type)  # the trainer's
    results = []
    for job in jobs:
        seconds, failed = None, False
        try:
            torch.manual_seed(1)
            model = LanguageModel.from_spec(job["spec"], range(job["vocab_size"])).to(device)
            ddp = wrap_model(model, device)  # the trainer's wrapping: sparse rows exchanged, tables never sent
            batch = synthetic_batch(job["vocab_size"], job["batch"], job["seq_len"], seed=rank + 1, device=device)
            step = TrainStep(ddp, batch, device)
            seconds = robust_seconds(time_calls(step, device, repeats=repeats, warmup=1))
        except torch.OutOfMemoryError:  # same model and batch on every rank: all run out alike
            failed = True
        model = ddp = step = batch = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
        flag = torch.tensor([1.0 if failed else 0.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # out of memory anywhere = out of memory
        results.append({"label": job["label"], "seconds": None if flag.item() else seconds})
    if rank == 0:
        tmp = out_path + ".tmp"
        Path(tmp).write_text(json.dumps(results))
        os.replace(tmp, out_path)
    dist.barrier()
    dist.destroy_process_group()


def run_data_parallel(jobs: list[dict], world: int, device_type: str = "cpu",
                      repeats: int = 3) -> dict[str, float | None]:
    """Median step seconds per job label, each step on ``world`` processes at once; None
    where a process ran out of device memory (Table 5 records it as OOM).

    ``jobs``: dicts with ``label``, ``spec`` (LM spec), ``vocab_size``, ``batch``
    (per process) and ``seq_len``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "s3.json")
        mp.spawn(_worker, args=(world, _free_port(), jobs, out, device_type, repeats), nprocs=world, join=True)
        return {r["label"]: r["seconds"] for r in json.loads(Path(out).read_text())}
