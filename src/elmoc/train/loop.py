"""The one training loop: every output layer, every input layer, every encoder.

Read it top to bottom: build -> (resume) -> heldout eval -> for each window:
set LR, forward, backward, clip, step, carry state -> log / evaluate / checkpoint.
Output layers share one contract (``OutputLoss``), so nothing here branches on
which variant is being trained.

Loss reduction (spec P11): each process averages its loss over its valid tokens;
under data parallelism DDP then averages gradients over processes, which is the
paper's "mean of per-replica means".  Data parallelism is switched on by the usual
``torchrun`` environment (``WORLD_SIZE`` > 1); rank 0 logs, evaluates and saves.
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.distributed as dist

from elmoc.data.atomic import atomic_file
from elmoc.data.vocab import Vocabulary
from elmoc.errors import ConfigError
from elmoc.lm import LanguageModel, LMBatch
from elmoc.train.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from elmoc.train.optim import build_optimizer, clip_global_norm
from elmoc.train.precision import autocast_context, retain_freed_host_memory, to_device

log = logging.getLogger(__name__)


@dataclass
class TrainSettings:
    """The ``train`` section of an LM spec (defaults are the paper's ELMo-C values).

    Attributes:
        batch_size: global batch B (rows of the token stream), split over processes.
        bptt: window length in tokens (20).
        epochs: passes over the training shards.
        max_steps: stop after this many optimizer steps (None: run all epochs).
        clip_norm: global gradient-norm clip (1.0 for ELMo-C, 10.0 in bilm-tf).
        loss_scale: multiply the loss before backward (bilm-tf uses unroll_steps=20).
        reset_state: start every window from zero state (the released ELMo-C config,
            spec P1) instead of carrying the detached state (bilm-tf).
        seed: seeds torch, numpy, python and the batch shuffling.
        log_every, eval_every, checkpoint_every: in steps (0 = only at the end).
        eval_batch_size: rows per heldout batch (None: batch_size).
        eval_max_windows: cap on heldout windows per evaluation (None: all).
        precision: "fp32" or "bf16" (autocast on CUDA; on CPU bf16 autocast too).
    """

    batch_size: int = 64
    bptt: int = 20
    epochs: int = 10
    max_steps: int | None = None
    clip_norm: float = 1.0
    loss_scale: float = 1.0
    reset_state: bool = True
    seed: int = 1
    log_every: int = 100
    eval_every: int = 0
    checkpoint_every: int = 1000
    eval_batch_size: int | None = None
    eval_max_windows: int | None = None
    precision: str = "fp32"

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "TrainSettings":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - names)
        if unknown:
            raise ConfigError(f"train: unknown option(s) {unknown}; accepted: {sorted(names)}")
        settings = cls(**config)
        if settings.batch_size <= 0 or settings.bptt <= 0:
            raise ConfigError("train: batch_size and bptt must be positive")
        if settings.precision not in ("fp32", "bf16"):
            raise ConfigError(f"train.precision must be 'fp32' or 'bf16', got {settings.precision!r}")
        return settings


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> "Distributed":
        return cls(
            rank=int(os.environ.get("RANK", 0)),
            world_size=int(os.environ.get("WORLD_SIZE", 1)),
            local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        )


# A function that makes the training batch iterator from a saved position (or None)
# and this process's (rank, world_size); its iterator yields (LMBatch, next_position)
# where next_position resumes right after that batch, and it stops after the last
# epoch (the factory knows train.epochs).
BatchFactory = Callable[[dict | None, int, int], Iterator[tuple[LMBatch, dict]]]
# A function that yields heldout windows (LMBatch), in a fixed order.
HeldoutFactory = Callable[[], Iterator[LMBatch]]


@dataclass
class RunResult:
    steps: int
    tokens: int
    seconds: float
    heldout: list[dict] = field(default_factory=list)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def evaluate_heldout(model: LanguageModel, batches: Iterator[LMBatch], device: torch.device,
                     reset_state: bool, max_windows: int | None = None) -> dict[str, float]:
    """Heldout metric of ``model`` over ``batches`` (full softmax for the softmax family).

    Returns ``{"metric", "value", "loss", "eval_tokens"}``: "cosine" is the token-weighted
    mean cosine (higher is better), reported with ``constant_baseline``, the mean cosine
    of the best constant prediction; "perplexity" is exp of the mean NLL.
    """
    was_training = model.training
    model.eval()
    loss_total, tokens_total, cosine_total = 0.0, 0.0, 0.0
    metric = model.output_layer.heldout_metric
    table = getattr(model.output_layer, "target_table", None) if metric == "cosine" else None
    unit_sum = None  # sum of unit-normalized targets: gives the best constant predictor
    state = None
    for i, batch in enumerate(batches):
        if max_windows is not None and i >= max_windows:
            break
        batch = batch.to(device)
        out, state = model.evaluate(batch, None if reset_state else state)
        n = float(out.num_tokens)
        loss_total += float(out.loss_sum)
        tokens_total += n
        if "cosine" in out.logs:
            cosine_total += float(out.logs["cosine"]) * n
        if isinstance(table, torch.Tensor):
            targets = table[batch.targets[batch.mask].to(table.device)].double()
            unit = torch.nn.functional.normalize(targets, dim=-1).sum(0)
            unit_sum = unit if unit_sum is None else unit_sum + unit
    model.train(was_training)
    if tokens_total == 0:
        raise ConfigError("heldout set produced no tokens; check corpus.heldout settings")
    mean_loss = loss_total / tokens_total
    if metric == "perplexity":
        value = math.exp(min(mean_loss, 700.0))
    elif metric == "cosine":
        value = cosine_total / tokens_total
    else:
        value = mean_loss
    result = {"metric": metric, "value": value, "loss": mean_loss, "eval_tokens": int(tokens_total)}
    if unit_sum is not None:
        # mean cosine of the best *constant* prediction (|sum of unit targets| / N): an
        # LM must beat it; FastText tables from tiny corpora make it close to 1.
        result["constant_baseline"] = float(unit_sum.norm()) / tokens_total
    return result


def train(
    spec: dict[str, Any],
    vocab: Vocabulary | None,
    out_dir: str | Path,
    make_batches: BatchFactory,
    make_heldout: HeldoutFactory | None,
    *,
    direction: str = "forward",
    vocab_path: str | None = None,
    device: str | torch.device = "cpu",
    resume: bool = True,
    steps_per_epoch: int | None = None,
) -> RunResult:
    """Train one direction of an LM and write ``checkpoint.pt``, ``heldout.json`` and
    ``train_log.jsonl`` into ``out_dir``.

    With ``resume`` and an existing checkpoint, training continues exactly where it
    stopped (same weights, optimizer moments, data position, RNG and carried state).
    """
    settings = TrainSettings.from_config(spec.get("train", {}))
    retain_freed_host_memory()  # freed activations stay mapped: no page faults every step
    ddp = Distributed.from_env()
    device = torch.device(device)
    if ddp.enabled and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
        if device.type == "cuda":
            device = torch.device("cuda", ddp.local_rank)
            torch.cuda.set_device(device)
    if settings.batch_size % ddp.world_size:
        raise ConfigError(
            f"train.batch_size {settings.batch_size} is not divisible by the {ddp.world_size} processes; "
            "the batch size is global (the LR schedule depends on it)"
        )
    out_dir = Path(out_dir)
    ckpt_path = out_dir / "checkpoint.pt"
    seed_everything(settings.seed + ddp.rank)

    model = LanguageModel.from_spec(spec, vocab).to(device)
    bundle = build_optimizer(spec.get("optimizer", {"type": "scheduled_adam"}), model, settings.batch_size)
    step, tokens, position, state, history = 0, 0, None, None, []
    if resume and ckpt_path.exists():
        payload = load_checkpoint(ckpt_path, map_location=device)
        model.load_state_dict(payload["model"])
        bundle.load_state_dict(payload["optimizers"])
        step, tokens, position = payload["step"], payload["tokens"], payload["data"]
        state, history = payload.get("state"), payload.get("history", [])
        if ddp.is_main:
            set_rng_state(payload["rng"])
        log.info("resumed %s from step %d (%d tokens)", ckpt_path, step, tokens)
    core = model
    if ddp.enabled:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    def save(final: bool = False) -> None:
        if not ddp.is_main:
            return
        save_checkpoint(ckpt_path, {
            "spec": spec, "vocab_path": vocab_path, "direction": direction,
            "model": core.state_dict(), "optimizers": bundle.state_dict(),
            "step": step, "tokens": tokens, "data": position, "rng": rng_state(),
            "state": state, "history": history, "final": final,
        })

    def heldout(tag: str) -> None:
        if make_heldout is None or not ddp.is_main:
            return
        result = evaluate_heldout(core, make_heldout(), device, settings.reset_state, settings.eval_max_windows)
        result.update(step=step, tokens=tokens, tag=tag)
        history.append(result)
        log.info("heldout %s at step %d: %s = %.4f (loss %.4f over %d tokens)",
                 tag, step, result["metric"], result["value"], result["loss"], result["eval_tokens"])
        _append_jsonl(out_dir / "train_log.jsonl", {"event": "heldout", **result})

    out_dir.mkdir(parents=True, exist_ok=True)
    if step == 0:
        heldout("before")
    total_steps = settings.max_steps
    if total_steps is None and steps_per_epoch:
        total_steps = steps_per_epoch * settings.epochs
    params = [p for p in core.parameters() if p.requires_grad]
    model.train()
    t0, tokens_at_t0, steps_at_t0 = time.time(), tokens, step
    done = settings.max_steps is not None and step >= settings.max_steps
    for batch, next_position in ([] if done else make_batches(position, ddp.rank, ddp.world_size)):
        # next_position: where the iterator resumes after this batch (saved in checkpoints)
        batch = to_device(batch, device)  # pinned, non-blocking on CUDA
        lr = bundle.set_lr(step + 1)
        bundle.zero_grad()
        with autocast_context(device, settings.precision):
            out, new_state = model(batch, None if settings.reset_state else state)
        num_tokens = out.num_tokens.clamp(min=1.0)
        loss = out.loss_sum.float() / num_tokens
        (loss * settings.loss_scale).backward()
        loss = loss.detach()
        grad_norm = clip_global_norm(params, settings.clip_norm)
        bundle.step()
        state = None if settings.reset_state else core.encoder.detach_state(new_state)
        position = next_position
        step += 1
        step_tokens = int(batch.mask.sum()) * ddp.world_size
        tokens += step_tokens
        if ddp.is_main and (step % max(1, settings.log_every) == 0 or step == 1):
            elapsed = time.time() - t0
            speed = (tokens - tokens_at_t0) / max(elapsed, 1e-9)
            per_step = elapsed / max(1, step - steps_at_t0)
            eta = (total_steps - step) * per_step if total_steps else None
            record = {"event": "train", "step": step, "tokens": tokens, "lr": lr, "loss": float(loss),
                        "grad_norm": grad_norm, "tokens_per_s": speed, "eta_s": eta,
                        **{k: float(v) for k, v in out.logs.items()}}
            _append_jsonl(out_dir / "train_log.jsonl", record)
            eta_txt = f", ETA {eta / 60:.1f} min" if eta is not None else ""
            log.info("step %d%s: loss %.4f, lr %.2e, |g| %.3f, %.0f tok/s%s", step,
                     f"/{total_steps}" if total_steps else "", float(loss), lr, grad_norm, speed, eta_txt)
        if not math.isfinite(float(loss)):
            raise FloatingPointError(f"loss became {float(loss)} at step {step}; lower the learning rate")
        if settings.eval_every and step % settings.eval_every == 0:
            heldout(f"step{step}")
        if settings.checkpoint_every and step % settings.checkpoint_every == 0:
            save()
        if settings.max_steps is not None and step >= settings.max_steps:
            break
    heldout("after")
    save(final=True)
    seconds = time.time() - t0
    if ddp.is_main:
        summary = {
            "direction": direction, "steps": step, "tokens": tokens, "seconds": seconds,
            "metric": history[-1]["metric"] if history else None,
            "before": history[0]["value"] if history else None,
            "after": history[-1]["value"] if history else None,
            "constant_baseline": history[-1].get("constant_baseline") if history else None,
            "history": history, "trainable_parameters": core.num_trainable_parameters(),
        }
        _write_json(out_dir / "heldout.json", summary)
    if ddp.enabled:
        dist.barrier()
    return RunResult(steps=step, tokens=tokens, seconds=seconds, heldout=history)


def _append_jsonl(path: Path, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _write_json(path: Path, data: dict) -> None:
    with atomic_file(path) as f:
        f.write(json.dumps(data, indent=2) + "\n")
