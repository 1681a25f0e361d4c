"""Optimizers named in an LM spec's ``optimizer`` section, and global-norm clipping.

``optimizer.type``:

* ``scheduled_adam`` (ELMo-C family, spec 1.1): Adam, betas (0.9, 0.999), eps 1e-6,
  learning rate overwritten each step by :class:`~elmoc.train.schedule.ScaledSchedule`
  (``tokens_per_epoch_ref``, default 4e8, is its length in batch rows; the GPT presets'
  512-token windows set it to 4e8 / 25.6 so the decay spans the same tokens).
* ``adam``: Adam with a constant ``lr``.
* ``adagrad`` (original ELMo / bilm-tf): Adagrad, ``lr`` 0.2, initial accumulator 1.0.
* ``slanted_adam`` (ULMFiT's LM fine-tuning, Howard & Ruder 2018 section 3.2; written by
  ``elmoc lm-finetune``): Adam whose rate at step ``s`` of ``total_steps`` is ``lr`` times the
  slanted triangular multiplier (:func:`~elmoc.train.schedule.slanted_triangular`: ``cut_frac``,
  ``ratio``), divided by ``decay ** (top - l)`` for the parameters of layer ``l``
  (:func:`elmoc.lm.parameter_layers`: the output layer is the top, ``decay`` 1 gives one rate).
  The rate is a function of the step alone, so a resumed run needs no schedule state.

Parameters an output layer reports as sparse (``sparse_parameters()``, e.g. the
sampled softmax's ``nn.Embedding(sparse=True)`` tables) go to a sparse-capable
optimizer: ``torch.optim.SparseAdam`` for the Adam types (as the paper's
``sparse_adam`` option), while Adagrad handles sparse gradients itself.  A dense
V x d gradient per step would make the sampled baseline look slower than it is.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Iterable

import torch
from torch import nn

from elmoc.config import check_range
from elmoc.config_section import check_keys
from elmoc.errors import ConfigError
from elmoc.lm import parameter_layers
from elmoc.train.schedule import ScaledSchedule, check_type, slanted_triangular


@dataclass
class OptimizerBundle:
    """The optimizers of one model and the learning rate as a function of the 1-based step."""

    optimizers: list[torch.optim.Optimizer]
    lr_at: Callable[[int], float]

    def set_lr(self, step: int) -> float:
        """Every group's rate at ``step``: ``lr_at(step)`` times the group's ``lr_scale`` (1 unless
        the optimizer type divides the rate by layer); returns ``lr_at(step)``."""
        lr = self.lr_at(step)
        for opt in self.optimizers:
            for group in opt.param_groups:
                group["lr"] = lr * group.get("lr_scale", 1.0)
        return lr

    def zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def state_dict(self) -> list[dict]:
        return [opt.state_dict() for opt in self.optimizers]

    def load_state_dict(self, states: list[dict]) -> None:
        if len(states) != len(self.optimizers):
            raise ConfigError(
                f"checkpoint has {len(states)} optimizer states but the spec builds {len(self.optimizers)}; "
                "was the optimizer type changed between runs?"
            )
        for opt, state in zip(self.optimizers, states):
            opt.load_state_dict(state)


_KNOWN = {
    "scheduled_adam": {"base_scale", "base_ratio", "warmup", "decay_ratio", "end_decay_ratio", "tokens_per_epoch_ref",
                       "betas", "eps"},
    "adam": {"lr", "betas", "eps", "weight_decay"},
    "adagrad": {"lr", "initial_accumulator_value"},
    "slanted_adam": {"lr", "betas", "eps", "decay", "cut_frac", "ratio", "total_steps"},
}
# The range of each type's numbers, checked here and when the workflow is parsed (elmoc.config.declared_ranges).
OPTION_RANGES = {
    "scheduled_adam": {"base_scale": "> 0", "base_ratio": "> 0", "warmup": "int > 0", "decay_ratio": ">= 0",
                       "end_decay_ratio": "> 0", "tokens_per_epoch_ref": "> 0", "eps": "> 0"},
    "adam": {"lr": "> 0", "eps": "> 0", "weight_decay": ">= 0"},
    "adagrad": {"lr": "> 0", "initial_accumulator_value": ">= 0"},
    "slanted_adam": {"lr": "> 0", "eps": "> 0", "decay": "> 0", "cut_frac": "> 0", "ratio": "> 0",
                     "total_steps": "int > 0"},
}
_INTEGERS = {"warmup", "total_steps"}


def split_parameters(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(dense, sparse) trainable parameters; sparse ones come from ``sparse_parameters()``."""
    sparse_ids: set[int] = set()
    for module in model.modules():
        if hasattr(module, "sparse_parameters"):
            sparse_ids.update(id(p) for p in module.sparse_parameters())
    dense, sparse = [], []
    for p in model.parameters():
        if p.requires_grad:
            (sparse if id(p) in sparse_ids else dense).append(p)
    return dense, sparse


