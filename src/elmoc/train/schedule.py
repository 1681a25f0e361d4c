"""The paper's batch-scaled learning-rate schedule (spec 1.1 "Optimizer", P10).

ELMo-C's code overwrites Adam's learning rate every step with a simplified RNMT+
schedule (Chen et al. 2018).  With ``B`` the *global* batch size::

    n           = base_ratio * B / 128
    start_decay = int(4e8 / B * decay_ratio)
    end_decay   = int(4e8 / B * end_decay_ratio)
    lr(s) = base_scale * min(1 + s*(n-1)/warmup, n, n*(2n)^((start_decay - s)/(end_decay - start_decay)))
            for s < end_decay, and base_scale / 2 afterwards

where the step ``s`` counts from 1.  Warmup starts at about ``base_scale`` (not 0),
plateaus at ``n * base_scale`` and decays toward ``base_scale / 2``.  The warmup term is
held at its value of step ``warmup`` afterwards: the same schedule whenever ``n >= 1`` (the
paper's batches give n = 12), and never a negative rate when ``n < 1`` (a small batch with a
small ``base_ratio``: the rate then goes from ``base_scale`` down to ``n * base_scale``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from elmoc.errors import ConfigError

_EXPECTED = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}


def check_type(key: str, value: Any, annotation: str) -> None:
    """ConfigError unless ``value`` fits a field annotation such as ``"int | None"``
    (an int is a valid float; a bool is not a number)."""
    kinds = [k.strip() for k in annotation.split("|")]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (value is None and "None" in kinds) or (isinstance(value, bool) and "bool" in kinds) \
            or (number and isinstance(value, int) and "int" in kinds) or (number and "float" in kinds) \
            or (isinstance(value, str) and "str" in kinds):
        return
    hint = ""
    if isinstance(value, str):
        try:
            float(value)
            hint = " (write numbers without quotes; YAML reads 1e-4 as a string, 1.0e-4 as a number)"
        except ValueError:
            pass
    expected = " or ".join(_EXPECTED.get(k, k) for k in kinds)
    raise ConfigError(f"{key} must be {expected}, got {value!r} ({type(value).__name__}){hint}")


@dataclass(frozen=True)
class ScaledSchedule:
    """Learning rate as a function of the 1-based step.

    Args:
        batch_size: global batch ``B`` (all data-parallel processes together).
        base_scale: ``1e-4`` in the paper.
        base_ratio: multiplies ``B/128`` to give the plateau factor ``n``.
        warmup: warmup steps (10,000 in the paper).
        decay_ratio, end_decay_ratio: fractions of ``4e8 / B`` steps where decay starts and ends.
        tokens_per_epoch_ref: the ``4e8`` constant (sequences of 20 tokens: 8e9 tokens = ~10 epochs of 1B Word);
            ``optimizer.tokens_per_epoch_ref`` in a spec sets it (the GPT presets: 4e8 / 25.6 for 512-token rows).
    """

    batch_size: int
    base_scale: float = 1e-4
    base_ratio: float = 1.0
    warmup: int = 10000
    decay_ratio: float = 0.4
    end_decay_ratio: float = 2.0
    tokens_per_epoch_ref: float = 4e8

    def __post_init__(self) -> None:
        for f in fields(self):
            check_type(f"schedule.{f.name}", getattr(self, f.name), str(f.type))
        if self.batch_size <= 0:
            raise ConfigError(f"schedule: batch_size must be positive, got {self.batch_size}")
        if self.warmup <= 0:
            raise ConfigError(f"schedule: warmup must be a positive number of steps, got {self.warmup}")
        if not 0 <= self.decay_ratio < self.end_decay_ratio:
            raise ConfigError(
                f"schedule: need 0 <= decay_ratio < end_decay_ratio, got {self.decay_ratio} and {self.end_decay_ratio}"
            )
        if self.start_decay >= self.end_decay:
            raise ConfigError(
                f"schedule: start_decay ({self.start_decay}) must be before end_decay ({self.end_decay}); "
                "the batch size is too large for tokens_per_epoch_ref"
            )

    @property
    def n(self) -> float:
        return self.base_ratio * self.batch_size / 128

    @property
    def start_decay(self) -> int:
        return int(self.tokens_per_epoch_ref / self.batch_size * self.decay_ratio)

    @property
    def end_decay(self) -> int:
        return int(self.tokens_per_epoch_ref / self.batch_size * self.end_decay_ratio)

    def __call__(self, step: int) -> float:
        if step < 1:
            raise ValueError(f"steps count from 1, got {step}")
        n = self.n
        if step >= self.end_decay:
            return self.base_scale / 2
        # the warmup term stops at the end of warmup: for n >= 1 (every paper batch) it is >= n from there
        # on and the min() is the formula's; for n < 1 the unstopped term would fall below zero after
        # warmup / (1 - n) steps, a negative learning rate (issue 25's shared-data masked LMs hit it)
        warm = 1 + min(step, self.warmup) * (n - 1) / self.warmup
        decay = n * (2 * n) ** ((self.start_decay - step) / (self.end_decay - self.start_decay))
        return self.base_scale * min(warm, n, decay)


def slanted_triangular(step: int, total: int, cut_frac: float, ratio: float) -> float:
    """ULMFiT's slanted triangular multiplier of the peak rate at ``step`` (0-based) of ``total``:
    a linear rise from 1/ratio to 1 over the first ``cut_frac`` of the steps, then a linear fall
    back towards 1/ratio (ULMFiT's eq. 3).
    The ``ulmfit`` task recipe and ``elmoc lm-finetune``'s ``slanted_adam`` optimizer both use it."""
    cut = max(1, math.floor(total * cut_frac))
    if step < cut:
        p = step / cut
    else:
        p = max(0.0, 1 - (step - cut) / max(1, total - cut))
    return (1 + p * (ratio - 1)) / ratio
