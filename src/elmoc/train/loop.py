"""The one training loop: every output layer, every input layer, every encoder.

Read it top to bottom: :func:`train` (settings, process group) -> :class:`Trainer`
(output folder, model, optimizer, resume) -> :meth:`Trainer.run`: heldout eval, then
for each window :func:`train_step` (set LR, forward, backward, clip, step, carry
state), the schedule of logs, evaluations and checkpoints, the stop conditions ->
:meth:`Trainer.finish` (``model.pt``, ``heldout.json``).  Output layers share one
contract (``OutputLoss``, and ``heldout_reduction`` for the heldout metric), so nothing
here branches on which variant is being trained.

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

A masked LM (``train.objective: masked_lm``, ``--direction masked``) runs it with
:class:`elmoc.masked_lm.MaskedLM` and :class:`elmoc.data.masking.MaskedLMBatch` windows:
its loss is the output layer's mean over the masked positions, it carries no state, and
``tokens`` counts the tokens it reads (every position, as for the next-word LMs).
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torch.distributed as dist

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.masking import MaskedLMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.directions import JOINT, MASKED, check_run
from elmoc.encoders.base import map_state
from elmoc.errors import ConfigError, DiskFullError
from elmoc.io.console import ConsoleProgress, eta_text
from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.masked_lm import MaskedLM
from elmoc.model_file import save_checkpoint
from elmoc.outputs.base import OutputLoss
from elmoc.train.checkpoint import (
    CHECKPOINT, HELDOUT, MODEL, TRAIN_LOG, InputFingerprints, check_resumable, config_hash, load_resume_state,
    load_weights, model_payload, rank_rng_state, remove_stale_temps, rng_state, set_aside_if_stale, set_rng_state,
    vocab_fingerprint,
)
from elmoc.nn.native_build import build_seconds_since
from elmoc.registry import by_name, list_available
from elmoc.train.distributed import (
    Distributed, average_sparse_gradients, gather_state_rows, shard_state_rows, sparse_gradient_parameters,
    wrap_model,
)
from elmoc.train.hooks.base import TrainHook
from elmoc.train.heldout import evaluate_heldout
from elmoc.train.optim import OptimizerBundle, build_optimizer, clip_global_norm
from elmoc.train.periodic import CheckpointTimer
from elmoc.train.precision import autocast_context, retain_freed_host_memory, to_device
from elmoc.train.records import append_record, resumed_segments, truncate_log, write_summary
from elmoc.train.settings import TrainSettings
from elmoc.train.signals import Deadline, StopSignals, stoppable

log = logging.getLogger(__name__)

# A function that makes the training batch iterator from a saved position (or None)
# and this process's (rank, world_size); its iterator yields (LMBatch, next_position)
# where next_position resumes right after that batch, and it stops after the last
# epoch (the factory knows train.epochs).  A joint run's yields BiLMBatch instead, a masked
# run's MaskedLMBatch.
Batch = LMBatch | BiLMBatch | MaskedLMBatch
BatchFactory = Callable[[dict | None, int, int], Iterator[tuple[Batch, dict]]]
# A function that yields heldout windows (LMBatch; BiLMBatch for a joint run, MaskedLMBatch
# for a masked one), in a fixed order.
HeldoutFactory = Callable[[], Iterator[Batch]]
MODELS = {JOINT: BidirectionalLM, MASKED: MaskedLM}  # the model a run trains; else LanguageModel


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


def train_step(model: torch.nn.Module, batch: Batch, state: Any, bundle: OptimizerBundle,
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


def detach_state(state: Any) -> Any:
    """The carried state cut from the graph: every tensor of it, whatever model carries it (an
    encoder's state, a BidirectionalLM's pair, a distillation's (student, teacher) pair)."""
    return map_state(torch.Tensor.detach, state)


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
    settings: TrainSettings | None = None,
    trainer: Callable[..., "Trainer"] | None = None,
    hooks: Sequence[TrainHook] = (),
) -> RunResult:
    """Train one direction of an LM (``direction`` "forward" or "backward"), or a joint
    bi-LM (``direction="joint"``, for a spec with ``train.directions: joint``; the batch
    factories then yield BiLMBatch): ``checkpoint.pt`` every ``checkpoint_every`` steps,
    ``train_log.jsonl`` as it goes, and at the very end ``model.pt`` and ``heldout.json``
    in ``out_dir`` (formats: :mod:`elmoc.model_file`; resume rules: :mod:`elmoc.train.checkpoint`).

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
    joins here is destroyed when it returns or fails.  ``settings`` is the spec's
    ``train`` section parsed (``elmoc train`` passes the one it parsed); None parses it here.
    ``trainer`` builds the run (:class:`Trainer`'s arguments; default :class:`Trainer`): a subclass
    trains another model through the same loop (``elmoc distill``, :mod:`elmoc.train.distill`).
    ``hooks`` (:mod:`elmoc.train.hooks.base`; ``elmoc prune``'s ``StartFrom``, ``MaskConstraint``) run before the
    hooks the spec asks for (``train.notes``, ``train.rewind_step``), as the hook module describes.
    """
    settings = settings or TrainSettings.from_config(spec.get("train", {}))
    _check_options(spec, direction, spec_path, stale_checkpoint, stop_margin_s)
    retain_freed_host_memory()  # freed activations stay mapped: no page faults every step
    ddp = Distributed.from_env()
    device = ddp.setup(device, settings.collective_timeout_minutes)  # joins the process group under torchrun
    try:
        run = (trainer or Trainer)(spec, vocab, Path(out_dir), settings, ddp, device, direction=direction,
                                   vocab_path=vocab_path, spec_path=spec_path, make_heldout=make_heldout,
                                   stop=stop, resume=resume, stale_checkpoint=stale_checkpoint,
                                   stop_margin_s=stop_margin_s, hooks=hooks)
        return run.run(make_batches, steps_per_epoch)
    finally:
        ddp.teardown()


