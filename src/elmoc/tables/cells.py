"""Cell texts shared by the layouts: scores ``mean±std (n=k)``, the paper's value, counts,
durations, the task columns and the ``†`` mark of a setting that differs from the paper's."""
from __future__ import annotations

import math

import pandas as pd

from elmoc.tables import paper

DAGGER = "†"


def mean_std(mean: float, std: float | None) -> str:
    """``52.00±2.00``, or ``52.00`` without a std (one run)."""
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.2f}"
    return f"{mean:.2f}±{std:.2f}"


def score_cell(runs: pd.DataFrame, variant: str, task: str, mark: bool = True) -> str | None:
    """``mean±std (n=k)`` of the test scores in %, ``†`` for non-paper scale; the status
    of a run that could not run; ``None`` (a gap) when nothing ran."""
    sel = runs[(runs.variant == variant) & (runs.task == task)] if not runs.empty else runs
    if sel.empty:
        return None
    ok = sel[(sel.status == "ok") & sel.test.notna()]
    if ok.empty:
        return str(sel.status.iloc[0])
    scores = ok.test.astype(float) * 100.0
    std = float(scores.std(ddof=1)) if len(scores) > 1 else None
    cell = f"{mean_std(float(scores.mean()), std)} (n={len(scores)})"
    if mark and (ok.scale != "full").any():
        cell += f" {DAGGER}"
    return cell


def paper_cell(variant: str, task: str) -> str | None:
    """The paper's ``mean±std`` of a variant on a task; ``None`` where it printed none."""
    value = paper.DOWNSTREAM.get(variant, {}).get(task)
    return None if value is None else mean_std(*value)


def task_order(runs: pd.DataFrame, only_seen: bool = False) -> list[str]:
    """Task columns: the paper's tasks in its order (only those with runs when
    ``only_seen``), each followed by the extra scores that its runs report
    (``srl`` -> ``srl:conll05-f1``), then any other task."""
    seen = set(runs.task) if not runs.empty else set()
    out = []
    for t in paper.TASKS:
        extras = {f"{t}:{e}" for e in paper.EXTRA_SCORES.get(t, ())}
        out += [x for x in [t] + sorted(extras) if x in seen or not only_seen]
        out += sorted(x for x in seen - extras if x.startswith(f"{t}:"))
    return out + sorted(x for x in seen if x not in out)


def count(n: float | None) -> str | None:
    """``76.2M``, ``4.0K``, ``600``; ``None`` stays a gap."""
    if n is None:
        return None
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}K"
    return str(int(n))


def duration(seconds: float | None) -> str | None:
    """Seconds as ``40 s``, ``2.7 min``, ``3.1 h`` or ``2.5 days``; ``None`` stays a gap."""
    if seconds is None:
        return None
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def task_columns(tasks: list[str]) -> list[str]:
    """Header of the task cells: each task's label, then its paper column."""
    cols = []
    for t in tasks:
        label = paper.TASK_LABELS.get(t, t)
        cols += [label, f"{label} (paper)"]
    return cols


def paper_columns(tasks: list[str]) -> dict[str, str]:
    """``{paper column: its column of ours}`` of :func:`task_columns` (``Table.paper_of``)."""
    labels = [paper.TASK_LABELS.get(t, t) for t in tasks]
    return {f"{label} (paper)": label for label in labels}


def score_cells(runs: pd.DataFrame, variant: str, tasks: list[str]) -> list[str | None]:
    """A row's task cells under :func:`task_columns`: ours, then the paper's, per task."""
    cells: list[str | None] = []
    for t in tasks:
        cells += [score_cell(runs, variant, t), paper_cell(variant, t)]
    return cells
