"""Where the workflow's method runs keep their files: one function per layout, used by the rules
(workflow/rules/*.smk and helpers/, with ``{wildcard}`` placeholders for arguments) and by the code
that writes or reads the folders, so the two cannot drift apart.

Every config is a *run* (its top-level ``run:`` key, issue 52.6): all its outputs live under
``results/<run>/`` (:func:`run_root`) and its logs under ``logs/<run>/`` (:func:`run_logs`), so the
demo, shared-data and paper runs of one checkout sit side by side. A config (or LM preset) names
its artifacts ``results/...`` as before; the workflow reads them inside the run's folder
(:func:`relocate`). Only the downloads (``resources/``), which depend on no config, are shared.

Inside the run's folder ``<root>``:

- prune: ``<root>/prune/<variant>/<plan>/<run>/`` (:func:`prune_dir`) holds one training run per
  round, ``round<k>/`` (:func:`prune_round`), with a lottery ticket's controls ``control<k>/``
  (:func:`prune_control`) and ``ticket/`` / ``control/`` (:data:`TICKET`, :data:`CONTROL`);
- students: ``<root>/distill/<student>/`` (:func:`student_dir`);
- compressed copies and the smaller models of the compression table:
  ``<root>/compressed/<variant>/<role>/`` (:func:`compressed_dir`), roles ``student-<name>``
  (:func:`student_role`) and ``pruned-<plan>-<level>`` (:func:`pruned_role`).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from elmoc.errors import ConfigError

TICKET, CONTROL = "ticket", "control"

RESULTS, LOGS = "results", "logs"
# a run's name: one folder name (no "/", no leading "." or "-")
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# what a run's folder holds at its top: the names a results/ made before run names has directly in
# results/ (:func:`flat_layout_parts`), which a run may therefore not be called
RUN_PARTS = ("baselines", "bpe", "compressed", "compression-work", "corpus", "distill", "fasttext", "features",
             "figures", "finetune", "index.html", "lm", "lm_finetune", "models", "open_vocab", "prune", "report",
             "report.html", "summary.txt", "tables", "tasks", "vectors", "vocab")
# the folders a logs/ made before run names has directly in logs/ (beside the shared logs/fetch/)
LOG_PARTS = ("bench", "benchmarks", "bpe", "bpe.log", "compress", "export", "extract", "fetch", "lm_spec", "pretrain",
             "released_lm", "task_sentences")


def check_run_name(run: Any, source: str) -> str:
    """``run`` when it is a usable run name, else a one-line ConfigError naming ``source`` (the config files)."""
    if not isinstance(run, str) or not RUN_NAME.fullmatch(run):
        raise ConfigError(f"config {source}: run: {run!r} is not a folder name; use letters, digits, '.', '_' or '-' "
                          "(at most 64, starting with a letter or digit), e.g. `run: my-corpus`")
    if run in RUN_PARTS or run in LOG_PARTS:
        raise ConfigError(f"config {source}: run: {run!r} is the name of a folder of every run's results or logs "
                          f"(results/<run>/{run}, logs/{run}); choose another name, e.g. `run: {run}-run`")
    return run


def default_run_name(configfiles: list[str]) -> str:
    """The run of a config without ``run:``: the name of its first (base) config file, made a
    folder name (``my config.yaml`` -> ``my-config``); "default" when none gives one."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(configfiles[0]).stem).strip(".-_") if configfiles else ""
    return stem if RUN_NAME.fullmatch(stem or "-") and stem not in RUN_PARTS + LOG_PARTS else "default"


def run_root(run: str) -> str:
    """The folder of every output of run ``run``: ``results/<run>``."""
    return f"{RESULTS}/{run}"


def run_logs(run: str) -> str:
    """The folder of every log (and benchmark file) of run ``run``: ``logs/<run>``."""
    return f"{LOGS}/{run}"


def relocate(value: Any, run: str) -> Any:
    """``value`` (a config, an LM spec: nested dicts, lists, strings) with every string that names a
    workflow artifact, ``results/X``, read inside the run's folder, ``results/<run>/X``; other values as
    they are (``resources/`` downloads are shared by all runs), a string inside the run's folder
    already too (relocating twice changes nothing)."""
    if isinstance(value, dict):
        return {k: relocate(v, run) for k, v in value.items()}
    if isinstance(value, list):
        return [relocate(v, run) for v in value]
    if isinstance(value, str) and value.startswith(RESULTS + "/") and not value.startswith(run_root(run) + "/"):
        return f"{run_root(run)}/{value[len(RESULTS) + 1:]}"
    return value


def flat_layout_parts(results: str | Path = RESULTS) -> list[str]:
    """The entries of ``results`` that a workflow made before run names (``results/lm``,
    ``results/tables``...: :data:`RUN_PARTS` directly in ``results/``), sorted; [] when none."""
    folder = Path(results)
    return sorted(name for name in RUN_PARTS if (folder / name).exists())


def flat_layout_note(results: str | Path = RESULTS) -> str | None:
    """One line for the start of a run when ``results`` holds a layout from before run names:
    it is left as it is, and how to keep it as a run of its own; None when there is none."""
    parts = flat_layout_parts(results)
    if not parts:
        return None
    return (f"note: {results}/ holds outputs from before run names ({', '.join(parts)}); they are left in place and "
            f"this run writes under {results}/<run>/; to keep them as a run of their own: mkdir {results}/old && "
            f"mv {' '.join(f'{results}/{p}' for p in parts)} {results}/old/ (then compare with `run: old`)")


def prune_dir(root: str, variant: str, plan: str, run: str) -> str:
    """The output folder of one ``elmoc prune`` job (a plan of ``prune.plans`` on one training run)
    in the run folder ``root`` (:func:`run_root`)."""
    return f"{root}/prune/{variant}/{plan}/{run}"


def prune_round(number: int) -> str:
    """The folder of prune round ``number`` (1-based) inside :func:`prune_dir`."""
    return f"round{number}"


def prune_control(number: int) -> str:
    """The folder of round ``number``'s lottery-ticket control (rewinding each round)."""
    return f"{CONTROL}{number}"


def student_dir(root: str, student: str) -> str:
    """The folder of a distilled student in the run folder ``root``: ``spec.yaml``,
    ``<direction>/model.pt``, ``model/``."""
    return f"{root}/distill/{student}"


def compressed_dir(root: str, variant: str, role: str = "") -> str:
    """The model directory of one row of ``variant``'s compression table in the run folder ``root``
    (no ``role``: the folder holding them all)."""
    return f"{root}/compressed/{variant}" + (f"/{role}" if role else "")


def student_role(student: str) -> str:
    return f"student-{student}"


def pruned_role(plan: str, level: float | str) -> str:
    """A prune round's row name: ``pruned-<plan>-<level>`` (0.5 -> "0.5", 1 -> "1")."""
    return f"pruned-{plan}-{level if isinstance(level, str) else format(float(level), 'g')}"
