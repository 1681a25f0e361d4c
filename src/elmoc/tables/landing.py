"""The results page: what a person sees first of a run (issue 52.3).

One HTML fragment holds the run's summary, its tables, its figures with their captions
under them, and its configuration shown as text; :func:`write_results_page` writes it

- as ``results/<run>/report/landing.html``, which ``workflow/report/workflow.rst`` embeds, so
  that the landing page of ``snakemake --report results/<run>/report.html`` opens on the results
  (its style widens Snakemake's description column and puts the job graph below it);
- as the standalone page ``results/<run>/index.html`` (the same fragment, plus links to the
  tables' Markdown, CSV and LaTeX files and to Snakemake's report beside it);
- and the configuration as ``results/<run>/report/config.html``, a page the report shows (a
  YAML file it would only offer as a download).

Everything is read from files the run wrote: ``summary.txt``, the pretraining and downstream
runs (the flat views of ``pretrain.md`` and ``downstream.md``), the tables' HTML pages
(:func:`elmoc.tables.render.fragment_of_page`), the figures' PNGs (embedded as data URIs, so
the page stands alone) and the captions of ``workflow/report/<figure>.rst``. When other runs of
the checkout sit beside this one (``results/<other run>/``), a section after the summary puts
their numbers beside this run's (:mod:`elmoc.tables.run_comparison`).
"""
from __future__ import annotations

import base64
from html import escape
from pathlib import Path
from typing import Iterable

from elmoc.errors import InputFileError
from elmoc.tables.render import HTML_STYLE, fragment_of_page

# The page's own look, and three rules that apply only inside Snakemake's report (its landing
# view puts the description in a narrow column beside the job graph, vertically centred): the
# description takes the whole width, the graph goes below it, the content starts at the top.
PAGE_STYLE = (
    "#elmoc-landing{font:14px/1.45 sans-serif;color:#111;max-width:100%}#elmoc-landing .elmoc-table{overflow-x:auto}"
    "#elmoc-landing h1{font:600 20px/1.3 sans-serif;margin:0 0 .3em}"
    "#elmoc-landing h2{font:600 17px/1.3 sans-serif;margin:1.2em 0 .4em;border-bottom:1px solid #d0d7de}"
    "#elmoc-landing nav{font-size:13px;margin:.2em 0 .8em}#elmoc-landing nav a{margin-right:.8em}"
    "#elmoc-landing pre{font:12px/1.4 monospace;background:#f6f8fa;border:1px solid #d0d7de;padding:8px;"
    "white-space:pre-wrap;margin:.3em 0;max-width:none;color:#111}"
    "#elmoc-landing figure{margin:0 0 1.5em}#elmoc-landing figure img{max-width:100%;height:auto;"
    "border:1px solid #e5e7eb}"
    "#elmoc-landing figcaption{font:12px/1.45 sans-serif;color:#333;max-width:75em;margin-top:.3em}"
    "#elmoc-landing figcaption p{margin:.2em 0}#elmoc-landing .literal{font-family:monospace}#elmoc-landing .files{font-size:12px;color:#444}"
    "#elmoc-landing table{margin:.4em 0}#elmoc-landing details summary{cursor:pointer;font-weight:600}"
    "div.flex:has(> div > div.prose #elmoc-landing){flex-direction:column;min-width:0}"
    "div.flex:has(> div > div.prose #elmoc-landing)>div{width:100%;min-width:0}"
    "div.prose:has(#elmoc-landing){max-width:none}"
    "div.overflow-auto:has(#elmoc-landing){align-items:flex-start;justify-content:flex-start}"
)


def caption_html(rst: str) -> str:
    """A caption file's reStructuredText as an HTML fragment (docutils, as Snakemake's report)."""
    from docutils.core import publish_parts
    from docutils.writers.html5_polyglot import Writer

    return publish_parts(rst, writer=Writer(), settings_overrides={"report_level": 5})["body"]


def _png_data_uri(path: Path) -> str:
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG"):
        raise InputFileError(path, "not a PNG image; rebuild it with `elmoc figures` (or its table command)")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputFileError(path, f"no such file ({what}); run the workflow's rule that writes it first") from None
    except UnicodeDecodeError as e:
        raise InputFileError(path, f"not UTF-8 text ({what}): {e.reason}") from None


def figure_html(png: Path, captions: Path | None) -> str:
    """One figure with its caption under it (``captions/<stem>.rst``; none: its file name)."""
    rst = captions / f"{png.stem}.rst" if captions is not None else None
    caption = caption_html(_read_text(rst, "a figure caption")) if rst is not None and rst.exists() else ""
    title = escape(png.stem.replace("_", " "))
    return (f"<figure id='elmoc-fig-{escape(png.stem)}'><img src='{_png_data_uri(png)}' alt='{title}'>"
            f"<figcaption><strong>{title}.</strong> {caption}</figcaption></figure>")


def table_sections(pages: Iterable[Path], heldout: Iterable[Path] = (), tasks: Iterable[Path] = (),
                   views_after: int = 2) -> list[tuple]:
    """``(name, HTML section, page or None)`` per table: each table page as written, with the flat
    views of the pretraining runs (``heldout``: pretrain.md's table, each cosine beside its
    constant-prediction baseline) and of the downstream runs (``tasks``: downstream.md's) after
    the first ``views_after`` pages (the workflow's Tables 2 and 3)."""
    from elmoc.tables.flat import downstream_view, pretrain_view
    from elmoc.tables.render import html_fragment

    heldout, tasks = list(heldout), list(tasks)
    views = []
    if heldout:
        views.append(("pretrain", html_fragment(pretrain_view(heldout)), None))
    if tasks:
        views.append(("downstream", html_fragment(downstream_view(tasks)[0]), None))
    out = [(page.stem, fragment_of_page(_read_text(page, "a table page"), page), page) for page in map(Path, pages)]
    return out[:views_after] + views + out[views_after:]


