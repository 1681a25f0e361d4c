"""Result JSON files -> the paper's tables (Markdown + CSV), ours beside the published.

``pretrain_table``: one row per (variant, direction) from ``heldout.json`` files.
``downstream_table``: Table 2/3 layout, one row per variant, one column per task;
each cell is ``mean +/- std`` over seeds of the test metric (in %), then the
paper's value in parentheses.  A task that could not run shows its status
(e.g. ``no data: set tasks.ner.train``), never a blank.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterable

import pandas as pd

from elmoc.errors import InputFileError
from elmoc.tables.paper import DOWNSTREAM, PAPER_LABELS, TASKS


def _read_json(path: str | Path) -> dict:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFileError(path, "result file not found") from None
    except json.JSONDecodeError as e:
        raise InputFileError(path, f"invalid JSON: {e.msg}", e.lineno) from None


def pretrain_table(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Rows: variant, direction, heldout metric before/after, steps, tokens, seconds, params."""
    rows = []
    for path in paths:
        path = Path(path)
        data = _read_json(path)
        def r4(x):
            return None if x is None else round(float(x), 4)

        rows.append({
            "variant": path.parent.parent.name,
            "direction": data.get("direction", path.parent.name),
            "metric": data.get("metric"),
            "before": r4(data.get("before")),
            "after": r4(data.get("after")),
            "constant_baseline": r4(data.get("constant_baseline")),
            "steps": data.get("steps"),
            "tokens": data.get("tokens"),
            "seconds": round(float(data.get("seconds", float("nan"))), 1),
            "trainable_params": data.get("trainable_parameters"),
        })
    if not rows:
        raise InputFileError("(none)", "no heldout.json files given")
    return pd.DataFrame(rows)


def _fmt(mean: float, std: float | None) -> str:
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.2f}"
    return f"{mean:.2f}±{std:.2f}"


def downstream_table(paths: Iterable[str | Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(display table, long table of every run).

    Each JSON holds ``task, variant, seed, metric, test, status, scale`` (see
    docs/architecture.md).  ``test`` is a fraction in [0, 1] and shown in %.
    """
    runs = []
    for path in paths:
        data = _read_json(path)
        for key in ("task", "variant", "seed"):
            if key not in data:
                raise InputFileError(path, f"result JSON lacks the {key!r} field")
        runs.append({
            "task": data["task"], "variant": data["variant"], "seed": data["seed"],
            "metric": data.get("metric"), "dev": data.get("dev"), "test": data.get("test"),
            "status": data.get("status", "ok"), "scale": data.get("scale", "full"),
            "seconds": data.get("seconds"), "path": str(path),
        })
    long = pd.DataFrame(runs)
    if long.empty:
        raise InputFileError("(none)", "no downstream result files given")
    variants = list(dict.fromkeys(long["variant"]))
    tasks = [t for t in TASKS if t in set(long["task"])] + sorted(set(long["task"]) - set(TASKS))
    table = []
    for variant in variants:
        row = {"variant": variant, "paper_label": PAPER_LABELS.get(variant, "")}
        for task in tasks:
            sel = long[(long.variant == variant) & (long.task == task)]
            if sel.empty:
                row[task] = "not run"
                continue
            ok = sel[sel.status == "ok"]
            if ok.empty:
                row[task] = str(sel.status.iloc[0])
                continue
            scores = ok.test.astype(float) * 100.0
            std = float(scores.std(ddof=1)) if len(scores) > 1 else None
            scale = " [demo]" if (ok.scale == "demo").any() else " [cpu]" if (ok.scale == "cpu").any() else ""
            cell = f"{_fmt(float(scores.mean()), std)} (n={len(scores)}){scale}"
            paper = DOWNSTREAM.get(variant, {}).get(task)
            if paper is not None:
                cell += f"; paper {_fmt(*paper)}"
            row[task] = cell
        table.append(row)
    return pd.DataFrame(table), long


def write_table(df: pd.DataFrame, md_path: str | Path, csv_path: str | Path | None = None,
                title: str | None = None, notes: Iterable[str] = ()) -> None:
    """Markdown (+ CSV) written atomically."""
    from elmoc.data.atomic import atomic_file

    body = _markdown(df)
    text = (f"# {title}\n\n" if title else "") + body + "\n"
    notes = list(notes)
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    with atomic_file(md_path) as f:
        f.write(text)
    if csv_path is not None:
        with atomic_file(csv_path) as f:
            df.to_csv(f, index=False)


def _markdown(df: pd.DataFrame) -> str:
    """A GitHub-style Markdown table (pandas' own to_markdown would add a `tabulate` dependency)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join("" if pd.isna(v) else str(v) for v in r.tolist()) + " |")
    return "\n".join(lines)
