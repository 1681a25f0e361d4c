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

Devices: the model and each batch are moved to ``device`` (:func:`to_device`); that
``.to(device)`` is the only difference between a CPU and a CUDA run, every other
line is shared.  Batches are built on the CPU by the task's ``collate``.
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
from typing import Any, Sequence

import torch
from tqdm import tqdm

from elmoc.config_section import check_keys
from elmoc.errors import ConfigError
from elmoc.tasks.base import Task
from elmoc.tasks.embedder import TaskInputs

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

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None, defaults: dict[str, Any] | None = None) -> "TrainerConfig":
        names = {f.name for f in fields(cls)}
        values, defaults = dict(values or {}), dict(defaults or {})
        if "optimizer" in values and values["optimizer"] != defaults.get("optimizer", "adam") and "lr" not in values:
            defaults.pop("lr", None)  # the paper lr belongs to the paper optimizer
        merged = {**defaults, **values}
        check_keys(merged, names, "trainer")
        config = cls(**merged)
        if config.optimizer not in OPTIMIZER_LR:
            raise ConfigError(f"trainer.optimizer must be one of {', '.join(OPTIMIZER_LR)}, got {config.optimizer!r}")
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
        if not isinstance(config.deterministic, bool):
            raise ConfigError(f"trainer.deterministic must be true or false, got {config.deterministic!r}")
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
        if config.plateau_factor is not None and not 0 < config.plateau_factor < 1:
            raise ConfigError(f"trainer.plateau_factor must be in (0, 1) or null, got {config.plateau_factor}")
        return config


OPTIMIZER_LR = {"adam": 1e-3, "adadelta": 1.0}  # the optimizers and their default learning rates


def build_optimizer(params: Sequence[torch.nn.Parameter], trainer: TrainerConfig) -> torch.optim.Optimizer:
    """The trainer's optimizer over ``params`` (Adam, or Adadelta with ``rho``)."""
    if trainer.optimizer == "adadelta":
        return torch.optim.Adadelta(params, lr=trainer.lr, rho=trainer.rho, weight_decay=trainer.weight_decay)
    return torch.optim.Adam(params, lr=trainer.lr, weight_decay=trainer.weight_decay)


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


def evaluate(task: Task, model, instances: Sequence[Any], inputs: TaskInputs, batch_size: int,
             device: torch.device | str = "cpu") -> dict[str, float]:
    """The task metric of ``model`` (already on ``device``) on ``instances``."""
    device = torch.device(device)
    metric = task.new_metric()
    metric.reset()
    model.eval()
    with torch.no_grad():
        for idx in bucket_batches([task.length(x) for x in instances], batch_size, None):
            batch = to_device(task.collate([instances[i] for i in idx], inputs), device)
            metric.update(model(batch).predictions, batch)
    return metric.compute()


def run_task(task: Task, inputs: TaskInputs, seed: int, trainer: TrainerConfig,
             data: dict[str, list] | None = None, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Train on train, early-stop on dev, score test.

    Args:
        data: already-read splits (``{"train": [...], "dev": [...], "test": [...]}``); read when None.
        device: where the model and batches live (``cpu``, ``cuda``, ``cuda:N``).

    Returns:
        ``{"metric", "metric_label", "dev", "test", "extra_scores", "dev_all", "test_all", "num_train",
        "num_test", "best_epoch", "history", "trainer", "seconds", "device", "threads"}``;
        ``extra_scores`` maps each of the task's ``extra_metrics`` to ``{"label", "dev", "test"}``
        (SRL: the official CoNLL-2005 score beside the span F1).
    """
    with deterministic_mode(trainer.deterministic):
        return _run_task(task, inputs, seed, trainer, data, device)


def _run_task(task: Task, inputs: TaskInputs, seed: int, trainer: TrainerConfig,
              data: dict[str, list] | None, device: torch.device | str) -> dict[str, Any]:
    start = time.time()
    random.seed(seed)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    data = data or {split: task.read(split) for split in ("train", "dev", "test")}
    train = data["train"][: trainer.max_train] if trainer.max_train else data["train"]
    device = torch.device(device)
    model = task.build_model(inputs).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(params, trainer)
    decay = (torch.optim.lr_scheduler.StepLR(optimizer, trainer.lr_decay_steps, trainer.lr_decay)
             if trainer.lr_decay else None)
    lengths = [task.length(x) for x in train]
    best, best_state, best_epoch, bad_epochs, history = -math.inf, None, 0, 0, []
    for epoch in range(1, trainer.epochs + 1):
        model.train()
        total, steps = 0.0, 0
        batches = bucket_batches(lengths, trainer.batch_size, rng)
        for idx in tqdm(batches, desc=f"{task.registered_name} epoch {epoch}", unit="batch", mininterval=30,
                        disable=len(batches) < 50, leave=False):
            batch = to_device(task.collate([train[i] for i in idx], inputs), device)
            loss = model(batch).loss
            if trainer.mix_l2:
                loss = loss + trainer.mix_l2 * model.mix_penalty()
            optimizer.zero_grad()
            loss.backward()
            if trainer.grad_value:
                torch.nn.utils.clip_grad_value_(params, trainer.grad_value)
            if trainer.grad_norm:
                torch.nn.utils.clip_grad_norm_(params, trainer.grad_norm)
            optimizer.step()
            if decay is not None:
                decay.step()
            total += loss.item()
            steps += 1
        dev = evaluate(task, model, data["dev"], inputs, trainer.eval_batch_size, device)
        score = dev[task.metric_name]
        history.append({"epoch": epoch, "train_loss": total / max(steps, 1), "dev": dev})
        log.info("%s epoch %d: train loss %.4f, dev %s %.4f", task.registered_name, epoch,
                 total / max(steps, 1), task.metric_name, score)
        if score > best or best_state is None:
            best, best_epoch, bad_epochs = score, epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad_epochs += 1
            if trainer.plateau_factor:
                for group in optimizer.param_groups:
                    group["lr"] *= trainer.plateau_factor
            if bad_epochs >= trainer.patience:
                log.info("early stop after epoch %d (best %d)", epoch, best_epoch)
                break
    model.load_state_dict(best_state)
    test = evaluate(task, model, data["test"], inputs, trainer.eval_batch_size, device)
    dev_all = history[best_epoch - 1]["dev"]
    return {
        "metric": task.metric_name,
        "metric_label": task.metric_label or task.metric_name,
        "dev": best,
        "test": test[task.metric_name],
        "extra_scores": {name: {"label": label, "dev": dev_all[name], "test": test[name]}
                         for name, label in task.extra_metrics.items()},
        "dev_all": dev_all,
        "test_all": test,
        "num_train": len(train),
        "num_test": len(data["test"]),
        "best_epoch": best_epoch,
        "history": history,
        "trainer": asdict(trainer),
        "seconds": round(time.time() - start, 2),
        "device": str(device),
        "threads": torch.get_num_threads(),
    }
