"""The one training loop of every downstream task (registers nothing).

``run_task`` reads the splits, builds the task model over the given inputs, trains
with the task's optimizer (Adam, or Adadelta for SRL as in the paper's AllenNLP
configuration), gradient-norm and/or gradient-value clipping, optional step decay of
the learning rate (coref) and reduce-on-plateau (SNLI), and early stopping on the
dev metric (patience in epochs), restores the best epoch's weights and evaluates on
test.  Batches are length-bucketed and shuffled with a generator seeded from
``seed``, and torch is seeded too.

Reproducibility: the same config + seed on the CPU gives the same numbers.  On a
GPU it does not by default: cuDNN's LSTM kernels, cuBLAS reductions and the
sparse product behind coref's head attention (``torch.sparse.mm``) and embedding
gradients (index-adds on the GPU) are not deterministic, so two GPU runs of one seed differ in the last digits and, through
early stopping, sometimes more.  ``trainer.deterministic: true`` asks for
deterministic kernels (:func:`deterministic_mode`: ``torch.use_deterministic_algorithms``
plus ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, which cuBLAS reads when it first starts,
so it is set before the model moves to the GPU); it is slower, and an operation
without a deterministic GPU kernel then stops the run at its first batch with
torch's error naming the operation.

Checkpoints (``checkpoint``, :class:`elmoc.tasks.checkpoint.TaskCheckpoint`; ``elmoc task``
gives one): saved at every epoch's end, every ``trainer.checkpoint_minutes`` and when a stop
signal or the SLURM deadline stops the run (:class:`RunInterrupted`), with everything the
rest of the run depends on (:meth:`TaskTrainer.state`), so a resumed run ends with the
uninterrupted run's result; on the CPU at one thread count bit for bit.  Training epochs and
evaluations log their progress every ``trainer.progress_seconds`` (:mod:`elmoc.tasks.progress`).

Fine-tuning (a task section's ``encoder: fine_tune``, :mod:`elmoc.tasks.fine_tune`): when the
model holds a bi-LM, :class:`~elmoc.tasks.fine_tune.FineTuner` gives the optimizer's parameter
groups (the head at ``trainer.lr``, each LM layer at its own rate), ULMFiT's slanted triangular
schedule (stepped with the optimizer, in the checkpoint; it replaces ``lr_decay``, and
``plateau_factor`` scales its rates) and which LM layers train in each epoch.

Devices: the model and each batch are moved to ``device`` (:func:`to_device`); that
``.to(device)`` is the only difference between a CPU and a CUDA run, every other
line is shared.  Batches are built on the CPU by the task's ``collate``, on a background thread
ahead of the step that takes them (:class:`~elmoc.tasks.prefetch.Prefetch`: the same batches
in the same order, so results and resumes do not change).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import math
import os
import random
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Sequence

import torch
from elmoc.config import check_choice
from elmoc.config_section import check_keys
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.console import ConsoleProgress, eta_text
from elmoc.nn.native_build import build_seconds_since
from elmoc.tasks.base import Task
from elmoc.tasks.checkpoint import FIX, TaskCheckpoint, to_cpu
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.fine_tune import FineTuner
from elmoc.tasks.prefetch import Prefetch
from elmoc.tasks.progress import Progress
from elmoc.train.checkpoint import random_state, rng_state, set_random_state, set_rng_state
from elmoc.train.periodic import CheckpointTimer
from elmoc.train.signals import TIME_LIMIT, Deadline, StopSignals

log = logging.getLogger(__name__)


@dataclass
class TrainerConfig:
    """Downstream trainer settings (the ``trainer`` mapping of a task config).

    Attributes:
        batch_size: training instances per step.
        eval_batch_size: instances per evaluation batch.
        optimizer: ``adam`` (every task but SRL) or ``adadelta`` (SRL: AllenNLP's
            ``semantic_role_labeler_elmo`` configuration).
        lr: learning rate; None = the optimizer's default (Adam 1e-3, Adadelta 1.0).
            A config that changes ``optimizer`` without giving ``lr`` gets the new
            optimizer's default, not the task's value for its paper optimizer.
        rho: Adadelta's running-average coefficient (0.95 in the SRL configuration).
        weight_decay: L2 on every parameter through the optimizer (0 in the paper configs).
        mix_l2: L2 on the scalar-mix weights (NER 0.1, SRL 1e-3; spec 6).
        grad_norm: gradient-norm clip over all parameters (None = off).
        grad_value: clip every gradient value to [-grad_value, grad_value] (AllenNLP's
            ``grad_clipping``; SRL 1.0; None = off).  Applied before ``grad_norm``.
        epochs: maximum passes over the training data.
        patience: stop after this many epochs without a dev improvement.
        plateau_factor: multiply the lr by this after an epoch without improvement (ESIM 0.5; None = off).
        lr_decay: multiply the lr by this every ``lr_decay_steps`` optimizer steps (e2e-coref's
            staircase decay 0.999 every 100 steps; None = off).
        lr_decay_steps: steps between two decays.
        max_train: use only the first N training instances (None = all); for quick demos.
        deterministic: deterministic kernels on a GPU (see the module docstring); no effect
            on the numbers of a CPU run, which are reproducible anyway.
        fused_optimizer: Adam's update of every parameter as one fused kernel
            (``torch.optim.Adam(fused=True)``, CPU and CUDA) instead of torch's per-parameter
            loop: the same update rounded differently, so a run's numbers change (its
            checkpoints then belong to that setting); deterministic for a given thread count.
            Adam only (torch has no fused Adadelta). Off by default; ``config/paper.yaml``
            turns it on for the Adam tasks (docs/benchmarks.md, "With fused Adam").
        checkpoint_minutes: with a checkpoint (``elmoc task``), also save it when this many
            minutes of training passed since the last save (besides every epoch's end and a
            stop); None or 0: at epochs' ends and stops only.  May change on resume.
        progress_seconds: log a progress line (done/total batches, rate, ETA) of every training
            epoch and evaluation this often (None or 0: none).  May change on resume.
    """

    batch_size: int = 32
    eval_batch_size: int = 256
    optimizer: str = "adam"
    lr: float | None = None
    rho: float = 0.95
    weight_decay: float = 0.0
    mix_l2: float = 0.0
    grad_norm: float | None = 5.0
    grad_value: float | None = None
    epochs: int = 10
    patience: int = 5
    plateau_factor: float | None = None
    lr_decay: float | None = None
    lr_decay_steps: int = 100
    max_train: int | None = None
    deterministic: bool = False
    fused_optimizer: bool = False
    checkpoint_minutes: float | None = 30.0
    progress_seconds: float | None = 60.0

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None, defaults: dict[str, Any] | None = None) -> "TrainerConfig":
        names = {f.name for f in fields(cls)}
        values, defaults = dict(values or {}), dict(defaults or {})
        if "optimizer" in values and values["optimizer"] != defaults.get("optimizer", "adam") and "lr" not in values:
            defaults.pop("lr", None)  # the paper lr belongs to the paper optimizer
        merged = {**defaults, **values}
        check_keys(merged, names, "trainer")
        config = cls(**merged)
        check_choice(config.optimizer, OPTIMIZER_LR, "trainer.optimizer")
        if config.lr is None:
            config.lr = OPTIMIZER_LR[config.optimizer]
        if not isinstance(config.lr, (int, float)) or isinstance(config.lr, bool):
            raise ConfigError(f"trainer.lr must be a number, got {config.lr!r}")
        if not isinstance(config.rho, (int, float)) or not 0 < config.rho < 1:
            raise ConfigError(f"trainer.rho must be in (0, 1), got {config.rho!r}")
        decay = config.lr_decay
        if decay is not None and (not isinstance(decay, (int, float)) or not 0 < decay < 1):
            raise ConfigError(f"trainer.lr_decay must be in (0, 1) or null, got {config.lr_decay!r}")
        if not isinstance(config.lr_decay_steps, int) or config.lr_decay_steps < 1:
            raise ConfigError(f"trainer.lr_decay_steps must be a positive integer, got {config.lr_decay_steps!r}")
        for key in ("deterministic", "fused_optimizer"):
            if not isinstance(getattr(config, key), bool):
                raise ConfigError(f"trainer.{key} must be true or false, got {getattr(config, key)!r}")
        if config.fused_optimizer and config.optimizer != "adam":
            raise ConfigError(f"trainer.fused_optimizer needs optimizer adam (torch has no fused {config.optimizer}): "
                              "set fused_optimizer: false")
        for key in ("batch_size", "eval_batch_size", "epochs"):
            if not isinstance(getattr(config, key), int) or getattr(config, key) < 1:
                raise ConfigError(f"trainer.{key} must be a positive integer, got {getattr(config, key)!r}")
        if not isinstance(config.patience, int) or config.patience < 1:
            raise ConfigError(f"trainer.patience must be a positive integer, got {config.patience!r}")
        if config.lr <= 0:
            raise ConfigError(f"trainer.lr must be > 0, got {config.lr}")
        for key in ("grad_norm", "grad_value"):
            value = getattr(config, key)
            if value is not None and (not isinstance(value, (int, float)) or value <= 0):
                raise ConfigError(f"trainer.{key} must be > 0 or null, got {value!r}")
        for key in ("checkpoint_minutes", "progress_seconds"):
            value = getattr(config, key)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
                raise ConfigError(f"trainer.{key} must be a number >= 0 or null, got {value!r}")
        if config.plateau_factor is not None and not 0 < config.plateau_factor < 1:
            raise ConfigError(f"trainer.plateau_factor must be in (0, 1) or null, got {config.plateau_factor}")
        return config


OPTIMIZER_LR = {"adam": 1e-3, "adadelta": 1.0}  # the optimizers and their default learning rates


def task_optimizer(params: Sequence[torch.nn.Parameter], trainer: TrainerConfig) -> torch.optim.Optimizer:
    """The trainer's optimizer over ``params`` (Adam, fused or not, or Adadelta with ``rho``)."""
    if trainer.optimizer == "adadelta":
        return torch.optim.Adadelta(params, lr=trainer.lr, rho=trainer.rho, weight_decay=trainer.weight_decay)
    # fused=None (not False) leaves torch its default implementation (foreach on CUDA)
    return torch.optim.Adam(params, lr=trainer.lr, weight_decay=trainer.weight_decay,
                            fused=True if trainer.fused_optimizer else None)


