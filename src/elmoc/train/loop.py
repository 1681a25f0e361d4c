"""The one training loop: every output layer, every input layer, every encoder.

Read it top to bottom: build -> (resume) -> heldout eval -> for each window:
set LR, forward, backward, clip, step, carry state -> log / evaluate / checkpoint.
Output layers share one contract (``OutputLoss``), so nothing here branches on
which variant is being trained.

Loss reduction (spec P11): each process averages its loss over its valid tokens;
under data parallelism DDP then averages gradients over processes, which is the
paper's "mean of per-replica means".  Data parallelism is switched on by the usual
``torchrun`` environment (``WORLD_SIZE`` > 1); every rank evaluates a share of the
heldout rows, rank 0 logs and saves (:mod:`elmoc.train.distributed`: DDP for dense
gradients, an explicit exchange of sparse ones, frozen tables never broadcast).

A joint bi-LM (``train.directions: joint``, ``--direction joint``) runs the same loop
with :class:`elmoc.lm.BidirectionalLM` and :class:`elmoc.lm.BiLMBatch` windows (the
forward and backward window of the same position): its loss is already the mean of
the two directions' token means, its carried state the pair of the directions' states,
and its token counts (``tokens`` in the log, checkpoints and heldout.json) count the
tokens of *both* directions.  Its heldout result is the combined metric plus each
direction's under ``"forward"`` / ``"backward"`` (:func:`evaluate_heldout`).
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
from elmoc.lm import JOINT, SEPARATE, BidirectionalLM, BiLMBatch, LanguageModel, LMBatch, is_joint
from elmoc.outputs.base import OutputLoss
from elmoc.train.checkpoint import (
    CHECKPOINT, HELDOUT, MODEL, TRAIN_LOG, InputFingerprints, check_resumable, config_hash, load_resume_state,
    load_weights, model_payload, rank_rng_state, remove_stale_temps, rng_state, save_checkpoint,
    set_aside_if_stale, set_rng_state, vocab_fingerprint,
)
from elmoc.train.distributed import (
    Distributed, all_reduce_sum, average_sparse_gradients, gather_state_rows, shard_rows, shard_state_rows,
    sparse_gradient_parameters, wrap_model,
)
from elmoc.train.optim import OptimizerBundle, build_optimizer, clip_global_norm
from elmoc.train.periodic import CheckpointTimer
from elmoc.train.precision import autocast_context, retain_freed_host_memory, to_device
from elmoc.train.schedule import check_type
from elmoc.train.signals import Deadline, StopSignals, stoppable

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
        loss_scale: multiply the loss before backward.  bilm-tf's total loss is
            ``0.5 * (loss_fwd + loss_bwd) * unroll_steps`` (20): a joint bi-LM with
            ``loss_scale: 20`` has exactly that gradient; a separate-direction run with
            ``loss_scale: 20`` has twice bilm-tf's gradient for its direction (its loss
            is one direction's mean, not half of it).
        reset_state: start every window from zero state (the released ELMo-C config,
            spec P1) instead of carrying the detached state (bilm-tf).
        seed: seeds torch, numpy, python and the batch shuffling.
        log_every, eval_every, checkpoint_every: in steps (0 = only at the end).
        checkpoint_minutes: also save ``checkpoint.pt`` when this many minutes of wall
            time passed since the last save (None: by steps only); measured on rank 0
            and agreed by all processes (:mod:`elmoc.train.periodic`).
        collective_timeout_minutes: how long a data-parallel process waits in a
            collective for the others (60: rank 0 writing a multi-GB checkpoint while
            the others wait must fit in it; NCCL's own default is 10 minutes).
        eval_batch_size: rows per heldout batch (None: batch_size).
        eval_max_windows: cap on heldout windows per evaluation (None: all).
        precision: "fp32", "bf16" (autocast on CUDA; on CPU bf16 autocast too) or "tf32"
            (opt-in: float32 tensors, CUDA matmuls and cuDNN on TensorFloat-32 tensor cores,
            process-wide from the first step; the same as fp32 on CPU).
        directions: "separate" (two runs, ``--direction forward`` and ``backward``) or
            "joint" (one :class:`elmoc.lm.BidirectionalLM`, ``--direction joint``: shared
            input and output layer, loss the mean of the two directions' means).
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
    checkpoint_minutes: float | None = None
    collective_timeout_minutes: float = 60.0
    eval_batch_size: int | None = None
    eval_max_windows: int | None = None
    precision: str = "fp32"
    directions: str = SEPARATE

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "TrainSettings":
        if not isinstance(config, dict):
            raise ConfigError(f"train must be a mapping of options, got {config!r}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - names)
        if unknown:
            raise ConfigError(f"train: unknown option(s) {unknown}; accepted: {sorted(names)}")
        for f in fields(cls):
            if f.name in config:
                check_type(f"train.{f.name}", config[f.name], str(f.type))
        settings = cls(**config)
        if settings.batch_size <= 0 or settings.bptt <= 0:
            raise ConfigError("train: batch_size and bptt must be positive")
        if (settings.checkpoint_minutes or 0) < 0 or settings.collective_timeout_minutes <= 0:
            raise ConfigError("train.checkpoint_minutes must be >= 0 (or null) and train.collective_timeout_minutes "
                              f"> 0; got {settings.checkpoint_minutes} and {settings.collective_timeout_minutes}")
        if settings.precision not in ("fp32", "bf16", "tf32"):
            raise ConfigError(f"train.precision must be 'fp32', 'bf16' or 'tf32', got {settings.precision!r}")
        is_joint({"train": {"directions": settings.directions}})  # "separate" or "joint", else one line
        return settings


# A function that makes the training batch iterator from a saved position (or None)
# and this process's (rank, world_size); its iterator yields (LMBatch, next_position)
# where next_position resumes right after that batch, and it stops after the last
# epoch (the factory knows train.epochs).  A joint run's yields BiLMBatch instead.
BatchFactory = Callable[[dict | None, int, int], Iterator[tuple[LMBatch | BiLMBatch, dict]]]
# A function that yields heldout windows (LMBatch; BiLMBatch for a joint run), in a fixed order.
HeldoutFactory = Callable[[], Iterator[LMBatch | BiLMBatch]]


@dataclass
class RunResult:
    steps: int
    tokens: int
    seconds: float
    heldout: list[dict] = field(default_factory=list)
    interrupted: str | None = None  # the stop signal's name (or "time-limit") when the run ended early


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_step(model: torch.nn.Module, batch: LMBatch | BiLMBatch, state: Any, bundle: OptimizerBundle,
               params: list[torch.nn.Parameter], settings: TrainSettings, device: torch.device,
               sparse_params: list[torch.nn.Parameter] = (), world_size: int = 1,
               ) -> tuple[torch.Tensor, OutputLoss, Any, torch.Tensor]:
    """One optimizer step (the learning rate is set by the caller): forward under the
    precision context, token-mean loss, backward, the sparse-gradient exchange under
    data parallelism, global-norm clipping, optimizer step.  The bench times this too.
    ``model(batch, state)`` is a LanguageModel's (LMBatch) or a BidirectionalLM's
    (BiLMBatch, state pair, loss the mean of the directions' means).

    Returns the detached loss, the output layer's result, the new encoder state and the
    gradient norm before clipping (0-dim tensors on the device: nothing here reads a value
    back to the host, so a GPU step does not wait for the previous one).
    """
    bundle.zero_grad()
    with autocast_context(device, settings.precision):
        out, new_state = model(batch, state)
    loss = out.loss_sum.float() / out.num_tokens.clamp(min=1.0)
    (loss * settings.loss_scale).backward()
    if world_size > 1:
        average_sparse_gradients(list(sparse_params), world_size)
    grad_norm = clip_global_norm(params, settings.clip_norm)
    bundle.step()
    return loss.detach(), out, new_state, grad_norm


def evaluate_heldout(model: LanguageModel | BidirectionalLM, batches: Iterator[LMBatch | BiLMBatch],
                     device: torch.device, reset_state: bool, max_windows: int | None = None,
                     ddp: Distributed | None = None) -> dict[str, Any]:
    """Heldout metric of ``model`` over ``batches`` (full softmax for the softmax family).

    Returns ``{"metric", "value", "loss", "eval_tokens"}``: "cosine" is the token-weighted
    mean cosine (higher is better), reported with ``constant_baseline``, the mean cosine
    of the best constant prediction; "perplexity" is exp of the mean NLL.

    A joint bi-LM (BiLMBatch windows) is evaluated per direction, each carrying its own
    state; the result is :func:`combine_directions` of the two, with each direction's
    result under ``"forward"`` and ``"backward"``.

    Under data parallelism every process calls it with the same ``batches``, evaluates
    rows ``rank::world`` of each window, and the sums (loss, tokens, cosine, unit
    targets) are all-reduced: every process returns the one-process result.
    """
    ddp = ddp or Distributed()
    joint = isinstance(model, BidirectionalLM)
    lms = {name: model.direction(name) for name in ("forward", "backward")} if joint else {None: model}
    sums = {name: _HeldoutSums(lm.output_layer) for name, lm in lms.items()}
    states: dict[str | None, Any] = dict.fromkeys(lms)
    was_training = model.training
    model.eval()
    for i, batch in enumerate(batches):
        if max_windows is not None and i >= max_windows:
            break
        batch = shard_rows(batch, ddp.rank, ddp.world_size)
        parts = {"forward": batch.forward, "backward": batch.backward} if joint else {None: batch}
        for name, part in parts.items():
            if part.inputs.shape[0] == 0:  # fewer heldout rows than processes
                continue
            part = part.to(device)
            out, states[name] = lms[name].evaluate(part, None if reset_state else states[name])
            sums[name].add(out, part)
    model.train(was_training)
    results = {name: acc.result(ddp, device) for name, acc in sums.items()}
    return combine_directions(results["forward"], results["backward"]) if joint else results[None]


class NonFiniteLossCheck:
    """A NaN or infinite training loss, noticed without a GPU sync per step (issue 19.9).

    :meth:`add` keeps a flag on the loss's device; :meth:`check` reads it back (one sync)
    and raises.  The loop checks at every log step and before every checkpoint save and
    heldout evaluation, so a diverged run never writes its weights and is stopped at most
    ``train.log_every`` steps after the loss went bad.
    """

    def __init__(self) -> None:
        self.flag: torch.Tensor | None = None
        self.checked_step = 0

    def add(self, loss: torch.Tensor) -> None:
        bad = ~torch.isfinite(loss)
        self.flag = bad if self.flag is None else self.flag | bad

    def check(self, step: int) -> None:
        if self.flag is not None and bool(self.flag):
            raise FloatingPointError(
                f"the training loss became NaN or infinite between steps {self.checked_step + 1} and {step}; "
                "lower the learning rate (train.log_every sets how often this is checked)")
        self.flag, self.checked_step = None, step


class _HeldoutSums:
    """Running sums of one direction's heldout evaluation (see :func:`evaluate_heldout`)."""

    def __init__(self, output_layer: torch.nn.Module):
        self.metric = output_layer.heldout_metric
        table = getattr(output_layer, "target_table", None) if self.metric == "cosine" else None
        self.table = table if isinstance(table, torch.Tensor) else None
        self.loss, self.tokens, self.cosine = 0.0, 0.0, 0.0
        # sum of unit-normalized targets: gives the best constant predictor
        self.unit_sum = None if self.table is None else torch.zeros(
            self.table.shape[1], dtype=torch.float64, device=self.table.device)

    def add(self, out: OutputLoss, batch: LMBatch) -> None:
        n = float(out.num_tokens)
        self.loss += float(out.loss_sum)
        self.tokens += n
        if "cosine" in out.logs:
            self.cosine += float(out.logs["cosine"]) * n
        if self.table is not None:
            targets = self.table[batch.targets[batch.mask].to(self.table.device)].double()
            self.unit_sum += torch.nn.functional.normalize(targets, dim=-1).sum(0)

    def result(self, ddp: Distributed, device: torch.device) -> dict[str, Any]:
        loss_total, tokens_total, cosine_total, unit_sum = self.loss, self.tokens, self.cosine, self.unit_sum
        if ddp.enabled:
            sums = torch.tensor([loss_total, tokens_total, cosine_total], dtype=torch.float64)
            if unit_sum is not None:
                sums = torch.cat([sums, unit_sum.cpu()])
            sums = all_reduce_sum(sums, device)
            loss_total, tokens_total, cosine_total = sums[:3].tolist()
            unit_sum = None if unit_sum is None else sums[3:]
        if tokens_total == 0:
            raise ConfigError("heldout set produced no tokens; check corpus.heldout settings")
        mean_loss = loss_total / tokens_total
        if self.metric == "perplexity":
            value = math.exp(min(mean_loss, 700.0))
        elif self.metric == "cosine":
            value = cosine_total / tokens_total
        else:
            value = mean_loss
        result = {"metric": self.metric, "value": value, "loss": mean_loss, "eval_tokens": int(tokens_total)}
        if unit_sum is not None:
            # mean cosine of the best *constant* prediction (|sum of unit targets| / N): an
            # LM must beat it; FastText tables from tiny corpora make it close to 1.
            result["constant_baseline"] = float(unit_sum.norm()) / tokens_total
        return result


def combine_directions(forward: dict[str, Any], backward: dict[str, Any]) -> dict[str, Any]:
    """A joint bi-LM's heldout result from its directions' (:func:`evaluate_heldout`).

    ``loss`` is the mean of the two directions' mean losses (the joint training loss);
    ``value`` is exp of it for "perplexity", the mean of the two mean cosines for
    "cosine" (``constant_baseline`` likewise), the loss otherwise; ``eval_tokens``
    counts both directions; ``"forward"`` and ``"backward"`` hold the directions' results.
    """
    metric = forward["metric"]
    loss = 0.5 * (forward["loss"] + backward["loss"])
    if metric == "perplexity":
        value = math.exp(min(loss, 700.0))
    elif metric == "cosine":
        value = 0.5 * (forward["value"] + backward["value"])
    else:
        value = loss
    result = {"metric": metric, "value": value, "loss": loss,
              "eval_tokens": forward["eval_tokens"] + backward["eval_tokens"]}
    if "constant_baseline" in forward:
        result["constant_baseline"] = 0.5 * (forward["constant_baseline"] + backward["constant_baseline"])
    return {**result, "forward": forward, "backward": backward}


@stoppable
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
    spec_path: str | Path | None = None,
    stop: StopSignals | None = None,
    stale_checkpoint: str = "refuse",
    stop_margin_s: float | None = None,
) -> RunResult:
    """Train one direction of an LM (``direction`` "forward" or "backward"), or a joint
    bi-LM (``direction="joint"``, for a spec with ``train.directions: joint``; the batch
    factories then yield BiLMBatch): ``checkpoint.pt`` every ``checkpoint_every`` steps,
    ``train_log.jsonl`` as it goes, and at the very end ``model.pt`` and ``heldout.json``
    in ``out_dir`` (formats and resume rules: :mod:`elmoc.train.checkpoint`).

    With ``resume`` and an existing checkpoint, training continues exactly where it
    stopped (same weights, optimizer moments, data position, RNG and carried state), after
    checking that the checkpoint belongs to this spec, direction and vocabulary; the log
    is cut back to the checkpoint, so it reads as one uninterrupted run.  Without
    ``resume`` an existing checkpoint is deleted first.  ``spec_path`` only names the spec
    in error messages.  ``stale_checkpoint="set-aside"`` moves a checkpoint of another
    spec, direction or vocabulary aside and starts afresh instead of refusing it (the
    workflow's choice: a changed config reruns the job).  A checkpoint is stale too when
    an input file the spec names changed since it was written (:class:`InputFingerprints`).
    On SIGTERM/SIGUSR1/SIGINT (``stop``, installed by ``@stoppable``) the current step is
    finished, the checkpoint saved, and the result has ``interrupted`` set; likewise,
    with ``interrupted="time-limit"``, when the SLURM job's end time is less than
    ``stop_margin_s`` away (:class:`elmoc.train.signals.Deadline`; None: max(300 s,
    2 x the longest checkpoint write + a step)).  The process group a data-parallel run
    joins here is destroyed when it returns or fails.
    """
    settings = TrainSettings.from_config(spec.get("train", {}))
    check_direction(spec, direction, spec_path)
    if stale_checkpoint not in ("refuse", "set-aside"):
        raise ConfigError(f"stale_checkpoint must be 'refuse' or 'set-aside', got {stale_checkpoint!r}")
    if stop_margin_s is not None and stop_margin_s < 0:
        raise ConfigError(f"the stop margin must be >= 0 seconds, got {stop_margin_s}")
    retain_freed_host_memory()  # freed activations stay mapped: no page faults every step
    ddp = Distributed.from_env()
    device = ddp.setup(device, settings.collective_timeout_minutes)  # joins the process group under torchrun
    try:
        return _train(spec, vocab, Path(out_dir), make_batches, make_heldout, settings=settings, ddp=ddp,
                      device=device, direction=direction, vocab_path=vocab_path, resume=resume,
                      steps_per_epoch=steps_per_epoch, spec_path=spec_path, stop=stop,
                      stale_checkpoint=stale_checkpoint, stop_margin_s=stop_margin_s)
    finally:
        ddp.teardown()


