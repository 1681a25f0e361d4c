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

from elmoc.errors import InputFileError

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
        md_gap: how a gap prints in Markdown (empty in the flat views); paper_of: ``{column:
        the column of ours it is printed beside}`` (a paper's value): the HTML view greys it and
        drops it with its column of ours; html_lead: columns the HTML view puts right after the
        first one (Table 2: the scores before the training columns), in this order.
    """

    name: str
    title: str
    caption: str
    columns: list[str]
    rows: list[list[str | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    md_heading: str = "##"
    md_gap: str = GAP_MD
    paper_of: dict[str, str] = field(default_factory=dict)
    html_lead: list[str] = field(default_factory=list)

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


# The look of every HTML table (the standalone pages and the results page, elmoc.tables.landing).
HTML_STYLE = (
    ".elmoc-table{margin:0 0 1.5em}.elmoc-table h3{font:600 15px/1.3 sans-serif;margin:.2em 0}"
    ".elmoc-table .caption,.elmoc-table ul{font:12px/1.4 sans-serif;color:#444;max-width:75em;margin:.3em 0}"
    ".elmoc-table table{border-collapse:collapse;font:13px/1.35 sans-serif;margin:.4em 0}"
    ".elmoc-table th{background:#e8edf3;font-weight:600;position:sticky;top:0}"
    ".elmoc-table td,.elmoc-table th{border:1px solid #c9d1db;padding:3px 7px;text-align:right;white-space:nowrap}"
    ".elmoc-table td:first-child,.elmoc-table th:first-child{text-align:left}"
    ".elmoc-table tbody tr:nth-child(even){background:#f6f8fa}"
    ".elmoc-table .paper{color:#6b7280;font-style:italic}.elmoc-table .gap{color:#9ca3af}"
    ".elmoc-table .dropped{font-style:italic}"
)


def html_columns(table: Table) -> list[int]:
    """The column indices the HTML view shows, in order: the first column, ``html_lead``, the
    rest; without a column that has no value in any row (nothing of ours measured: a task the
    run did not do) nor a paper column (``paper_of``) beside a column so dropped."""
    def empty(i: int) -> bool:
        return all(row[i] is None for row in table.rows)

    index = {c: i for i, c in enumerate(table.columns)}
    dropped = {c for i, c in enumerate(table.columns) if empty(i)} if table.rows else set()
    dropped |= {c for c, ours in table.paper_of.items() if ours in dropped}
    lead = [c for c in table.html_lead if c in index]
    order = table.columns[:1] + lead + [c for c in table.columns[1:] if c not in lead]
    return [index[c] for c in order if c not in dropped or index[c] == 0]


def html_fragment(table: Table) -> str:
    """The table as one ``<section class="elmoc-table" id="elmoc-NAME">``: title, caption, the
    columns of :func:`html_columns` (paper columns greyed), the notes, and which columns were
    left out for having no value.  Styled by :data:`HTML_STYLE`."""
    from html import escape

    def cell(v: str | None, cls: str) -> str:
        if v is None:
            return f"<td class='gap{cls}'>{GAP_MD}</td>"
        return f"<td class='{cls.strip()}'>{escape(str(v))}</td>" if cls else f"<td>{escape(str(v))}</td>"

    shown = html_columns(table)
    classes = [" paper" if table.columns[i] in table.paper_of else "" for i in shown]
    head = "".join(f"<th class='{c.strip()}'>{escape(table.columns[i])}</th>" if c else f"<th>{escape(table.columns[i])}</th>"
                   for i, c in zip(shown, classes))
    body = "".join("<tr>" + "".join(cell(row[i], c) for i, c in zip(shown, classes)) + "</tr>" for row in table.rows)
    left = [c for i, c in enumerate(table.columns) if i not in shown]
    notes = [escape(n) for n in table.notes]
    if left:
        notes.append("<span class='dropped'>Not shown, no value of this run: " + escape(", ".join(left)) + "</span>")
    caption = f"<p class='caption'>{escape(table.caption)}</p>" if table.caption else ""
    items = "".join(f"<li>{n}</li>" for n in notes)
    return (f"<section class='elmoc-table' id='elmoc-{escape(table.name)}'><h3>{escape(table.title)}</h3>{caption}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            + (f"<ul>{items}</ul>" if items else "") + "</section>")


FRAGMENT_START, FRAGMENT_END = "<!-- elmoc-table -->", "<!-- /elmoc-table -->"


def to_html(table: Table) -> str:
    """A standalone HTML page of the table (what the Snakemake report shows); its
    :func:`html_fragment` between markers that :func:`fragment_of_page` finds."""
    from html import escape

    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{escape(table.title)}</title><style>body{{margin:12px}}{HTML_STYLE}</style></head><body>"
            f"{FRAGMENT_START}{html_fragment(table)}{FRAGMENT_END}</body></html>\n")


def fragment_of_page(page: str, path: str | Path) -> str:
    """The table section of a page :func:`to_html` wrote (``path``: the file, named in the error)."""
    start, end = page.find(FRAGMENT_START), page.find(FRAGMENT_END)
    if start < 0 or end < start:
        raise InputFileError(path, "not a table page written by elmoc (no table section); rebuild it with its "
                                   "table command")
    return page[start + len(FRAGMENT_START):end]


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
