"""The names of a bi-LM's directions, and the one place that decides how a spec trains them.

``train.directions`` in an LM spec: ``separate`` (the default; ELMo-C and its ablations)
trains a forward and a backward :class:`elmoc.lm.LanguageModel` as two runs,
``results/lm/{variant}/forward`` and ``.../backward``; ``joint`` (the softmax family) trains
one :class:`elmoc.lm.BidirectionalLM`, ``results/lm/{variant}/joint``; ``forward`` (the GPT
presets: the paper's GPT is "a uni-directional Transformer", section 5.2.2) trains the forward
LM alone, ``results/lm/{variant}/forward``, and its features are the forward direction's
(width H, not 2H; :func:`one_direction`).  A masked LM
(``train.objective: masked_lm``, issue 25) is one bidirectional model, not two directions:
one run, ``results/lm/{variant}/masked`` (:class:`elmoc.masked_lm.MaskedLM`).  :func:`runs`
is the decision; the workflow (``lm_directions`` in workflow/rules/common.smk), ``elmoc
train`` (:func:`check_run`) and the batcher ask it.  A run that trains one file (joint or
masked) gives extraction and export that one ``model.pt`` as both "forward" and
"backward" (:func:`single_run`); a one-direction LM's file is the forward one, with no backward.  Imports only :mod:`elmoc.errors` (no torch), so the
Snakefile can import it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from elmoc.errors import ConfigError

FORWARD, BACKWARD, JOINT, SEPARATE, MASKED = "forward", "backward", "joint", "separate", "masked"
TRAIN_DIRECTIONS = (SEPARATE, JOINT, FORWARD)  # the values of train.directions
DIRECTIONS = (FORWARD, BACKWARD)  # the two directions of a bi-LM, in this order everywhere
RUNS = (FORWARD, BACKWARD, JOINT, MASKED)  # what one training run trains (`elmoc train --direction`)
CAUSAL_LM, MASKED_LM = "causal_lm", "masked_lm"
OBJECTIVES = (CAUSAL_LM, MASKED_LM)  # train.objective


def is_masked(spec: dict[str, Any]) -> bool:
    """Whether an LM spec trains a masked LM (``train.objective: masked_lm``) rather than
    next-word LMs (``causal_lm``, the default)."""
    value = (spec.get("train") or {}).get("objective", CAUSAL_LM)
    if value not in OBJECTIVES:
        raise ConfigError(f"train.objective must be {CAUSAL_LM!r} or {MASKED_LM!r}, got {value!r}")
    return value == MASKED_LM


def train_directions(spec: dict[str, Any]) -> str:
    """``train.directions`` of an LM spec, checked: "separate" (the default), "joint" or "forward"."""
    value = (spec.get("train") or {}).get("directions", SEPARATE)
    if value not in TRAIN_DIRECTIONS:
        raise ConfigError(f"train.directions must be {SEPARATE!r} (a forward and a backward LM), {JOINT!r} (one "
                          f"joint bi-LM) or {FORWARD!r} (one forward LM), got {value!r}")
    return value


def is_joint(spec: dict[str, Any]) -> bool:
    """Whether an LM spec trains one joint bi-LM (``train.directions: joint``) rather than
    separate directions (``separate``, the default, or ``forward`` alone)."""
    return train_directions(spec) == JOINT


def one_direction(spec: dict[str, Any]) -> bool:
    """Whether an LM spec trains one forward LM alone (``train.directions: forward``, the GPT
    presets): one run, and features of the forward direction only."""
    return not is_masked(spec) and train_directions(spec) == FORWARD


def runs(spec: dict[str, Any]) -> tuple[str, ...]:
    """The training runs of a spec: ``("masked",)``, ``("joint",)``, ``("forward",)`` or
    ``("forward", "backward")``."""
    if is_masked(spec):
        if (spec.get("train") or {}).get("directions", SEPARATE) != SEPARATE:
            raise ConfigError("train.directions does not apply to a masked LM (train.objective: masked_lm: one "
                              "bidirectional model); remove it")
        return (MASKED,)
    value = train_directions(spec)
    return (JOINT,) if value == JOINT else (FORWARD,) if value == FORWARD else DIRECTIONS


def single_run(runs_: tuple[str, ...] | list[str]) -> str | None:
    """The one run whose ``model.pt`` serves as both directions' file ("joint", "masked"),
    or None for separate direction runs (two, or the forward one of a one-direction LM)."""
    return runs_[0] if tuple(runs_) in ((JOINT,), (MASKED,)) else None


def check_run(spec: dict[str, Any], direction: str, spec_path: str | Path | None = None) -> None:
    """Refuse a ``direction`` the spec does not train: "joint" needs ``train.directions:
    joint``, and such a spec trains only "joint"; ``train.directions: forward`` trains only "forward"; "masked" needs ``train.objective:
    masked_lm``, and such a spec trains only "masked" (one ConfigError line naming the
    spec and the fix)."""
    where = str(spec_path) if spec_path else "the spec"
    if direction not in RUNS:
        raise ConfigError(f"direction must be 'forward', 'backward', 'joint' or 'masked', got {direction!r}")
    trained = runs(spec)
    if direction in trained:
        return
    if trained == (MASKED,):
        raise ConfigError(
            f"{where}: this spec trains one masked LM (train.objective: masked_lm), not a {direction} run; "
            "train it with --direction masked")
    if direction == MASKED:
        raise ConfigError(
            f"{where}: --direction masked trains a masked LM, but this spec trains next-word LMs "
            "(train.objective is 'causal_lm' or unset); set train.objective: masked_lm in it, or train "
            f"--direction {' and --direction '.join(trained)}")
    if trained == (FORWARD,):
        raise ConfigError(
            f"{where}: this spec trains one forward LM (train.directions: forward), not a {direction} run; "
            "train it with --direction forward, or set train.directions: separate for both directions")
    if direction == JOINT:
        raise ConfigError(
            f"{where}: --direction joint trains a joint bi-LM, but this spec trains separate directions "
            "(train.directions is 'separate' or unset); set train.directions: joint in it, or train "
            "--direction forward and --direction backward")
    raise ConfigError(
        f"{where}: this spec trains one joint bi-LM (train.directions: joint), not a {direction} LM on its "
        "own; train it with --direction joint, or set train.directions: separate")