def _train(spec: dict[str, Any], vocab: Vocabulary | None, out_dir: Path, make_batches: BatchFactory,
           make_heldout: HeldoutFactory | None, *, settings: TrainSettings, ddp: Distributed, device: torch.device,
           direction: str, vocab_path: str | None, resume: bool, steps_per_epoch: int | None,
           spec_path: str | Path | None, stop: StopSignals, stale_checkpoint: str,
           stop_margin_s: float | None) -> RunResult:
    """The body of :func:`train`, inside the process group it set up."""
    if settings.batch_size % ddp.world_size:
        raise ConfigError(
            f"train.batch_size {settings.batch_size} is not divisible by the {ddp.world_size} processes; "
            "the batch size is global (the LR schedule depends on it)"
        )
    ckpt_path, log_path = out_dir / CHECKPOINT, out_dir / TRAIN_LOG
    inputs = None
    if ddp.is_main:
        inputs = InputFingerprints.of_spec(spec)  # hashed once per process start (cached)
        out_dir.mkdir(parents=True, exist_ok=True)
        for tmp in remove_stale_temps(out_dir):
            log.warning("removed %s, left behind by an interrupted write", tmp)
        if not resume:
            ckpt_path.unlink(missing_ok=True)  # a fresh start must never be resumed later
        elif stale_checkpoint == "set-aside":
            set_aside_if_stale(ckpt_path, spec=spec, direction=direction, vocab=vocab, spec_path=spec_path,
                               inputs=inputs)
    if ddp.enabled:
        dist.barrier()  # every rank sees the checkpoint rank 0 decided on
    inputs = ddp.from_main(inputs)
    spec_hash, vocab_id = config_hash(spec), vocab_fingerprint(vocab)
    layout = {"threads": torch.get_num_threads(), "processes": ddp.world_size}
    seed_everything(settings.seed + ddp.rank)

    model = (BidirectionalLM if direction == JOINT else LanguageModel).from_spec(spec, vocab).to(device)
    if direction == JOINT and ddp.is_main:
        log.info("joint bi-LM: the loss is the mean of the two directions' mean losses; tokens and tok/s "
                 "count the tokens of both directions")
    bundle = build_optimizer(spec.get("optimizer", {"type": "scheduled_adam"}), model, settings.batch_size)
    step, tokens, position, state, history, seconds_before = 0, 0, None, None, [], 0.0
    segments = [{"step": 0, **layout}]
    if resume and ckpt_path.exists():
        # tensors to the CPU (RNG states must stay there), the carried state to `device`
        payload = load_resume_state(ckpt_path, device)
        check_resumable(payload, ckpt_path, spec=spec, direction=direction, vocab=vocab, spec_path=spec_path,
                        inputs=inputs)
        load_weights(model, payload, ckpt_path)
        bundle.load_state_dict(payload["optimizers"])
        step, tokens, position = payload["step"], payload["tokens"], payload["data"]
        state = shard_state_rows(payload.get("state"), ddp.rank, ddp.world_size)  # this rank's rows
        history = payload.get("history", [])
        seconds_before = float(payload.get("seconds", 0.0))
        segments = resumed_segments(payload, step, layout, ckpt_path, warn=ddp.is_main)
        own_rng = rank_rng_state(payload.get("rng"), ddp.rank, ddp.world_size)
        if own_rng is not None:  # else (another process count) this rank keeps its seed
            set_rng_state(own_rng)
        if ddp.is_main:
            _truncate_log(log_path, payload.get("log_bytes"))
        log.info("resumed %s from step %d (%d tokens)", ckpt_path, step, tokens)
    elif ddp.is_main:
        log_path.unlink(missing_ok=True)  # a fresh run starts a fresh log
    t_start, saved_step, interrupted = time.time(), step, None
    # rank 0 decides when to stop before the job's time limit and when a timed checkpoint
    # is due; StopSignals.decide makes every process agree in the step's one collective
    deadline = Deadline.from_slurm(stop_margin_s) if ddp.is_main else Deadline(None)
    timer = CheckpointTimer(settings.checkpoint_minutes if ddp.is_main else None)
    longest_save_s, step_s = 0.0, 0.0
    finite = NonFiniteLossCheck()

    def wall_seconds() -> float:
        """Wall time of this training, summed over the runs it was resumed from."""
        return seconds_before + time.time() - t_start

    core = model
    sparse_params = sparse_gradient_parameters(core)  # exchanged by us, not by DDP
    if ddp.enabled:
        model = wrap_model(core, device)

    def training_state() -> dict[str, Any]:
        return {
            "spec": spec, "config_hash": spec_hash, "vocab_path": vocab_path, "vocab": vocab_id,
            "direction": direction, "model": core.state_dict(), "optimizers": bundle.state_dict(),
            "step": step, "tokens": tokens, "seconds": wall_seconds(), "data": position, "rng": None,
            "state": state, "history": history, "threads": layout["threads"], "processes": layout["processes"],
            "segments": segments, "inputs": inputs,
            "log_bytes": log_path.stat().st_size if log_path.exists() else 0, "final": False,
        }

    def save() -> None:
        finite.check(step)  # never save diverged weights
        nonlocal saved_step, longest_save_s
        t_save = time.time()
        saved_step = step
        rows = gather_state_rows(state, ddp.world_size)  # the global batch's carried state (all ranks)
        rngs = {"world_size": ddp.world_size, "ranks": ddp.all_ranks(rng_state())}  # every rank's generators
        if ddp.is_main:
            save_checkpoint(ckpt_path, {**training_state(), "state": rows, "rng": rngs})
        timer.saved()
        longest_save_s = max(longest_save_s, time.time() - t_save)

    def heldout(tag: str) -> None:
        if make_heldout is None:
            return
        finite.check(step)
        # every process evaluates its share of the rows (sums all-reduced)
        result = evaluate_heldout(core, make_heldout(), device, settings.reset_state,
                                  settings.eval_max_windows, ddp)
        result.update(step=step, tokens=tokens, tag=tag)
        history.append(result)
        if not ddp.is_main:
            return
        parts = "".join(f", {name} {result[name]['value']:.4f}" for name in ("forward", "backward") if name in result)
        log.info("heldout %s at step %d: %s = %.4f (loss %.4f over %d tokens%s)",
                 tag, step, result["metric"], result["value"], result["loss"], result["eval_tokens"], parts)
        _append_jsonl(log_path, {"event": "heldout", **result})

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
        t_step = time.time()
        batch = to_device(batch, device)  # pinned, non-blocking on CUDA
        lr = bundle.set_lr(step + 1)
        loss, out, new_state, grad_norm = train_step(
            model, batch, None if settings.reset_state else state, bundle, params, settings, device,
            sparse_params, ddp.world_size,
        )
        state = None if settings.reset_state else detach_state(core, new_state)
        position = next_position
        step += 1
        step_tokens = batch.num_tokens * ddp.world_size  # a joint step: both directions' tokens
        tokens += step_tokens
        if ddp.is_main and (step % max(1, settings.log_every) == 0 or step == 1):
            elapsed = time.time() - t0
            speed = (tokens - tokens_at_t0) / max(elapsed, 1e-9)
            per_step = elapsed / max(1, step - steps_at_t0)
            eta = (total_steps - step) * per_step if total_steps else None
            record = {"event": "train", "step": step, "tokens": tokens, "lr": lr, "loss": float(loss),
                        "grad_norm": float(grad_norm), "seconds": wall_seconds(), "tokens_per_s": speed, "eta_s": eta,
                        **{k: float(v) for k, v in out.logs.items()}}
            _append_jsonl(log_path, record)
            eta_txt = f", ETA {eta / 60:.1f} min" if eta is not None else ""
            log.info("step %d%s: loss %.4f, lr %.2e, |g| %.3f, %.0f tok/s%s", step,
                     f"/{total_steps}" if total_steps else "", float(loss), lr, float(grad_norm), speed, eta_txt)
        finite.add(loss)
        if step % max(1, settings.log_every) == 0 or step == 1:  # every rank, at the same steps
            finite.check(step)
        if settings.eval_every and step % settings.eval_every == 0:
            heldout(f"step{step}")
        step_s = time.time() - t_step
        # the step's one collective: a stop signal anywhere, rank 0's deadline and timed checkpoint
        # (under DDP its flag is read back each step, a sync kept on purpose: every rank must stop
        # and save at the same step; one process decides without any device work)
        reason, save_now = stop.decide(
            ddp.enabled, device, time_up=deadline.reached(time.time(), longest_save_s, step_s),
            checkpoint_due=timer.due())
        if reason is not None:  # every process stops after this step (and saves it below)
            interrupted = reason
            break
        if save_now or (settings.checkpoint_every and step % settings.checkpoint_every == 0):
            save()
        if settings.max_steps is not None and step >= settings.max_steps:
            break
    if saved_step != step:
        save()  # the training state at the end, or where the stop signal came
    if interrupted is None and stop is not None and stop.agreed(ddp.enabled, device):
        interrupted = stop.received  # a signal during the last step or the save
    if interrupted is not None:
        log.warning("stopped by %s at step %d; %s holds it: rerun the same command to resume",
                    interrupted, step, ckpt_path)
        if interrupted == "time-limit" and ddp.is_main:
            log.warning("the job ends at %s (%s): stopped %.0f s before it", time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.localtime(deadline.end_time)), deadline.source,
                deadline.end_time - time.time())
        if ddp.enabled:
            dist.barrier()  # nobody exits while rank 0 is still writing
        return RunResult(steps=step, tokens=tokens, seconds=wall_seconds(), heldout=history, interrupted=interrupted)
    heldout("after")
    seconds = wall_seconds()
    if ddp.is_main:
        final = model_payload(training_state())
        save_checkpoint(out_dir / MODEL, final)
        summary = {
            "direction": direction, "steps": step, "tokens": tokens, "seconds": seconds,
            "threads": layout["threads"], "processes": ddp.world_size, "segments": segments,
            "config_hash": spec_hash,
            "metric": history[-1]["metric"] if history else None,
            "before": history[0]["value"] if history else None,
            "after": history[-1]["value"] if history else None,
            "constant_baseline": history[-1].get("constant_baseline") if history else None,
            "history": history, "trainable_parameters": core.num_trainable_parameters(),
        }
        if direction == JOINT:  # each direction's before/after beside the combined metric
            for name in ("forward", "backward"):
                part = [h[name] for h in history]
                summary[name] = {"metric": part[-1]["metric"] if part else None,
                                 "before": part[0]["value"] if part else None,
                                 "after": part[-1]["value"] if part else None,
                                 "loss_after": part[-1]["loss"] if part else None,
                                 "constant_baseline": part[-1].get("constant_baseline") if part else None}
        _write_json(out_dir / HELDOUT, summary)
    if ddp.enabled:
        dist.barrier()
    return RunResult(steps=step, tokens=tokens, seconds=seconds, heldout=history)


