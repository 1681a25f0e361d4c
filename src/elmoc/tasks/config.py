"""Find a task's section in a config file and build the task from it (registers nothing).

``--config`` may be the whole workflow config (the section is ``tasks.<name>``,
and the top-level ``scale`` is read) or a file holding just one task section.
Keys of a section that are not constructor arguments of the task: ``trainer``
(:class:`elmoc.tasks.runner.TrainerConfig`) and ``with_fasttext`` (workflow only).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from elmoc.errors import ConfigError, InputFileError

RUNNER_KEYS = ("trainer", "with_fasttext")


def load_task_section(path: str | Path, name: str) -> tuple[dict[str, Any], str]:
    """(section of task ``name``, scale) from a YAML file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "config file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise InputFileError(path, f"invalid YAML ({e})") from None
    if not isinstance(data, dict):
        raise InputFileError(path, "config must be a mapping")
    scale = str(data.get("scale", "demo"))
    if "tasks" in data:
        tasks = data["tasks"] or {}
        if name not in tasks or not isinstance(tasks[name], dict):
            available = sorted(k for k, v in tasks.items() if isinstance(v, dict) and "type" in v)
            raise ConfigError(f"{path}: no task section tasks.{name}; configured tasks: {', '.join(available) or '(none)'}")
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
    import json

    if bool(getattr(args, "config", None)) == bool(getattr(args, "section_json", None)):
        raise ConfigError("give exactly one of --config FILE and --section-json JSON")
    if args.config:
        return load_task_section(args.config, args.task)
    try:
        section = json.loads(args.section_json)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--section-json is not valid JSON ({e})") from None
    if not isinstance(section, dict) or "type" not in section:
        raise ConfigError(f"--section-json must be a task section with a 'type', got {args.section_json[:80]!r}")
    return section, "demo"


def build_task(section: dict[str, Any]):
    """(task object, trainer mapping) from a task section."""
    from elmoc.config_section import check_keys
    from elmoc.registry import accepted_arguments, build, by_name

    if isinstance(section.get("type"), str):  # else build() says what is wrong
        names, var_kw = accepted_arguments(by_name("task", section["type"]))
        if not var_kw:  # the runner's keys beside the task's own, so that `with_fastext` gets its suggestion
            check_keys(section, {"type", *names, *RUNNER_KEYS}, f"task {section['type']!r}")
    config = {k: v for k, v in section.items() if k not in RUNNER_KEYS}
    task = build("task", config)
    return task, section.get("trainer") or {}
