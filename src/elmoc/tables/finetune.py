"""The side-by-side table of features and fine-tuning (``finetune.*``, issue 37).

Rows: variant x mode, the feature-based runs (``results/tasks/{task}/{variant}/seed*.json``)
first, then each fine-tuning recipe (``results/finetune/{task}/{variant}/{recipe}/seed*.json``).
Columns per task: our test score (mean±sd over seeds, n runs), the mean wall time of a run, and
the paper's feature-based value.  What a run is comes from its metrics JSON: ``encoder``
(``features`` | ``fine_tune``; absent in a result written before fine-tuning existed: features) and
``recipe`` (``ulmfit`` | ``full`` | ``frozen``); task columns are named by the record's
``metric_label`` (an extra score's ``label``), never by a path or a variant's name.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from elmoc.errors import InputFileError
from elmoc.records import TaskRecord, read_json
from elmoc.tables.cells import DAGGER, duration, paper_cell, score_cell, task_order
from elmoc.tables.render import Table
from elmoc.tables.runs import extra_task

FEATURES, FINE_TUNE = "features", "fine_tune"  # the task section's `encoder` values


@dataclass(frozen=True)
class Mode:
    """How a run used its bi-LM: ``key`` sorts and groups the runs (``features``, or the recipe
    with the workflow's recipe name when that differs), ``label`` is the row's Mode cell."""

    key: str
    label: str


def run_mode(data: dict, path: Path) -> Mode:
    """The mode of the metrics JSON ``data`` read from ``path``.

    A fine-tuning run's folder is the workflow's recipe name (``.../{recipe}/seed1.json``); when
    it is neither the JSON's recipe nor the variant, it is shown too (two configured recipes of
    one kind stay two rows)."""
    encoder = data.get("encoder", FEATURES)
    if encoder == FEATURES:
        return Mode(FEATURES, "features")
    if encoder != FINE_TUNE:
        raise InputFileError(path, f"field 'encoder' must be {FEATURES!r} or {FINE_TUNE!r}, got {encoder!r}; "
                             "pass the metrics JSON that `elmoc task` wrote")
    recipe = data.get("recipe")
    if not isinstance(recipe, str) or not recipe:
        raise InputFileError(path, f"field 'recipe' must name the fine-tuning recipe of an 'encoder: {FINE_TUNE}' "
                             f"run, got {recipe!r}; rerun the task with the fine_tune section it names")
    name = path.parent.name
    if name in (recipe, data.get("variant")):
        return Mode(recipe, f"fine-tune: {recipe}")
    return Mode(f"{recipe} [{name}]", f"fine-tune: {recipe} [{name}]")


def read_mode_runs(paths: Iterable[str | Path]) -> tuple[pd.DataFrame, dict[str, str], dict[str, tuple[str, str]]]:
    """(long table, mode key -> label, task key -> (column name, the metric's label)) of the metrics
    JSONs ``paths``.

    The long table has one row per score (``task, variant, seed, mode, test, status, scale,
    seconds, path``; an extra score is task ``<task>:<name>``).  Two results of one task,
    variant, mode and seed are an :class:`InputFileError` naming both files."""
    rows, modes, labels, seen = [], {}, {}, {}
    for path in map(Path, paths):
        data = read_json(path)
        record, mode = TaskRecord.from_dict(data, path), run_mode(data, path)
        key = (record.task, record.variant, mode.key, record.seed)
        if key in seen:
            raise InputFileError(path, f"a second result of task {record.task!r}, variant {record.variant!r}, "
                                 f"mode {mode.label!r}, seed {record.seed} (the first: {seen[key]}); pass one")
        seen[key] = path
        modes.setdefault(mode.key, mode.label)
        row = {"task": record.task, "variant": record.variant, "seed": record.seed, "mode": mode.key,
               "test": record.test, "status": record.status, "scale": record.scale, "seconds": record.seconds,
               "path": str(path)}
        rows.append(row)
        # short column names (task + metric name); a longer label is kept for the table's notes
        labels.setdefault(record.task, (f"{record.task} {record.metric}", record.metric_label))
        for name, extra in record.extra_scores.items():
            task = extra_task(record.task, name)
            rows.append({**row, "task": task, "test": extra.test})
            labels.setdefault(task, (f"{record.task} {name}", extra.label))
    if not rows:
        raise InputFileError("(none)", "no task result files given")
    return pd.DataFrame(rows), modes, labels


def mean_seconds(runs: pd.DataFrame) -> str | None:
    """Mean wall time of the runs that finished (``None``: no such run recorded its time)."""
    ok = runs[(runs.status == "ok") & runs.seconds.notna()]
    return duration(float(ok.seconds.mean())) if not ok.empty else None


CAPTION = ("Test score in %, mean±sd over seeds (n runs), per variant and mode: the feature-based runs "
           "(the bi-LM frozen, its layers read from HDF5, a learned scalar mix) and each fine-tuning recipe "
           "(the bi-LM trained with the task); time: mean wall time of one run; paper: the paper's "
           "feature-based Table 2/3 value.")
NOTES = [
    "ulmfit: discriminative learning rates per LM layer, slanted triangular learning rate, gradual "
    "unfreezing from the top layer; full: every LM layer at one learning rate (BERT style); frozen: the "
    "bi-LM in the task model but not trained (equals features within float tolerance).",
    f"{DAGGER}: not the paper's scale (demo or CPU-sized data and models): not comparable with the paper.",
    "A status instead of a score: the run could not happen (e.g. no data configured).",
]


def finetune_view(paths: Iterable[str | Path]) -> Table:
    """``finetune.*``: rows variant x mode; per task: score, mean wall time, paper (features rows)."""
    long, modes, labels = read_mode_runs(paths)
    tasks = task_order(long, only_seen=True)
    columns = ["Variant", "Mode"]
    for t in tasks:
        name = labels[t][0]
        columns += [name, f"{name} time", f"{name} (paper, features)"]
    metrics = [f"{labels[t][0]}: {labels[t][1]}" for t in tasks if labels[t][1] and labels[t][1] not in labels[t][0]]
    order = [FEATURES] + [m for m in modes if m != FEATURES]
    rows = []
    for variant in dict.fromkeys(long.variant):
        for mode in order:
            runs = long[(long.variant == variant) & (long["mode"] == mode)]
            if runs.empty:
                continue
            row = [variant, modes[mode]]
            for t in tasks:
                task_runs = runs[runs.task == t]
                row += [score_cell(task_runs, variant, t), mean_seconds(task_runs),
                        paper_cell(variant, t) if mode == FEATURES else None]
            rows.append(row)
    notes = NOTES + ([f"Metrics: {'; '.join(metrics)}."] if metrics else [])
    return Table("finetune", "Features and fine-tuning side by side", CAPTION, columns, rows, notes,
                 md_heading="#")