def resumed_segments(payload: dict[str, Any], step: int, layout: dict[str, int], path: Path,
                     warn: bool = True) -> list[dict[str, Any]]:
    """The checkpoint's process-layout segments, with this run's appended when it differs.

    A run may resume under another thread or process count (a week-long run must
    survive a move to another allocation): allowed, with a WARNING, since the result
    then equals neither layout's uninterrupted run bit for bit (other summation orders,
    other per-rank RNG streams and negatives); ``segments`` (checkpoint, ``model.pt``,
    ``heldout.json``) records from which step each layout trained.  A checkpoint of an
    older elmoc records no process count: only its thread count is compared.
    """
    segments = [dict(s) for s in payload.get("segments") or
                [{"step": 0, "threads": payload.get("threads"), "processes": payload.get("processes")}]]
    last = segments[-1]
    changed = [key for key in ("threads", "processes") if last.get(key) is not None and last[key] != layout[key]]
    if changed and warn:
        log.warning("%s resumes at step %d under another layout (%s): allowed, but the result will equal "
                    "neither layout's uninterrupted run bit for bit (recorded under 'segments' in the checkpoint, "
                    "model.pt and heldout.json)", path, step,
                    ", ".join(f"{k} {last[k]} -> {layout[k]}" for k in changed))
    if changed or any(last.get(k) is None for k in layout):
        segments.append({"step": step, **layout})
    return segments