@contextlib.contextmanager
def deterministic_mode(enabled: bool):
    """Deterministic kernels inside the block when ``enabled`` (restored after it).

    Sets ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless already set (cuBLAS reads it when it
    creates its first handle, so this must run before the first CUDA operation of the
    process), ``torch.use_deterministic_algorithms(True)`` and cuDNN's deterministic,
    non-benchmarking mode.
    """
    if not enabled:
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    previous = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
                torch.backends.cudnn.benchmark)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = previous[1], previous[2]


def bucket_batches(lengths: Sequence[int], batch_size: int, rng: random.Random | None) -> list[list[int]]:
    """Index batches of similar length; shuffled (order and ties) when ``rng`` is given."""
    order = list(range(len(lengths)))
    if rng is not None:
        rng.shuffle(order)
    order.sort(key=lambda i: lengths[i])  # stable: shuffled ties
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if rng is not None:
        rng.shuffle(batches)
    return batches


def to_device(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor moved to ``device``, through dicts, lists, tuples and dataclasses."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: to_device(getattr(value, f.name), device)
                                             for f in fields(value) if f.init})
    return value


class RunInterrupted(Exception):
    """The run stopped on a stop signal or before the SLURM time limit, its checkpoint saved
    (``reason``: the signal's name or :data:`elmoc.train.signals.TIME_LIMIT`); ``elmoc task``
    exits :data:`elmoc.train.signals.EXIT_INTERRUPTED` (75)."""

    def __init__(self, reason: str, path: str | None = None):
        super().__init__(f"stopped by {reason}" + (f"; {path} holds the run: rerun the same command to resume"
                                                   if path else ""))
        self.reason, self.path = reason, path