def landing_fragment(summary: Path, tables: list[tuple], figures: Iterable[Path], config: Path,
                     captions: Path | None = None, link_from: Path | None = None, runs: str = "") -> str:
    """The fragment: summary, the other runs beside this one (``runs``: the section of
    :func:`elmoc.tables.run_comparison.comparison_html`, "" for none), every table
    (:func:`table_sections`), every figure with its caption, the configuration.  ``link_from``: the
    folder of a page that links, under each table page, to its ``.md``/``.csv``/``.tex`` beside it
    (relative links; the report's copy has none, as the report may travel alone)."""
    figures = [Path(f) for f in figures]
    toc = ["<a href='#elmoc-summary'>Summary</a>"] + (["<a href='#elmoc-runs'>Runs</a>"] if runs else [])
    sections = []
    for name, fragment, page in tables:
        toc.append(f"<a href='#elmoc-{escape(name)}'>{escape(name)}</a>")
        if link_from is not None and page is not None:
            links = " · ".join(f"<a href='{escape(relative_url(page.with_suffix(s), link_from))}'>{s[1:]}</a>"
                               for s in (".md", ".csv", ".tex") if page.with_suffix(s).exists())
            fragment += f"<p class='files'>Files: {links}</p>" if links else ""
        sections.append(fragment)
    if figures:
        toc.append("<a href='#elmoc-figures'>Figures</a>")
    toc.append("<a href='#elmoc-config'>Configuration</a>")
    summary_text = _read_text(summary, "the run's summary")
    figures_html = "".join(figure_html(f, captions) for f in figures)
    return (f"<div id='elmoc-landing'><style>{HTML_STYLE}{PAGE_STYLE}</style>"
            "<h1>elmoc: the results of this run</h1>"
            f"<nav>{''.join(toc)}</nav>"
            f"<section id='elmoc-summary'><h2>Summary</h2><pre>{escape(summary_text)}</pre></section>{runs}"
            f"<h2>Tables</h2>{''.join(sections)}"
            + (f"<h2 id='elmoc-figures'>Figures</h2>{figures_html}" if figures else "")
            + "<section id='elmoc-config'><h2>Configuration</h2><details><summary>The effective configuration of "
            "this run (config files + --config overrides)</summary>"
            f"<pre>{escape(_read_text(config, 'the effective config'))}</pre></details></section></div>")


def relative_url(target: Path, folder: Path) -> str:
    """``target`` as a relative URL from a page in ``folder``."""
    import os
    from urllib.parse import quote

    return quote(Path(os.path.relpath(target.resolve(), folder.resolve())).as_posix())


def config_page(config: Path) -> str:
    """The configuration as a page of its own (Snakemake's report shows HTML, downloads YAML)."""
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Configuration</title></head>"
            "<body><pre style='font:12px/1.4 monospace;white-space:pre-wrap'>"
            f"{escape(_read_text(config, 'the effective config'))}</pre></body></html>\n")


def standalone_page(fragment: str, report: str = "report.html") -> str:
    """The fragment as a page of its own, with a link to Snakemake's report beside it (the page is
    ``results/<run>/index.html``, the report ``results/<run>/report.html``)."""
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width'><title>elmoc: results</title></head>"
            "<body style='margin:16px'>"
            f"<p style='font:13px sans-serif;margin:0 0 8px'>Every job, rule and run time: Snakemake's report "
            f"<a href='{escape(report)}'>{escape(report)}</a> (<code>snakemake --report results/&lt;run&gt;/report.html</code>)."
            f"</p>{fragment}</body></html>\n")


def write_results_page(summary: str | Path, tables: Iterable[str | Path], figures: Iterable[str | Path],
                       config: str | Path, *, heldout: Iterable[str | Path] = (), tasks: Iterable[str | Path] = (),
                       output: str | Path | None = None, fragment: str | Path | None = None,
                       config_html: str | Path | None = None, captions: str | Path | None = None,
                       run: str | None = None, runs_under: str | Path | None = None) -> list[Path]:
    """Write the given outputs (module docstring) atomically; returns their paths.  ``tables``:
    the table pages; ``heldout`` / ``tasks``: the runs of the pretraining and downstream views;
    ``run`` and ``runs_under``: this run's name and the folder of every run (``results``), whose
    other runs the page compares with this one (:mod:`elmoc.tables.run_comparison`)."""
    from elmoc.io.atomic import atomic_file
    from elmoc.tables.run_comparison import comparison_html

    heldout, tasks = list(heldout), list(tasks)

    def runs(link_from: Path | None) -> str:
        return comparison_html(run, runs_under, heldout, tasks, link_from) if run and runs_under is not None else ""

    sections = table_sections(tables, heldout, tasks)
    figures = [Path(f) for f in figures]
    captions = Path(captions) if captions is not None else None
    texts = {}
    if fragment is not None:
        texts[Path(fragment)] = landing_fragment(Path(summary), sections, figures, Path(config), captions,
                                                 runs=runs(None)) + "\n"
    if output is not None:
        linked = landing_fragment(Path(summary), sections, figures, Path(config), captions,
                                  link_from=Path(output).parent, runs=runs(Path(output).parent))
        texts[Path(output)] = standalone_page(linked)
    if config_html is not None:
        texts[Path(config_html)] = config_page(Path(config))
    for path, text in texts.items():
        with atomic_file(path) as f:
            f.write(text)
    return list(texts)