def check_optimizer(config: dict) -> tuple[str, dict]:
    """``(type, options)`` of an LM spec's ``optimizer`` section, checked as :func:`build_optimizer`
    reads it (also when the workflow is parsed): a known type, no unknown key (named with the
    closest known one), numbers of the right type and range; each a one-line ConfigError."""
    if not isinstance(config, dict):
        raise ConfigError(f"optimizer must be a mapping with a 'type' key, got {config!r}")
    config = dict(config)
    kind = config.pop("type", None)
    if kind not in _KNOWN:
        close = difflib.get_close_matches(str(kind), list(_KNOWN), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"optimizer.type must be one of {sorted(_KNOWN)}, got {kind!r}{hint}")
    check_keys(config, _KNOWN[kind], f"optimizer ({kind})")
    for key, value in config.items():  # a string where a number belongs: one line, not a traceback
        if key == "betas":
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise ConfigError(f"optimizer.betas must be a list of two numbers, got {value!r}")
            for beta in value:
                check_type("optimizer.betas", beta, "float")
        else:
            check_type(f"optimizer.{key}", value, "int" if key in _INTEGERS else "float")
            if key in OPTION_RANGES[kind]:
                check_range(value, OPTION_RANGES[kind][key], f"optimizer.{key}")
    return kind, config


def build_optimizer(config: dict, model: nn.Module, batch_size: int) -> OptimizerBundle:
    """Optimizers for ``model`` from the spec's ``optimizer`` section.

    Args:
        config: ``{"type": ..., **options}``.
        batch_size: the *global* batch (the schedule scales with it, spec P10).
    """
    kind, config = check_optimizer(config)
    dense, sparse = split_parameters(model)
    if not dense and not sparse:
        raise ConfigError("the model has no trainable parameters")
    if kind == "adagrad":
        lr = float(config.get("lr", 0.2))
        acc = float(config.get("initial_accumulator_value", 1.0))
        opt = torch.optim.Adagrad(dense + sparse, lr=lr, initial_accumulator_value=acc)
        return OptimizerBundle([opt], lambda step: lr)
    betas = tuple(config.get("betas", (0.9, 0.999)))
    eps = float(config.get("eps", 1e-6 if kind == "scheduled_adam" else 1e-8))
    weight_decay = 0.0
    if kind == "adam":
        lr = float(config.get("lr", 1e-3))
        lr_at: Callable[[int], float] = lambda step: lr
        weight_decay = float(config.get("weight_decay", 0.0))
    elif kind == "slanted_adam":
        lr_at = SlantedRate(float(config.get("lr", 0.004)), int(config.get("total_steps", 1)),
                            float(config.get("cut_frac", 0.1)), float(config.get("ratio", 32.0)))
    else:
        lr_at = ScaledSchedule(
            batch_size=batch_size,
            base_scale=float(config.get("base_scale", 1e-4)),
            base_ratio=float(config.get("base_ratio", 1.0)),
            warmup=int(config.get("warmup", 10000)),
            decay_ratio=float(config.get("decay_ratio", 0.4)),
            end_decay_ratio=float(config.get("end_decay_ratio", 2.0)),
            tokens_per_epoch_ref=float(config.get("tokens_per_epoch_ref", 4e8)),
        )
    scale = layer_scales(model, float(config.get("decay", 1.0)))
    optimizers: list[torch.optim.Optimizer] = []
    if dense:
        optimizers.append(torch.optim.Adam(scaled_groups(dense, scale, lr_at(1)), lr=lr_at(1), betas=betas,
                                           eps=eps, weight_decay=weight_decay))
    if sparse:
        optimizers.append(torch.optim.SparseAdam(scaled_groups(sparse, scale, lr_at(1)), lr=lr_at(1), betas=betas,
                                                 eps=eps))
    return OptimizerBundle(optimizers, lr_at)