class _StopHere(Exception):
    """Raised inside an evaluation when the run must stop (caught by :class:`TaskTrainer`)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def evaluate(task: Task, model, instances: Sequence[Any], inputs: TaskInputs, batch_size: int,
             device: torch.device | str = "cpu", *, what: str = "evaluation", progress_seconds: float | None = None,
             should_stop: Callable[[], str | None] | None = None) -> dict[str, float]:
    """The task metric of ``model`` (already on ``device``) on ``instances``.

    Args:
        what: names the evaluation in the progress lines (``"srl dev evaluation"``).
        progress_seconds: log done/total batches, rate and ETA every this many seconds
            (:class:`elmoc.tasks.progress.Progress`; None: no lines).
        should_stop: called after every batch; a reason (not None) abandons the evaluation
            (the runner saves its checkpoint and evaluates again on resume).
    """
    device = torch.device(device)
    metric = task.new_metric()
    metric.reset()
    model.eval()
    batches = bucket_batches([task.length(x) for x in instances], batch_size, None)
    progress = Progress(what, len(batches), progress_seconds)
    with torch.no_grad(), Prefetch(lambda idx: task.collate([instances[i] for i in idx], inputs), batches) as ahead:
        for collated in ahead:
            batch = to_device(collated, device)
            metric.update(model(batch).predictions, batch)
            progress.update()
            reason = should_stop() if should_stop is not None else None
            if reason is not None:
                log.warning("%s abandoned after %d/%d batches (%s); it is done again on resume", what,
                            progress.done, len(batches), reason)
                raise _StopHere(reason)
    progress.close()
    return metric.compute()


def run_task(task: Task, inputs: TaskInputs, seed: int, trainer: TrainerConfig,
             data: dict[str, list] | None = None, device: torch.device | str = "cpu", *,
             checkpoint: TaskCheckpoint | None = None, stop: StopSignals | None = None,
             stop_margin_s: float | None = None, started: float | None = None,
             finished: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Train on train, early-stop on dev, score test.

    Args:
        data: already-read splits (``{"train": [...], "dev": [...], "test": [...]}``); read when None.
        device: where the model and batches live (``cpu``, ``cuda``, ``cuda:N``).
        checkpoint: where the run checkpoints and resumes from (None: it keeps none and
            ignores stop signals).  Saved at every epoch's end, every ``trainer.checkpoint_minutes``
            and on a stop; resumed when it fits (:mod:`elmoc.tasks.checkpoint`), so an interrupted
            run ends with the uninterrupted run's result (on the CPU at the same thread count,
            bit for bit).
        stop: the stop signals (:class:`elmoc.train.signals.StopSignals`): on SIGTERM, SIGUSR1 or
            SIGINT the step in progress (or the evaluation batch) is finished, the checkpoint saved
            and :class:`RunInterrupted` raised; so it is, with reason ``"time-limit"``, once a
            SLURM job's end time is less than ``stop_margin_s`` away (None: max(300 s, 2 x the
            longest checkpoint write + a step), :class:`elmoc.train.signals.Deadline`).
        started: when this attempt started (``time.time()``; None: now), so that the run's
            ``seconds`` count the caller's set-up (reading data, loading vectors) too.
        finished: called with the trained model (the best epoch's weights) once test is scored
            (``elmoc task --save-model`` writes it); not called on a stop.

    Returns:
        ``{"metric", "metric_label", "dev", "test", "extra_scores", "dev_all", "test_all", "num_train",
        "num_test", "best_epoch", "history", "trainer", "seconds", "device", "threads", "segments"}``;
        ``extra_scores`` maps each of the task's ``extra_metrics`` to ``{"label", "dev", "test"}``
        (SRL: the official CoNLL-2005 score beside the span F1); ``seconds`` sums every attempt's
        wall time (each from its ``started``); ``segments`` lists from which step each thread
        count / device trained.

    Raises:
        RunInterrupted: stopped by a signal or the time limit, the checkpoint saved.
    """
    with deterministic_mode(trainer.deterministic):
        run = TaskTrainer(task, inputs, seed, trainer, data, device, checkpoint, stop, stop_margin_s, started)
        result = run.run()
    if finished is not None:
        finished(run.model)
    return result