def check_direction(spec: dict[str, Any], direction: str, spec_path: str | Path | None = None) -> None:
    """Refuse a ``direction`` the spec does not train: "joint" needs ``train.directions:
    joint``, and such a spec trains only "joint" (one ConfigError line naming the spec
    and the fix)."""
    where = str(spec_path) if spec_path else "the spec"
    joint = is_joint(spec)
    if direction not in ("forward", "backward", JOINT):
        raise ConfigError(f"direction must be 'forward', 'backward' or 'joint', got {direction!r}")
    if direction == JOINT and not joint:
        raise ConfigError(
            f"{where}: --direction joint trains a joint bi-LM, but this spec trains separate directions "
            "(train.directions is 'separate' or unset); set train.directions: joint in it, or train "
            "--direction forward and --direction backward")
    if direction != JOINT and joint:
        raise ConfigError(
            f"{where}: this spec trains one joint bi-LM (train.directions: joint), not a {direction} LM on its "
            "own; train it with --direction joint, or set train.directions: separate")


def detach_state(model: LanguageModel | BidirectionalLM, state: Any) -> Any:
    """The carried state cut from the graph: a LanguageModel's encoder state, or a
    BidirectionalLM's pair (forward state, backward state)."""
    if isinstance(model, BidirectionalLM):
        return (model.forward_encoder.detach_state(state[0]), model.backward_encoder.detach_state(state[1]))
    return model.encoder.detach_state(state)


def _truncate_log(path: Path, size: int | None) -> None:
    """Cut ``train_log.jsonl`` back to ``size`` bytes, its length at the checkpoint: the
    records written after it (before a kill) are written again by the resumed run."""
    if size is None or not path.exists():
        return
    have = path.stat().st_size
    if have > size:
        os.truncate(path, size)
    elif have < size:
        log.warning("%s is shorter than when the checkpoint was taken; some records are missing", path)


def _append_jsonl(path: Path, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _write_json(path: Path, data: dict) -> None:
    with atomic_file(path) as f:
        f.write(json.dumps(data, indent=2) + "\n")
