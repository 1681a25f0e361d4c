"""A task's config section: found, checked against its registered task, completed (registers nothing).

A section is ``tasks.<name>`` of the workflow config: a ``type`` naming a registered task
(:mod:`elmoc.tasks` or a plug-in), the task's constructor options, and the runner's keys
``trainer`` (:class:`elmoc.tasks.runner.TrainerConfig`), ``with_fasttext`` (workflow only), ``encoder``
(``features`` or ``fine_tune``) and ``fine_tune`` (:class:`elmoc.tasks.fine_tune.FineTuneSettings`).
The workflow schema checks only that frame; the task class checks the rest here
(:func:`check_section`), when the workflow is parsed (:func:`complete_sections`, so
``snakemake -n`` names a misspelled key) and again when a command builds the task.

``--config`` of a command may be the whole workflow config (the section is ``tasks.<name>``,
and the top-level ``scale`` is read) or a file holding just one task section.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from elmoc.errors import ConfigError

RUNNER_KEYS = ("trainer", "with_fasttext", "encoder", "fine_tune")  # encoder, fine_tune: elmoc.tasks.fine_tune


def is_section(value: Any) -> bool:
    """Whether an entry of the config's ``tasks`` is a task section (a mapping with a ``type``)."""
    return isinstance(value, dict) and "type" in value


def check_section(section: dict[str, Any], name: str) -> type:
    """The registered task class of a section whose keys it accepts.

    Args:
        section: the section's keys (``type``, constructor options, runner keys).
        name: its place in the config (``tasks.sst5``), for the messages.

    Returns:
        The class; an unknown type, or a key that is neither a constructor option nor a
        runner key, or a ``model`` key outside the task's ``default_model``, is a one-line
        ConfigError naming it and the closest known one.
    """
    from elmoc.config_section import check_keys
    from elmoc.registry import accepted_arguments, by_name

    kind = section.get("type")
    if not isinstance(kind, str):
        raise ConfigError(f"config {name}.type must be the name of a registered task, got {kind!r}")
    try:
        cls = by_name("task", kind)
    except ConfigError as e:
        raise ConfigError(f"config {name}.type: {e}") from None
    from elmoc.tasks.base import Task  # imported by by_name already

    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ConfigError(f"config {name}.type: task {kind!r} is registered to {cls!r}, which does not derive"
                          " from elmoc.tasks.base.Task; derive it from Task (the contract the runner and tables read)")
    names, var_kw = accepted_arguments(cls)
    if not var_kw:
        check_keys(section, {"type", *names, *RUNNER_KEYS}, name)
    if "model" in names and isinstance(section.get("model"), dict):
        check_keys(section["model"], cls.default_model, f"{name}.model")
    return cls


def complete_section(section: dict[str, Any], name: str) -> dict[str, Any]:
    """The section checked (:func:`check_section`) with its task's defaults after its own keys
    (``Task.section_defaults``: every option the run will use, so the ``--section-json`` a rule
    passes names them all)."""
    cls = check_section(section, name)
    defaults = cls.section_defaults()
    return {**section, **{k: copy.deepcopy(v) for k, v in defaults.items() if k not in section}}


def complete_sections(tasks: dict[str, Any]) -> None:
    """Every task section of the config's ``tasks`` replaced by its completed copy, in place
    (what the workflow does once its config is read; the key order of ``tasks`` stays)."""
    for name, value in tasks.items():
        if is_section(value):
            tasks[name] = complete_section(value, f"tasks.{name}")


def load_task_section(path: str | Path, name: str) -> tuple[dict[str, Any], str]:
    """(section of task ``name``, scale) from a YAML file."""
    from elmoc.config import load_yaml

    data = load_yaml(path, mapping="a workflow config or one task section")
    scale = str(data.get("scale", "demo"))
    if "tasks" in data:
        tasks = data["tasks"] or {}
        if not is_section(tasks.get(name)):
            available = sorted(k for k, v in tasks.items() if is_section(v))
            raise ConfigError(f"{path}: no task section tasks.{name} (a mapping with a type); "
                              f"configured tasks: {', '.join(available) or '(none)'}")
        section = tasks[name]
    else:
        section = data
    if "type" not in section:
        raise ConfigError(f"{path}: task {name!r} has no 'type' (e.g. type: sst)")
    return dict(section), scale


def add_task_section_arguments(parser, config_help: str) -> None:
    """``--task``, ``--config`` and ``--section-json``, read by :func:`task_section_from_args`."""
    parser.add_argument("--task", required=True, help="task name, i.e. the key under `tasks:` in the config (e.g. sst5)")
    parser.add_argument("--config", help=config_help)
    parser.add_argument("--section-json", help="the task section as JSON instead of --config (what the workflow passes)")


def task_section_from_args(args) -> tuple[dict[str, Any], str]:
    """(section, scale) from ``--config FILE`` or ``--section-json JSON`` of a command."""
    from elmoc.config_section import Section

    if bool(getattr(args, "config", None)) == bool(getattr(args, "section_json", None)):
        raise ConfigError("give exactly one of --config FILE and --section-json JSON")
    if args.config:
        return load_task_section(args.config, args.task)
    section = Section.parse(args.section_json, f"tasks.{args.task}")  # keys: checked by the task (build_task)
    section.get("type", str, required=True)
    return section.data, "demo"


def build_task(section: dict[str, Any], where: str | None = None):
    """(task object, trainer mapping) from a task section (``where``: its place in messages)."""
    from elmoc.registry import build

    if isinstance(section.get("type"), str):  # else build() says what is wrong
        check_section(section, where or f"task {section['type']!r}")
    config = {k: v for k, v in section.items() if k not in RUNNER_KEYS}
    task = build("task", config)
    return task, section.get("trainer") or {}
