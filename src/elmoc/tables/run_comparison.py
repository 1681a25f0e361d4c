"""The runs of one checkout side by side (issue 52.6): the section of the results page that
compares this run with the other runs found beside it.

Each run of the workflow keeps its files under ``results/<run>/`` (:mod:`elmoc.layouts`). A run
is listed when its folder holds ``summary.txt`` (its workflow got as far as the summary); its
numbers are read from its own result files, as the results page reads this run's: every
pretraining run's final heldout metric (``lm/<variant>/<direction>/heldout.json``) and every
downstream score, mean ± std over seeds (``tasks/<task>/<variant>/seed<N>.json``). Rows are those
numbers, one column per run, this run first; a gap (—) is a number that run has not produced.
The other runs are read when the page is written (the page says when): a run finished later shows
on this page once this run's page is rebuilt, and a run's page never makes another run's outputs
out of date.
"""
from __future__ import annotations

import datetime as _dt
from html import escape
from pathlib import Path
from typing import Iterable

from elmoc.errors import ElmocError

SUMMARY = "summary.txt"
PAGE = "index.html"


def run_folders(runs_under: Path, run: str) -> list[Path]:
    """``runs_under/<run>`` first, then every other folder of ``runs_under`` holding a
    ``summary.txt``, by name."""
    others = sorted(p for p in runs_under.iterdir() if p.is_dir() and p.name != run and (p / SUMMARY).is_file()) \
        if runs_under.is_dir() else []
    return [runs_under / run, *others]


def run_numbers(heldout: Iterable[str | Path], tasks: Iterable[str | Path]) -> dict[str, str]:
    """``{row label: cell}`` of one run: ``heldout <metric>: <variant>`` (the final value; a
    variant trained as two directions shows ``forward / backward``) and ``<task>: <variant>``
    (test score in %, mean±std (n))."""
    from elmoc.tables.cells import score_cell
    from elmoc.tables.runs import read_lm_runs, read_task_runs

    out: dict[str, str] = {}
    by_variant: dict[str, dict[str, object]] = {}
    for lm in read_lm_runs(sorted(map(Path, heldout))):
        rec = lm.record
        by_variant.setdefault(f"heldout {rec.metric}: {lm.variant}", {})[lm.direction] = rec.after
    for label, values in by_variant.items():
        ordered = [values[d] for d in ("joint", "masked", "forward", "backward") if d in values]
        out[label] = " / ".join("—" if v is None else f"{float(v):.4f}" for v in ordered)
    long = read_task_runs(sorted(map(Path, tasks)))
    if not long.empty:
        for task in dict.fromkeys(long["task"]):
            for variant in dict.fromkeys(long[long.task == task]["variant"]):
                cell = score_cell(long, variant, task, mark=False)
                if cell is not None:
                    out[f"{task}: {variant}"] = cell
    return out


def folder_numbers(folder: Path) -> dict[str, str]:
    """:func:`run_numbers` of the run whose files are in ``folder`` (``results/<run>``)."""
    return run_numbers(folder.glob("lm/*/*/heldout.json"), folder.glob("tasks/*/*/seed*.json"))


def comparison_html(run: str, runs_under: str | Path, heldout: Iterable[str | Path], tasks: Iterable[str | Path],
                    link_from: Path | None = None) -> str:
    """The section (``<section id='elmoc-runs'>``) comparing run ``run`` (its numbers from
    ``heldout`` / ``tasks``, the files this page shows) with the other runs under ``runs_under``;
    "" when there is no other run. ``link_from``: the folder of a page that links each other run's
    name to its results page (relative links, only where that page exists)."""
    from elmoc.tables.landing import relative_url

    runs_under = Path(runs_under)
    others = run_folders(runs_under, run)[1:]
    if not others:
        return ""
    columns = {run: run_numbers(heldout, tasks)}
    problems = []
    for folder in others:
        try:
            columns[folder.name] = folder_numbers(folder)
        except ElmocError as e:  # a run being written or broken: named, not compared
            problems.append(f"{folder.name}: not compared ({e})")
    labels = list(dict.fromkeys(label for numbers in columns.values() for label in numbers))
    heads = []
    for name in columns:
        page = runs_under / name / PAGE
        text = escape(name) + (" (this run)" if name == run else "")
        if link_from is not None and name != run and page.is_file():
            text = f"<a href='{escape(relative_url(page, link_from))}'>{text}</a>"
        heads.append(f"<th>{text}</th>")
    rows = "".join(f"<tr><th scope='row'>{escape(label)}</th>"
                   + "".join(f"<td>{escape(numbers.get(label, '—'))}</td>" for numbers in columns.values())
                   + "</tr>" for label in labels)
    when = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    notes = "".join(f"<p class='files'>{escape(p)}</p>" for p in problems)
    return ("<section id='elmoc-runs'><h2>Runs</h2>"
            f"<p>This run beside the other runs found in <code>{escape(runs_under.as_posix())}/</code> when this page "
            f"was written ({escape(when)}): heldout metric of each LM (final; forward / backward for two direction "
            "runs) and downstream test scores in % (mean±std over seeds, n runs). — : not produced by that run. "
            "Rebuild this page to include runs finished since.</p>"
            f"<div class='elmoc-table'><table><thead><tr><th></th>{''.join(heads)}</tr></thead>"
            f"<tbody>{rows}</tbody></table></div>{notes}</section>")
