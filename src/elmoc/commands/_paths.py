"""What a command reads without naming it on its command line (issue 42): the files an LM
spec names, the files a ``model.pt``/``checkpoint.pt`` names (its vocabulary, its spec's
vectors, corpus and tokenizer) and the run files beside it, and who wrote a run folder.

Command modules return these from their ``implicit_inputs(args)``; :mod:`elmoc.cli` adds
them to the declared ``INPUTS`` before the one output check runs.  Every helper here only
looks: a file that is missing or unreadable adds nothing (the command's own loading says
what is wrong with it, in one line)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

RUN_FILES = ("checkpoint.pt", "model.pt", "heldout.json", "train_log.jsonl", "train.log")


def spec_inputs(spec: Any, label: str) -> dict[str, str]:
    """``{"LABEL's KEY": path}`` of every value of the spec (or task section) ``spec`` that
    names an existing file or folder (the same set a checkpoint fingerprints)."""
    from elmoc.train.checkpoint import InputFingerprints

    if not isinstance(spec, (dict, list)):
        return {}
    return {f"{label}'s {key}": path for key, path in InputFingerprints.input_paths(spec).items()}


def spec_file_inputs(path: Any, label: str) -> dict[str, str]:
    """:func:`spec_inputs` of the YAML spec at ``path`` (nothing when it cannot be read)."""
    from elmoc.config import load_yaml

    if not path or not Path(path).is_file():
        return {}
    try:
        return spec_inputs(load_yaml(path), label)
    except Exception:  # noqa: BLE001 (the command reads it again and says what is wrong, in one line)
        return {}


def _payload(path: Path) -> dict | None:
    from elmoc.model_file import FORMAT, load_checkpoint
    from elmoc.tasks.checkpoint import FORMAT as TASK_FORMAT

    try:
        return load_checkpoint(path, mmap=True, formats=(FORMAT, TASK_FORMAT))
    except Exception:  # noqa: BLE001 (unreadable: nothing to add; the command's own load names the file)
        return None


def lm_file_inputs(path: Any, label: str) -> dict[str, str]:
    """What reading the LM file ``path`` (a ``model.pt`` or ``checkpoint.pt``) reads or
    would lose with it: the run files beside it (a ``checkpoint.pt`` to resume from), the
    vocabulary it records and every file its spec names (the vectors table, corpus,
    tokenizer)."""
    if not path:
        return {}
    path = Path(path)
    found = {f"{label}'s {name}": str(path.parent / name) for name in RUN_FILES
             if name != path.name and (path.parent / name).is_file()}
    payload = _payload(path) if path.is_file() else None
    if payload is None:
        return found
    if payload.get("vocab_path") and Path(str(payload["vocab_path"])).exists():
        found[f"{label}'s recorded vocab_path"] = str(payload["vocab_path"])
    found.update(spec_inputs(payload.get("spec"), label))
    return found


def run_owner(folder: Path) -> str | None:
    """``train`` or ``distill`` (an LM run: a distillation's checkpoint carries its ``distill``
    section, its model.pt ``distilled``), ``task`` (a downstream task run), or None when the
    run files there cannot be read."""
    from elmoc.model_file import FORMAT

    for name in ("checkpoint.pt", "model.pt"):
        if (Path(folder) / name).is_file():
            payload = _payload(Path(folder) / name)
            if payload is None:
                return None
            if payload.get("format") != FORMAT:
                return "task"
            if "distilled" in payload or "distill" in (payload.get("spec") or {}):
                return "distill"
            return "train"
    return None