class TaskTrainer:
    """One run of :func:`run_task`: the model, the optimizer and schedulers, the early-stopping
    state, the generators and the position in the epoch's batch order, all of which a checkpoint
    holds (:meth:`state`) and a resumed run restores (:meth:`resume`)."""

    def __init__(self, task: Task, inputs: TaskInputs, seed: int, trainer: TrainerConfig,
                 data: dict[str, list] | None, device: torch.device | str, checkpoint: TaskCheckpoint | None,
                 stop: StopSignals | None, stop_margin_s: float | None, started: float | None = None):
        self.t_start = time.time() if started is None else started
        self.task, self.inputs, self.config, self.checkpoint, self.stop = task, inputs, trainer, checkpoint, stop
        self.name = task.registered_name
        random.seed(seed)
        torch.manual_seed(seed)
        self.rng = random.Random(seed)  # the batch shuffling
        self.data = data or {split: task.read(split) for split in ("train", "dev", "test")}
        self.train = self.data["train"][: trainer.max_train] if trainer.max_train else self.data["train"]
        self.device = torch.device(device)
        self.model = task.build_model(inputs).to(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.tuner = FineTuner.of(self.model)  # None unless the model holds a bi-LM (elmoc.tasks.fine_tune)
        self.lengths = [task.length(x) for x in self.train]
        self.optimizer = task_optimizer(self.tuner.param_groups(self.model, trainer.lr) if self.tuner
                                         else self.params, trainer)
        self.slanted = None
        if self.tuner is not None:
            steps = trainer.epochs * math.ceil(len(self.lengths) / trainer.batch_size)
            self.slanted = self.tuner.schedule(self.optimizer, steps)
        if self.slanted is not None and trainer.lr_decay:
            log.warning("the slanted triangular schedule of fine_tune replaces trainer.lr_decay here")
        self.decay = (torch.optim.lr_scheduler.StepLR(self.optimizer, trainer.lr_decay_steps, trainer.lr_decay)
                      if trainer.lr_decay and self.slanted is None else None)
        # the position and the early-stopping state: what a checkpoint holds
        self.epoch, self.batch, self.epoch_rng, self.step = 1, 0, None, 0
        self.loss_sum, self.loss_steps = 0.0, 0
        self.best, self.best_state, self.best_epoch, self.bad_epochs = -math.inf, None, 0, 0
        self.history: list[dict] = []
        self.finished, self.seconds_before = False, 0.0
        self.layout = {"threads": torch.get_num_threads(), "device": str(self.device)}
        self.segments = [{"step": 0, **self.layout}]
        payload = checkpoint.prepare() if checkpoint is not None else None
        if payload is not None:
            self.resume(payload)
        active = checkpoint is not None and stop is not None
        self.deadline = Deadline.from_slurm(stop_margin_s) if active else Deadline(None)
        self.timer = CheckpointTimer(trainer.checkpoint_minutes if checkpoint is not None else None)
        self.longest_save_s, self.step_s = 0.0, 0.0
        run = checkpoint.path.parent if checkpoint is not None else None  # results/tasks/<task>/<variant>/seed<N>.run
        self.console = ConsoleProgress(f"task {run.parent.parent.name}/{run.parent.name}/{run.stem}" if run
                                       else f"task {self.name}")
        self.console_t0, self.console_steps = time.time(), self.step

    # --- checkpoints -----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The training state a checkpoint holds (:mod:`elmoc.tasks.checkpoint`)."""
        return {
            "model": to_cpu(self.model.state_dict()), "optimizer": self.optimizer.state_dict(),
            "decay": self.decay.state_dict() if self.decay is not None else None,
            "slanted": self.slanted.state_dict() if self.slanted is not None else None,
            "epoch": self.epoch, "batch": self.batch, "epoch_rng": self.epoch_rng, "rng": rng_state(),
            "step": self.step, "loss_sum": self.loss_sum, "loss_steps": self.loss_steps,
            "best": {"score": self.best, "epoch": self.best_epoch, "bad_epochs": self.bad_epochs,
                     "state": to_cpu(self.best_state)},
            "history": self.history, "finished": self.finished, "seconds": self.wall_seconds(),
            "threads": self.layout["threads"], "device": self.layout["device"], "segments": self.segments,
        }

    def resume(self, payload: dict[str, Any]) -> None:
        """Continue from a checkpoint (already checked to fit): weights, optimizer and scheduler,
        position, early-stopping state and every generator."""
        path = self.checkpoint.path
        try:
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            if self.decay is not None:
                self.decay.load_state_dict(payload["decay"])
            if self.slanted is not None:
                self.slanted.load_state_dict(payload["slanted"])
        except (RuntimeError, KeyError, ValueError, TypeError) as e:
            detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise InputFileError(path, f"does not fit the model this task builds ({detail}); {FIX}") from None
        self.epoch, self.batch, self.epoch_rng, self.step = (payload["epoch"], payload["batch"], payload["epoch_rng"],
                                                             payload["step"])
        self.loss_sum, self.loss_steps = payload["loss_sum"], payload["loss_steps"]
        best = payload["best"]
        self.best, self.best_epoch, self.bad_epochs, self.best_state = (best["score"], best["epoch"],
                                                                        best["bad_epochs"], best["state"])
        self.history, self.finished = payload["history"], payload["finished"]
        self.seconds_before = float(payload.get("seconds", 0.0))
        saved = [dict(s) for s in payload.get("segments") or []]
        if saved and any(saved[-1].get(k) != v for k, v in self.layout.items()):
            log.warning("%s resumes at step %d under another layout (%s -> %s): allowed, but the result will "
                        "equal neither layout's uninterrupted run bit for bit (recorded under 'segments')", path,
                        self.step, {k: saved[-1].get(k) for k in self.layout}, self.layout)
            saved.append({"step": self.step, **self.layout})
        self.segments = saved or self.segments
        set_rng_state(payload["rng"])
        log.info("resumed %s: epoch %d, %d batches of it done, step %d%s", path, self.epoch, self.batch, self.step,
                 ", training finished (test evaluation next)" if self.finished else "")

    def save(self) -> None:
        if self.checkpoint is None:
            return
        t_save = time.time()
        self.checkpoint.save(self.state())
        self.timer.saved()
        self.longest_save_s = max(self.longest_save_s, time.time() - t_save)

    def should_stop(self) -> str | None:
        """Why the run must stop now (a stop signal's name, or "time-limit"), or None."""
        if self.checkpoint is None or self.stop is None:
            return None
        reason, _ = self.stop.decide(time_up=self.deadline.reached(time.time(), self.longest_save_s, self.step_s))
        return reason

    def interrupted(self, reason: str) -> RunInterrupted:
        """Save the checkpoint and the exception that ends the run."""
        self.save()
        log.warning("%s stopped by %s at epoch %d, batch %d (step %d); %s holds it: rerun the same command to "
                    "resume", self.name, reason, self.epoch, self.batch, self.step, self.checkpoint.path)
        if reason == TIME_LIMIT:
            log.warning("the job ends at %s (%s): stopped %.0f s before it", time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.localtime(self.deadline.end_time)), self.deadline.source,
                self.deadline.end_time - time.time())
        return RunInterrupted(reason, str(self.checkpoint.path))

    def wall_seconds(self) -> float:
        """Wall time of this run, summed over the attempts it was resumed from, less native
        kernel builds (``native_build_s`` of the record)."""
        return self.seconds_before + time.time() - self.t_start - build_seconds_since(self.t_start)

    # --- the loop ----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train epoch by epoch until the last epoch or early stopping, then score test."""
        try:
            while not self.finished:
                self.train_epoch()
                self.end_epoch()
            self.model.load_state_dict(self.best_state)
            test = self.evaluate("test")
        except _StopHere as stop:
            raise self.interrupted(stop.reason) from None
        return self.result(test)

    def train_epoch(self) -> None:
        """The epoch's remaining batches (all of them, or those after a resumed checkpoint's
        position); after each step the stop conditions and the timed checkpoint."""
        c = self.config
        if self.epoch_rng is None:
            self.epoch_rng = random_state(self.rng)
        set_random_state(self.rng, self.epoch_rng)
        batches = bucket_batches(self.lengths, c.batch_size, self.rng)  # the epoch's order, drawn again on resume
        if self.tuner is not None:
            self.tuner.start_epoch(self.epoch)  # which LM layers train: from the epoch alone
        self.model.train()
        progress = Progress(f"{self.name} epoch {self.epoch} training", len(batches), c.progress_seconds, self.batch)
        with Prefetch(self.collate, batches[self.batch:]) as ahead:
            t_step = time.time()  # a step's time includes any wait for its batch
            for collated in ahead:  # built on another thread while the previous steps run
                loss = self.train_step(batches[self.batch], collated)
                self.batch += 1
                self.step += 1
                self.loss_sum += loss
                self.loss_steps += 1
                progress.update()
                if self.console.due():  # a line on the workflow's console every 30 s
                    self.console.write(self.console_line(len(batches)))
                self.step_s = time.time() - t_step
                reason = self.should_stop()
                if reason is not None:
                    raise _StopHere(reason)
                if self.timer.due():
                    self.save()
                t_step = time.time()
        progress.close()

    def console_line(self, epoch_batches: int) -> str:
        """The progress line of the workflow's console: epoch, batch, mean loss of the epoch so
        far and the time left if every epoch runs (early stopping may end the run sooner)."""
        c = self.config
        done = self.step - self.console_steps
        left = epoch_batches - self.batch + (c.epochs - self.epoch) * epoch_batches
        pace = (time.time() - self.console_t0 - build_seconds_since(self.console_t0)) / max(done, 1)
        return (f"epoch {self.epoch}/{c.epochs}, batch {self.batch}/{epoch_batches}, "
                f"loss {self.loss_sum / max(self.loss_steps, 1):.4f}, {eta_text(left * pace)} at most")

    def collate(self, idx: list[int]) -> Any:
        """The training instances ``idx`` as the task's batch (on the CPU; built ahead of the step)."""
        return self.task.collate([self.train[i] for i in idx], self.inputs)

    def train_step(self, idx: list[int], collated: Any = None) -> float:
        """One optimizer step on the instances ``idx``; returns its loss. ``collated``: their
        batch when :meth:`train_epoch` built it ahead, else it is collated here."""
        c = self.config
        batch = to_device(self.collate(idx) if collated is None else collated, self.device)
        loss = self.model(batch).loss
        if c.mix_l2:
            loss = loss + c.mix_l2 * self.model.mix_penalty()
        self.optimizer.zero_grad()
        loss.backward()
        if c.grad_value:
            torch.nn.utils.clip_grad_value_(self.params, c.grad_value)
        if c.grad_norm:
            torch.nn.utils.clip_grad_norm_(self.params, c.grad_norm)
        self.optimizer.step()
        if self.decay is not None:
            self.decay.step()
        if self.slanted is not None:
            self.slanted.step()
        return loss.item()

    def end_epoch(self) -> None:
        """The dev evaluation, early stopping and plateau decay, then the epoch's checkpoint."""
        c, epoch = self.config, self.epoch
        dev = self.evaluate("dev")
        score = dev[self.task.metric_name]
        train_loss = self.loss_sum / max(self.loss_steps, 1)
        self.history.append({"epoch": epoch, "train_loss": train_loss, "dev": dev})
        log.info("%s epoch %d: train loss %.4f, dev %s %.4f", self.name, epoch, train_loss, self.task.metric_name,
                 score)
        if score > self.best or self.best_state is None:
            self.best, self.best_epoch, self.bad_epochs = score, epoch, 0
            self.best_state = copy.deepcopy(self.model.state_dict())
        else:
            self.bad_epochs += 1
            if c.plateau_factor:
                for group in self.optimizer.param_groups:
                    group["lr"] *= c.plateau_factor
                if self.slanted is not None:  # the schedule scales its base rates, so the cut lasts
                    self.slanted.base_lrs = [lr * c.plateau_factor for lr in self.slanted.base_lrs]
            if self.bad_epochs >= c.patience:
                log.info("early stop after epoch %d (best %d)", epoch, self.best_epoch)
                self.finished = True
        self.finished = self.finished or epoch >= c.epochs
        self.epoch, self.batch, self.epoch_rng, self.loss_sum, self.loss_steps = epoch + 1, 0, None, 0.0, 0
        if not self.finished:
            self.epoch_rng = random_state(self.rng)  # the next epoch's shuffle starts here
        self.save()
        reason = self.should_stop()  # a signal during the evaluation's last batch or the save
        if reason is not None:
            raise _StopHere(reason)

    def evaluate(self, split: str) -> dict[str, float]:
        c = self.config
        return evaluate(self.task, self.model, self.data[split], self.inputs, c.eval_batch_size, self.device,
                        what=f"{self.name} {split} evaluation", progress_seconds=c.progress_seconds,
                        should_stop=self.should_stop)

    def result(self, test: dict[str, float]) -> dict[str, Any]:
        task, best_epoch = self.task, self.best_epoch
        dev_all = self.history[best_epoch - 1]["dev"]
        return {
            "metric": task.metric_name,
            "metric_label": task.metric_label or task.metric_name,
            "dev": self.best,
            "test": test[task.metric_name],
            "extra_scores": {name: {"label": label, "dev": dev_all[name], "test": test[name]}
                             for name, label in task.extra_metrics.items()},
            "dev_all": dev_all,
            "test_all": test,
            "num_train": len(self.train),
            "num_test": len(self.data["test"]),
            "best_epoch": best_epoch,
            "history": self.history,
            "trainer": asdict(self.config),
            "seconds": round(self.wall_seconds(), 2),
            "native_build_s": round(build_seconds_since(0.0), 1),
            "device": str(self.device),
            "threads": torch.get_num_threads(),
            "segments": self.segments,
        }
