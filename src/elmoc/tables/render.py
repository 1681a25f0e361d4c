"""One table, four formats: Markdown, CSV, LaTeX (booktabs) and HTML; the only writer of
every table elmoc prints (Tables 2-5, ``pretrain.md``, ``downstream.md``, the runs CSV).

A :class:`Table` holds text cells (``None`` = a gap: nothing measured) plus a
caption and notes; the layouts (:mod:`elmoc.tables.models`,
:mod:`elmoc.tables.speed`, :mod:`elmoc.tables.flat`) fill it, the writers
here only format.  A gap is written ``—`` in Markdown, an empty field in CSV and
``--`` in LaTeX, so a partial run gives a partial table, never an error.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Sequence
from pathlib import Path

GAP_MD = "—"
GAP_TEX = "--"

_TEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "±": r"$\pm$", "×": r"$\times$", "†": r"$^\dagger$", "—": "--", "≈": r"$\approx$", "∞": r"$\infty$",
}


@dataclass
class Table:
    """A rendered-format-agnostic table.

    Attributes:
        name: file stem (``table2``); title: heading; caption: the run's scale and
        what the cells mean; columns: header texts; rows: one list of cells per row,
        each a string or ``None`` (gap), ``len(row) == len(columns)``; notes: lines
        printed under the table (marks such as ``†`` are explained here); md_heading:
        the Markdown heading mark (``#`` for a flat view written as its own file);
        md_gap: how a gap prints in Markdown (empty in the flat views).
    """

    name: str
    title: str
    caption: str
    columns: list[str]
    rows: list[list[str | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    md_heading: str = "##"
    md_gap: str = GAP_MD

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.name}: row {row!r} has {len(row)} cells, header {len(self.columns)}")


def to_markdown(table: Table) -> str:
    """Heading, caption (when there is one), the pipe table, then the notes as a list."""
    def cell(v: str | None) -> str:
        return table.md_gap if v is None else str(v).replace("|", "\\|")

    lines = [f"{table.md_heading} {table.title}", ""] + ([table.caption, ""] if table.caption else [])
    lines += ["| " + " | ".join(cell(c) for c in table.columns) + " |",
              "|" + "|".join("---" for _ in table.columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.rows]
    if table.notes:
        lines += [""] + [f"- {n}" for n in table.notes]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """Header and rows only (no title, caption or notes); a gap is an empty field."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows([["" if v is None else v for v in row] for row in table.rows])
    return buf.getvalue()


def tex_escape(text: str) -> str:
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in str(text))


def to_latex(table: Table) -> str:
    """A ``table`` float with a booktabs ``tabular``; needs ``\\usepackage{booktabs}``."""
    def cell(v: str | None) -> str:
        return GAP_TEX if v is None else tex_escape(v)

    spec = "l" * len(table.columns)
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             rf"\caption{{{tex_escape(table.title)}. {tex_escape(table.caption)}}}",
             rf"\label{{tab:elmoc-{table.name}}}",
             rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(cell(c) for c in table.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(cell(v) for v in row) + r" \\" for row in table.rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if table.notes:
        lines += [r"\par\smallskip\footnotesize"] + [tex_escape(n) + r"\\" for n in table.notes[:-1]]
        lines.append(tex_escape(table.notes[-1]))
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_html(table: Table) -> str:
    """A standalone HTML page of the table (what the Snakemake report shows)."""
    from html import escape

    def cell(v: str | None) -> str:
        return GAP_MD if v is None else escape(str(v))

    head = "".join(f"<th>{cell(c)}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in table.rows)
    notes = "".join(f"<li>{escape(n)}</li>" for n in table.notes)
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><style>table{border-collapse:collapse;font:13px sans-serif}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left}</style>"
            f"</head><body><h3>{escape(table.title)}</h3><p>{escape(table.caption)}</p><table><tr>{head}</tr>{body}"
            f"</table><ul>{notes}</ul></body></html>\n")


WRITERS = {"md": to_markdown, "csv": to_csv, "tex": to_latex, "html": to_html}


def write_files(table: Table, **paths: str | Path | None) -> list[Path]:
    """``write_files(table, md=..., csv=...)``: each given format (a key of :data:`WRITERS`)
    to its path, written atomically; a ``None`` path is skipped.  Returns the paths written."""
    from elmoc.io.atomic import atomic_file

    written = []
    for suffix, path in paths.items():
        if path is None:
            continue
        with atomic_file(path) as f:
            f.write(WRITERS[suffix](table))
        written.append(Path(path))
    return written


def table_paths(name: str, out_dir: str | Path) -> dict[str, Path]:
    """``{suffix: out_dir/<name>.<suffix>}``: the files :func:`write` writes for the table ``name``."""
    return {suffix: Path(out_dir) / f"{name}.{suffix}" for suffix in WRITERS}


def write(table: Table, out_dir: str | Path) -> list[Path]:
    """``out_dir/<name>.{md,csv,tex,html}``, each written atomically; returns the paths."""
    return write_files(table, **table_paths(table.name, out_dir))


def out_dir_outputs(names: Sequence[str], out_dir: str | Path) -> dict[str, str]:
    """A table command's outputs for the CLI's output rule (``outputs(args)``): the files it
    writes into ``out_dir``, not the folder, which may hold the command's inputs
    (``results/tables/bench.json``) and is never replaced or emptied.  An ``out_dir`` that is an
    existing file is the output itself (so the rule refuses it when it is an input)."""
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        return {"--output-dir": str(out_dir)}
    return {f"--output-dir's {p.name}": str(p) for name in names for p in table_paths(name, out_dir).values()}
