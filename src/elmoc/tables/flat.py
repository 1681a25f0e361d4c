"""The flat views ``pretrain.md`` and ``downstream.md``: one row per LM run, one row per
variant with a column per task; written by :func:`elmoc.tables.render.write_files`."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from elmoc.errors import InputFileError
from elmoc.tables import paper
from elmoc.tables.cells import paper_cell, score_cell, task_order
from elmoc.tables.runs import read_lm_runs, read_task_runs


def pretrain_table(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Rows: variant, direction, heldout metric before/after, steps, tokens, seconds, params.

    A joint bi-LM is one row (direction ``joint``: the combined metric, both directions'
    tokens, its one run's time and parameters) with each direction's final value in
    ``after_forward`` / ``after_backward`` (empty for a separate direction's row)."""
    def r4(x):
        return None if x is None else round(float(x), 4)

    rows = []
    for run in read_lm_runs(paths):
        rec = run.record
        rows.append({
            "variant": run.variant, "direction": run.direction, "metric": rec.metric,
            "before": r4(rec.before), "after": r4(rec.after),
            "constant_baseline": r4(rec.constant_baseline), "steps": rec.steps,
            "tokens": rec.tokens, "seconds": None if run.seconds is None else round(run.seconds, 1),
            "tokens_per_s": None if run.tokens_per_second() is None else round(run.tokens_per_second()),
            "trainable_params": run.params,
            **{f"after_{d}": r4(rec.directions_after.get(d)) if run.direction == "joint" else None
               for d in ("forward", "backward")},
        })
    if not rows:
        raise InputFileError("(none)", "no heldout.json files given")
    return pd.DataFrame(rows)


def downstream_table(paths: Iterable[str | Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(display table, long table of every run): one row per variant, one column per
    task, each cell ``mean±std (n) [scale]; paper X``; a task that could not run shows
    its status (e.g. ``no data: set tasks.ner.train``)."""
    long = read_task_runs(paths)
    if long.empty:
        raise InputFileError("(none)", "no downstream result files given")
    variants = list(dict.fromkeys(long["variant"]))
    tasks = task_order(long, only_seen=True)
    table = []
    for variant in variants:
        row = {"variant": variant, "paper_label": paper.PAPER_LABELS.get(variant, "")}
        for task in tasks:
            cell = score_cell(long, variant, task, mark=False)
            if cell is None:
                row[task] = "not run"
                continue
            sel = long[(long.variant == variant) & (long.task == task) & (long.status == "ok")]
            if not sel.empty:
                cell += " [demo]" if (sel.scale == "demo").any() else " [cpu]" if (sel.scale == "cpu").any() else ""
                ref = paper_cell(variant, task)
                if ref is not None:
                    cell += f"; paper {ref}"
            row[task] = cell
        table.append(row)
    return pd.DataFrame(table), long


def write_table(df: pd.DataFrame, md_path: str | Path, csv_path: str | Path | None = None,
                title: str | None = None, notes: Iterable[str] = ()) -> None:
    """A flat DataFrame as Markdown (+ CSV), written atomically."""
    from elmoc.data.atomic import atomic_file

    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join("" if pd.isna(v) else str(v) for v in r.tolist()) + " |")
    text = (f"# {title}\n\n" if title else "") + "\n".join(lines) + "\n"
    notes = list(notes)
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    with atomic_file(md_path) as f:
        f.write(text)
    if csv_path is not None:
        with atomic_file(csv_path) as f:
            df.to_csv(f, index=False)
