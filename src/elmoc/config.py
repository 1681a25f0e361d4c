"""Loading YAML, and resolving an LM variant into a complete spec.

A workflow config names pretraining variants; each one is a preset from
``config/lm/<preset>.yaml`` (paper sizes) plus overrides: first the config-wide
``pretrain.overrides`` (e.g. the demo's small sizes), then the variant's own::

    pretrain:
      overrides: {encoder: {cell_size: 256, projection_size: 64}}
      variants:
        elmo-c: {}                                  # preset config/lm/elmo-c.yaml
        elmo-c-small: {preset: elmo-c, overrides: {train: {batch_size: 16}}}

Mappings merge key by key; any other value (lists included) replaces.  This module
imports only PyYAML, so the Snakefile can use it without loading torch.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterator

import yaml

from elmoc.errors import ConfigError, InputFileError

ARTIFACT_PREFIXES = ("results/", "resources/")
DEFAULT_VOCAB = "results/vocab/vocab.txt"
DEFAULT_DATA = {"train": "results/corpus/train", "heldout": "results/corpus/heldout.txt"}


def load_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "file not found")
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputFileError(path, f"invalid YAML: {getattr(e, 'problem', e)}", None if line is None else line + 1) from None
    except UnicodeDecodeError as e:
        raise InputFileError(path, f"not valid UTF-8 ({e.reason})") from None


def deep_merge(base: Any, override: Any) -> Any:
    """``override`` merged into a copy of ``base`` (mappings recursively)."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            merged[key] = deep_merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def resolve_variant(config: dict[str, Any], variant: str, presets_dir: str | Path | None = None) -> dict[str, Any]:
    """The complete LM spec of ``variant`` under a (validated) workflow ``config``."""
    pretrain = config.get("pretrain", {})
    variants = pretrain.get("variants", {})
    if variant not in variants:
        raise ConfigError(f"unknown variant {variant!r}; the config defines: {', '.join(sorted(variants)) or '(none)'}")
    entry = variants[variant] or {}
    presets_dir = Path(presets_dir or pretrain.get("presets_dir", "config/lm"))
    preset_name = entry.get("preset", variant)
    preset_path = presets_dir / f"{preset_name}.yaml"
    if not preset_path.is_file():
        available = sorted(p.stem for p in presets_dir.glob("*.yaml"))
        raise ConfigError(f"variant {variant!r}: no preset {preset_path}; available presets: {', '.join(available)}")
    spec = load_yaml(preset_path) or {}
    if not isinstance(spec, dict):
        raise InputFileError(preset_path, "an LM preset must be a mapping")
    spec = deep_merge(spec, pretrain.get("overrides", {}) or {})
    spec = deep_merge(spec, entry.get("overrides", {}) or {})
    spec["name"] = variant
    spec.setdefault("vocab", pretrain.get("vocab", DEFAULT_VOCAB))
    spec["data"] = deep_merge(DEFAULT_DATA, spec.get("data", {}) or {})
    return spec


def artifact_paths(spec: Any) -> list[str]:
    """Every string in ``spec`` that names a workflow artifact (``results/...``), sorted."""

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)
        elif isinstance(node, str) and node.startswith(ARTIFACT_PREFIXES):
            yield node

    return sorted(set(walk(spec)))


def dump_yaml(data: Any, path: str | Path) -> None:
    """Write YAML atomically."""
    from elmoc.data.atomic import atomic_file

    with atomic_file(path) as f:
        yaml.safe_dump(data, f, sort_keys=False)


JOINT, SEPARATE = "joint", "separate"


def is_joint(spec: dict[str, Any]) -> bool:
    """Whether an LM spec trains one joint bi-LM (``train.directions: joint``, the softmax
    family: :class:`elmoc.lm.BidirectionalLM`) rather than two separate directions
    (``separate``, the default).  Here, not in :mod:`elmoc.lm`, so the workflow can ask
    without importing torch."""
    value = (spec.get("train") or {}).get("directions", SEPARATE)
    if value not in (JOINT, SEPARATE):
        raise ConfigError(f"train.directions must be {JOINT!r} or {SEPARATE!r}, got {value!r}")
    return value == JOINT