def _check_options(spec: dict[str, Any], direction: str, spec_path, stale_checkpoint: str,
                   stop_margin_s: float | None) -> None:
    """:func:`train`'s arguments checked on entry, each refusal one line."""
    check_run(spec, direction, spec_path)
    if stale_checkpoint not in ("refuse", "set-aside"):
        raise ConfigError(f"stale_checkpoint must be 'refuse' or 'set-aside', got {stale_checkpoint!r}")
    if stop_margin_s is not None and stop_margin_s < 0:
        raise ConfigError(f"the stop margin must be >= 0 seconds, got {stop_margin_s}")


class Trainer:
    """One run of :func:`train`, inside the process group it set up: the model, the
    optimizer, the counters saved in checkpoints, and the output folder.

    Building it prepares the folder, builds the model and optimizer and resumes from
    ``checkpoint.pt`` (:meth:`resume`); :meth:`run` trains; :meth:`save` and
    :meth:`heldout` are the two things the schedule does.
    """

    def __init__(self, spec: dict[str, Any], vocab: Vocabulary | None, out_dir: Path, settings: TrainSettings,
                 ddp: Distributed, device: torch.device, *, direction: str, vocab_path: str | None,
                 spec_path: str | Path | None, make_heldout: HeldoutFactory | None, stop: StopSignals,
                 resume: bool, stale_checkpoint: str, stop_margin_s: float | None,
                 hooks: Sequence[TrainHook] = ()):
        if settings.batch_size % ddp.world_size:
            raise ConfigError(
                f"train.batch_size {settings.batch_size} is not divisible by the {ddp.world_size} processes; "
                "the batch size is global (the LR schedule depends on it)"
            )
        self.spec, self.vocab, self.vocab_path, self.direction, self.spec_path = (
            spec, vocab, vocab_path, direction, spec_path)
        self.settings, self.ddp, self.device, self.make_heldout, self.stop = settings, ddp, device, make_heldout, stop
        self.out_dir, self.ckpt_path, self.log_path = out_dir, out_dir / CHECKPOINT, out_dir / TRAIN_LOG
        self.inputs = ddp.from_main(self.prepare_output_dir(resume, stale_checkpoint))
        self.spec_hash, self.vocab_id = config_hash(spec), vocab_fingerprint(vocab)
        self.layout = {"threads": torch.get_num_threads(), "processes": ddp.world_size}
        seed_everything(settings.seed + ddp.rank)

        self.core = self.build_model().to(device)
        if direction == JOINT and ddp.is_main:
            log.info("joint bi-LM: the loss is the mean of the two directions' mean losses; tokens and tok/s "
                     "count the tokens of both directions")
        self.bundle = build_optimizer(spec.get("optimizer", {"type": "scheduled_adam"}), self.core,
                                      settings.batch_size)
        self.hooks = [*hooks, *self.spec_hooks()]
        self.step, self.tokens, self.position, self.state, self.history, self.seconds_before = 0, 0, None, None, [], 0.0
        self.segments = [{"step": 0, **self.layout}]
        self.checkpoint_step: int | None = None  # the step of the checkpoint.pt on disk (None: none of this run)
        self.first_step = max((h.start_step for h in self.hooks), default=0)  # a rewound run's schedule goes on
        if resume and self.ckpt_path.exists():
            self.resume()
            self.checkpoint_step = self.step
        else:
            self.step = self.first_step
            self.segments = [{"step": self.step, **self.layout}]
            for hook in self.hooks:
                hook.start(self.core, self.step)
            if ddp.is_main:
                self.log_path.unlink(missing_ok=True)  # a fresh run starts a fresh log
        self.t_start, self.saved_step = time.time(), self.step
        # rank 0 decides when to stop before the job's time limit and when a timed checkpoint
        # is due; StopSignals.decide makes every process agree in the step's one collective
        self.deadline = Deadline.from_slurm(stop_margin_s) if ddp.is_main else Deadline(None)
        self.timer = CheckpointTimer(settings.checkpoint_minutes if ddp.is_main else None)
        self.longest_save_s, self.step_s = 0.0, 0.0
        self.finite = NonFiniteLossCheck()
        self.sparse_params = sparse_gradient_parameters(self.core)  # exchanged by us, not by DDP
        self.model = wrap_model(self.core, device) if ddp.enabled else self.core
        self.params = [p for p in self.core.parameters() if p.requires_grad]

    def build_model(self) -> torch.nn.Module:
        """The model this run trains (its ``forward(batch, state) -> (OutputLoss, state)``, its
        ``evaluate`` and ``output_layer`` are what the loop and the heldout evaluation call)."""
        return MODELS.get(self.direction, LanguageModel).from_spec(self.spec, self.vocab)

    def spec_hooks(self) -> list[TrainHook]:
        """The registered hooks (kind ``train_hook``) this run's spec asks for, in name order."""
        found = (by_name("train_hook", name).from_run(self) for name in list_available("train_hook"))
        return [hook for hook in found if hook is not None]

    def final_payload(self) -> dict[str, Any]:
        """What ``model.pt`` holds (:func:`model_payload` of the training state, without the
        hooks' checkpoint-only keys)."""
        only = {k for h in self.hooks if not h.in_model_file for k in h.state_dict()}
        return model_payload({k: v for k, v in self.training_state().items() if k not in only})

    def prepare_output_dir(self, resume: bool, stale_checkpoint: str) -> dict | None:
        """Rank 0 creates the folder, removes temps of interrupted writes and a checkpoint
        it must not resume; every rank then waits for it.  Returns rank 0's fingerprints
        of the spec's input files (None elsewhere)."""
        inputs = None
        if self.ddp.is_main:
            inputs = InputFingerprints.of_spec(self.spec)  # hashed once per process start (cached)
            self.out_dir.mkdir(parents=True, exist_ok=True)
            for tmp in remove_stale_temps(self.out_dir):
                log.warning("removed %s, left behind by an interrupted write", tmp)
            if not resume:
                self.ckpt_path.unlink(missing_ok=True)  # a fresh start must never be resumed later
            elif stale_checkpoint == "set-aside":
                set_aside_if_stale(self.ckpt_path, spec=self.spec, direction=self.direction, vocab=self.vocab,
                                   spec_path=self.spec_path, inputs=inputs)
        if self.ddp.enabled:
            dist.barrier()  # every rank sees the checkpoint rank 0 decided on
        return inputs

    def resume(self) -> None:
        """Continue from ``checkpoint.pt``: weights, optimizer moments, counters, data
        position, this rank's rows of the carried state and its RNG states."""
        ddp, path = self.ddp, self.ckpt_path
        payload = load_resume_state(path, self.device)  # tensors to the CPU, the carried state to the device
        check_resumable(payload, path, spec=self.spec, direction=self.direction, vocab=self.vocab,
                        spec_path=self.spec_path, inputs=self.inputs)
        load_weights(self.core, payload, path)
        self.bundle.load_state_dict(payload["optimizers"])
        self.step, self.tokens, self.position = payload["step"], payload["tokens"], payload["data"]
        self.state = shard_state_rows(payload.get("state"), ddp.rank, ddp.world_size)  # this rank's rows
        self.history = payload.get("history", [])
        for hook in self.hooks:
            hook.load_state_dict(payload)
        self.seconds_before = float(payload.get("seconds", 0.0))
        self.segments = resumed_segments(payload, self.step, self.layout, path, warn=ddp.is_main)
        own_rng = rank_rng_state(payload.get("rng"), ddp.rank, ddp.world_size)
        if own_rng is not None:  # else (another process count) this rank keeps its seed
            set_rng_state(own_rng)
        if ddp.is_main:
            truncate_log(self.log_path, payload.get("log_bytes"))
        log.info("resumed %s from step %d (%d tokens)", path, self.step, self.tokens)

    def run(self, make_batches: BatchFactory, steps_per_epoch: int | None) -> RunResult:
        """Train from the current step to the end, a stop signal or the time limit:
        per window the step, then the schedule of logs, evaluations and checkpoints,
        then the stop conditions.  A full disk is one :class:`DiskFullError` saying which
        checkpoint survived (every write is atomic: the last complete one is intact)."""
        try:
            return self._run(make_batches, steps_per_epoch)
        except DiskFullError as e:
            if self.checkpoint_step is None:
                raise e.with_note("no checkpoint of this run was written yet; free some space and rerun "
                                  "the same command (it starts at step 0)") from None
            raise e.with_note(f"the previous checkpoint {self.ckpt_path} (step {self.checkpoint_step}) is intact; "
                              "free some space and rerun the same command to resume from it") from None

    def _run(self, make_batches: BatchFactory, steps_per_epoch: int | None) -> RunResult:
        s, ddp = self.settings, self.ddp
        if self.step == self.first_step:
            self.heldout("before")
        self.total_steps = s.max_steps  # for the ETA
        if self.total_steps is None and steps_per_epoch:
            self.total_steps = steps_per_epoch * s.epochs
        self.model.train()
        self.t0, self.tokens_at_t0, self.steps_at_t0 = time.time(), self.tokens, self.step
        self.console = ConsoleProgress(f"train {self.out_dir.parent.name}/{self.out_dir.name}")
        interrupted = None
        batches = [] if self.max_steps_reached() else make_batches(self.position, ddp.rank, ddp.world_size)
        for batch, next_position in batches:  # next_position: where the iterator resumes after this batch
            t_step = time.time()
            lr, loss, out, grad_norm = self.take_step(batch, next_position)
            log_now = self.step % max(1, s.log_every) == 0 or self.step == 1
            if log_now and ddp.is_main:
                self.log_step(lr, loss, out, grad_norm)
            if ddp.is_main and self.console.due():  # a line on the workflow's console every 30 s
                self.console.write(self.console_line(loss))
            self.finite.add(loss)
            if log_now:  # every rank, at the same steps
                self.finite.check(self.step)
            if s.eval_every and self.step % s.eval_every == 0:
                self.heldout(f"step{self.step}")
            self.step_s = time.time() - t_step
            interrupted, save_now = self.agree_on_stop()
            if interrupted is not None:  # every process stops after this step (and saves it below)
                break
            if save_now or (s.checkpoint_every and self.step % s.checkpoint_every == 0):
                self.save()
            if self.max_steps_reached():
                break
        if self.saved_step != self.step:
            self.save()  # the training state at the end, or where the stop signal came
        if interrupted is None and self.stop is not None and self.stop.agreed(ddp.enabled, self.device):
            interrupted = self.stop.received  # a signal during the last step or the save
        return self.stopped(interrupted) if interrupted is not None else self.finish()

    def take_step(self, batch: Batch, next_position: dict) -> tuple[float, torch.Tensor, OutputLoss,
                                                                                   torch.Tensor]:
        """:func:`train_step` on ``batch`` at the scheduled LR, and the counters and carried
        state after it.  Returns the LR, the loss, the output layer's result and the
        gradient norm (tensors not read back)."""
        s = self.settings
        batch = to_device(batch, self.device)  # pinned, non-blocking on CUDA
        lr = self.bundle.set_lr(self.step + 1)
        loss, out, new_state, grad_norm = train_step(
            self.model, batch, None if s.reset_state else self.state, self.bundle, self.params, s, self.device,
            self.sparse_params, self.ddp.world_size,
        )
        self.state = None if s.reset_state else detach_state(new_state)
        self.position = next_position
        self.step += 1
        for hook in self.hooks:
            hook.after_step(self.core, self.step)
        self.tokens += batch.num_tokens * self.ddp.world_size  # a joint step: both directions' tokens
        return lr, loss, out, grad_norm

    def agree_on_stop(self) -> tuple[str | None, bool]:
        """The stop conditions, agreed by every process: (why to stop or None, save now).

        The step's one collective: a stop signal anywhere, rank 0's deadline (the SLURM
        job's end time less the margin) and rank 0's timed checkpoint.  Under DDP its flag
        is read back each step, a sync kept on purpose: every rank must stop and save at
        the same step; one process decides without any device work.
        """
        return self.stop.decide(
            self.ddp.enabled, self.device, time_up=self.deadline.reached(time.time(), self.longest_save_s, self.step_s),
            checkpoint_due=self.timer.due())

    def max_steps_reached(self) -> bool:
        return self.settings.max_steps is not None and self.step >= self.settings.max_steps

    def wall_seconds(self) -> float:
        """Wall time of this training, summed over the runs it was resumed from."""
        return self.seconds_before + time.time() - self.t_start - build_seconds_since(self.t_start)

    def log_step(self, lr: float, loss: torch.Tensor, out: OutputLoss, grad_norm: torch.Tensor) -> None:
        """Rank 0's train record and log line (loss, LR, gradient norm, speed, ETA)."""
        step, (total, eta) = self.step, self.eta()
        elapsed = time.time() - self.t0 - build_seconds_since(self.t0)  # a kernel build is no training
        speed = (self.tokens - self.tokens_at_t0) / max(elapsed, 1e-9)
        append_record(self.log_path, {
            "event": "train", "step": step, "tokens": self.tokens, "lr": lr, "loss": float(loss),
            "grad_norm": float(grad_norm), "seconds": self.wall_seconds(), "tokens_per_s": speed, "eta_s": eta,
            **{k: float(v) for k, v in out.logs.items()}})
        eta_txt = f", ETA {eta / 60:.1f} min" if eta is not None else ""
        log.info("step %d%s: loss %.4f, lr %.2e, |g| %.3f, %.0f tok/s%s", step, f"/{total}" if total else "",
                 float(loss), lr, float(grad_norm), speed, eta_txt)

    def eta(self) -> tuple[int | None, float | None]:
        """The step total (None: unknown, or an estimate already passed) and the seconds left
        at this run's pace, native kernel builds left out."""
        step, total = self.step, self.total_steps
        if total and step > total:  # past an estimated total: no guessed ETA
            total = None
        elapsed = time.time() - self.t0 - build_seconds_since(self.t0)
        return total, ((total - step) * elapsed / max(1, step - self.steps_at_t0) if total else None)

    def console_line(self, loss: torch.Tensor) -> str:
        """The progress line of the workflow's console: step, loss, ETA."""
        total, eta = self.eta()
        return (f"step {self.step}{f'/{total}' if total else ''}, loss {float(loss):.4f}"
                + ("" if eta is None else f", {eta_text(eta)}"))

    def training_state(self) -> dict[str, Any]:
        """What ``checkpoint.pt`` holds (this rank's view; :meth:`save` adds every rank's)."""
        return {
            "spec": self.spec, "config_hash": self.spec_hash, "vocab_path": self.vocab_path, "vocab": self.vocab_id,
            "direction": self.direction, "model": self.core.state_dict(), "optimizers": self.bundle.state_dict(),
            "step": self.step, "tokens": self.tokens, "seconds": self.wall_seconds(), "data": self.position,
            "rng": None, "state": self.state, "history": self.history, "threads": self.layout["threads"],
            "processes": self.layout["processes"], "segments": self.segments, "inputs": self.inputs,
            "log_bytes": self.log_path.stat().st_size if self.log_path.exists() else 0, "final": False,
            **{k: v for hook in self.hooks for k, v in hook.state_dict().items()},
        }

    def save(self) -> None:
        """Write ``checkpoint.pt`` (rank 0) with every rank's carried state and generators."""
        self.finite.check(self.step)  # never save diverged weights
        t_save = time.time()
        self.saved_step = self.step
        rows = gather_state_rows(self.state, self.ddp.world_size)  # the global batch's carried state (all ranks)
        rngs = {"world_size": self.ddp.world_size, "ranks": self.ddp.all_ranks(rng_state())}  # every rank's
        if self.ddp.is_main:
            save_checkpoint(self.ckpt_path, {**self.training_state(), "state": rows, "rng": rngs})
        self.checkpoint_step = self.step
        self.timer.saved()
        self.longest_save_s = max(self.longest_save_s, time.time() - t_save)

    def heldout(self, tag: str) -> None:
        """Evaluate on the heldout windows (every process its share of the rows), keep
        the result in the history, and log it (rank 0)."""
        if self.make_heldout is None:
            return
        self.finite.check(self.step)
        result = evaluate_heldout(self.core, self.make_heldout(), self.device, self.settings.reset_state,
                                  self.settings.eval_max_windows, self.ddp)
        result.update(step=self.step, tokens=self.tokens, tag=tag)
        self.history.append(result)
        if not self.ddp.is_main:
            return
        parts = "".join(f", {name} {result[name]['value']:.4f}" for name in ("forward", "backward") if name in result)
        log.info("heldout %s at step %d: %s = %.4f (loss %.4f over %d tokens%s)",
                 tag, self.step, result["metric"], result["value"], result["loss"], result["eval_tokens"], parts)
        append_record(self.log_path, {"event": "heldout", **result})

    def stopped(self, interrupted: str) -> RunResult:
        """The end of a run stopped by a signal or the time limit (its checkpoint saved)."""
        log.warning("stopped by %s at step %d; %s holds it: rerun the same command to resume",
                    interrupted, self.step, self.ckpt_path)
        if interrupted == "time-limit" and self.ddp.is_main:
            deadline = self.deadline
            log.warning("the job ends at %s (%s): stopped %.0f s before it", time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.localtime(deadline.end_time)), deadline.source,
                deadline.end_time - time.time())
        if self.ddp.enabled:
            dist.barrier()  # nobody exits while rank 0 is still writing
        return RunResult(steps=self.step, tokens=self.tokens, seconds=self.wall_seconds(), heldout=self.history,
                         interrupted=interrupted)

    def finish(self) -> RunResult:
        """The end of a complete run: the last heldout evaluation, ``model.pt`` and ``heldout.json``."""
        self.heldout("after")
        seconds = self.wall_seconds()
        if self.ddp.is_main:
            save_checkpoint(self.out_dir / MODEL, self.final_payload())
            write_summary(self.out_dir / HELDOUT, {
                "direction": self.direction, "steps": self.step, "tokens": self.tokens, "seconds": seconds,
                "threads": self.layout["threads"], "processes": self.ddp.world_size, "segments": self.segments,
                "config_hash": self.spec_hash, "trainable_parameters": self.core.num_trainable_parameters(),
                "native_build_s": round(build_seconds_since(0.0), 1)},
                self.history)
        if self.ddp.enabled:
            dist.barrier()
        return RunResult(steps=self.step, tokens=self.tokens, seconds=seconds, heldout=self.history)
