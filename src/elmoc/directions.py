"""The names of a bi-LM's directions, and the one place that decides how a spec trains them.

``train.directions`` in an LM spec: ``separate`` (the default; ELMo-C and its ablations)
trains a forward and a backward :class:`elmoc.lm.LanguageModel` as two runs,
``results/lm/{variant}/forward`` and ``.../backward``; ``joint`` (the softmax family) trains
one :class:`elmoc.lm.BidirectionalLM`, ``results/lm/{variant}/joint``.  :func:`runs` is the
decision; the workflow (``lm_directions`` in workflow/rules/common.smk), ``elmoc train``
(:func:`check_run`) and the batcher ask it.  Imports only :mod:`elmoc.errors` (no torch),
so the Snakefile can import it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from elmoc.errors import ConfigError

FORWARD, BACKWARD, JOINT, SEPARATE = "forward", "backward", "joint", "separate"
DIRECTIONS = (FORWARD, BACKWARD)  # the two directions of a bi-LM, in this order everywhere
RUNS = (FORWARD, BACKWARD, JOINT)  # what one training run trains (`elmoc train --direction`)


def is_joint(spec: dict[str, Any]) -> bool:
    """Whether an LM spec trains one joint bi-LM (``train.directions: joint``) rather than
    two separate directions (``separate``, the default)."""
    value = (spec.get("train") or {}).get("directions", SEPARATE)
    if value not in (JOINT, SEPARATE):
        raise ConfigError(f"train.directions must be {JOINT!r} or {SEPARATE!r}, got {value!r}")
    return value == JOINT


def runs(spec: dict[str, Any]) -> tuple[str, ...]:
    """The training runs of a spec: ``("joint",)`` or ``("forward", "backward")``."""
    return (JOINT,) if is_joint(spec) else DIRECTIONS


def check_run(spec: dict[str, Any], direction: str, spec_path: str | Path | None = None) -> None:
    """Refuse a ``direction`` the spec does not train: "joint" needs ``train.directions:
    joint``, and such a spec trains only "joint" (one ConfigError line naming the spec
    and the fix)."""
    where = str(spec_path) if spec_path else "the spec"
    if direction not in RUNS:
        raise ConfigError(f"direction must be 'forward', 'backward' or 'joint', got {direction!r}")
    if direction in runs(spec):
        return
    if direction == JOINT:
        raise ConfigError(
            f"{where}: --direction joint trains a joint bi-LM, but this spec trains separate directions "
            "(train.directions is 'separate' or unset); set train.directions: joint in it, or train "
            "--direction forward and --direction backward")
    raise ConfigError(
        f"{where}: this spec trains one joint bi-LM (train.directions: joint), not a {direction} LM on its "
        "own; train it with --direction joint, or set train.directions: separate")
