"""The flat views ``pretrain.md`` and ``downstream.md``: one row per LM run, one row per
variant with a column per task (and the long table of every run); :func:`pretrain_view` and
:func:`downstream_view` make them :class:`~elmoc.tables.render.Table` objects that
:func:`elmoc.tables.render.write_files` writes like Tables 2-5."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from elmoc.directions import DIRECTIONS, JOINT
from elmoc.errors import InputFileError
from elmoc.tables import paper
from elmoc.tables.cells import paper_cell, score_cell, task_order
from elmoc.tables.render import Table
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
            **{f"after_{d}": r4(rec.directions_after.get(d)) if run.direction == JOINT else None
               for d in DIRECTIONS},
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


PRETRAIN_NOTES = [
    "cosine: mean cosine between predicted and target vectors (higher is better); "
    "perplexity: full-softmax heldout perplexity (lower is better).",
    "constant_baseline: mean cosine of the best constant prediction on the same heldout "
    "tokens; a CONT model must beat it (tiny-corpus FastText tables make it close to 1).",
    "direction joint: a joint bi-LM's one run (train.directions: joint): its perplexity is exp of "
    "the mean of the two directions' mean NLLs, tokens both directions', parameters its shared "
    "input and output layer once; after_forward / after_backward: each direction's value."]

DOWNSTREAM_NOTES = [
    "Cells: our test score in %, mean±std over seeds (n runs), then the paper's Table 2/3 value.",
    "srl: AllenNLP's span F1 (BIO spans, V ignored; what the paper printed); srl:conll05-f1: the "
    "official CoNLL-2005 script's argument F1 of the same runs (C-X merged into X; no paper value).",
    "[demo] marks toy-scale data or models; [cpu] real data splits with CPU-sized models: "
    "neither is comparable with the paper."]


def frame_table(df: pd.DataFrame, name: str, title: str = "", notes: Iterable[str] = ()) -> Table:
    """A DataFrame as a flat :class:`~elmoc.tables.render.Table`: a ``#`` heading, no caption,
    every cell ``str(value)`` of its column's type (as pandas writes CSV), NaN/None an empty gap."""
    rows = [[None if pd.isna(v) else str(v) for v in row] for row in df.itertuples(index=False, name=None)]
    return Table(name, title, "", [str(c) for c in df.columns], rows, list(notes), md_heading="#", md_gap="")


def pretrain_view(paths: Iterable[str | Path]) -> Table:
    """``pretrain.md``: :func:`pretrain_table` with its title and notes."""
    return frame_table(pretrain_table(paths), "pretrain", "Pretraining: heldout metric per LM", PRETRAIN_NOTES)


def downstream_view(paths: Iterable[str | Path]) -> tuple[Table, Table]:
    """(``downstream.md``, every single run): :func:`downstream_table` with its title and notes."""
    df, long = downstream_table(paths)
    return (frame_table(df, "downstream", "Downstream tasks (Table 2/3 layout)", DOWNSTREAM_NOTES),
            frame_table(long, "runs"))