@dataclass(frozen=True)
class SlantedRate:
    """``slanted_adam``'s peak rate ``lr`` times ULMFiT's slanted triangular multiplier at the
    1-based ``step`` of ``total`` (the multiplier counts steps from 0)."""

    lr: float
    total: int
    cut_frac: float
    ratio: float

    def __call__(self, step: int) -> float:
        return self.lr * slanted_triangular(step - 1, self.total, self.cut_frac, self.ratio)


def layer_scales(model: nn.Module, decay: float) -> dict[int, float]:
    """``id(parameter)`` -> the factor of its rate: ``decay ** -(top - layer)`` by
    :func:`elmoc.lm.parameter_layers` (the top: the highest layer there), empty when ``decay`` is 1."""
    if decay == 1.0:
        return {}
    layer_of = parameter_layers(model)
    top = max(layer_of.values(), default=0)
    named = dict(model.named_parameters(remove_duplicate=False))
    return {id(named[name]): decay ** -(top - layer) for name, layer in layer_of.items()}


def scaled_groups(params: list[nn.Parameter], scale: dict[int, float], lr: float) -> list:
    """``params`` as one parameter group per rate factor (``lr_scale``, lowest layer first), in
    the parameters' order within each group; ``params`` as they are (one group, no ``lr_scale``)
    when ``scale`` is empty."""
    if not scale:
        return params
    groups: dict[float, list[nn.Parameter]] = {}
    for p in params:
        groups.setdefault(scale.get(id(p), 1.0), []).append(p)
    return [{"params": ps, "lr": lr * factor, "lr_scale": factor} for factor, ps in sorted(groups.items())]


def global_grad_norm(parameters: Iterable[nn.Parameter]) -> torch.Tensor:
    """L2 norm over all gradients, dense and sparse (sparse ones are coalesced first).

    ``torch.nn.utils.clip_grad_norm_`` does not accept sparse gradients, hence this.
    """
    total = None
    for p in parameters:
        g = p.grad
        if g is None:
            continue
        if g.is_sparse:
            # coalescing sizes its result by the number of distinct rows: a host sync per step, kept for
            # SAMPLED's sparse tables (exact scaling needs each row once; the dense V x d alternative costs more)
            g = g.coalesce()
            p.grad = g  # duplicates summed once, so scaling below is exact
            sq = g._values().float().pow(2).sum()
        else:
            sq = g.float().pow(2).sum()
        total = sq if total is None else total + sq
    if total is None:
        return torch.tensor(0.0)
    return total.sqrt()


def clip_global_norm(parameters: Iterable[nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale all gradients so their global L2 norm is at most ``max_norm``.

    Returns the norm before clipping as a 0-dim tensor on the gradients' device.  Nothing
    is read back to the host (no GPU sync per step, issue 19.9): the scale is
    ``min(1, max_norm / (norm + 1e-6))`` computed on the device in float64 (the same
    number the Python-float version computed, so results are unchanged), and every
    gradient is multiplied by it; a non-finite norm leaves the gradients as they are (the
    trainer's loss check stops the run).  The caller converts the norm to a float only
    when it logs it.
    """
    params = [p for p in parameters if p.grad is not None]
    norm = global_grad_norm(params)
    if max_norm <= 0 or not params:
        return norm
    norm64 = norm.double()
    scale = torch.where(torch.isfinite(norm64), (max_norm / (norm64 + 1e-6)).clamp(max=1.0),
                        torch.ones_like(norm64))
    for p in params:
        p.grad.mul_(scale.to(p.grad.dtype))
    return norm
