"""`elmoc results-page`: the page a run opens on (summary, tables, figures, configuration)."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "results-page"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = ("elmoc results-page --summary results/demo/summary.txt --tables results/demo/tables/table2.html "
           "--figures results/demo/figures/heldout_curves.png --captions workflow/report "
           "--config results/demo/report/config.yaml --run demo --runs-under results --output results/demo/index.html")
HELP = "write the results page: summary, tables, figures with captions and config in one HTML page"
DESCRIPTION = (
    "Reads the run's summary (--summary), its pretraining and downstream runs (--heldout, --tasks: the views of "
    "pretrain.md and downstream.md), its tables' HTML pages (--tables), its figures (--figures, PNG; "
    "each captioned by <stem>.rst in --captions) and its effective config (--config), and writes the standalone "
    "page --output (e.g. results/demo/index.html), the fragment --fragment that workflow/report/workflow.rst embeds as "
    "the landing page of `snakemake --report`, and --config-html, the config as a page the report shows. With --run "
    "and --runs-under, the other runs found in --runs-under (folders with a summary.txt) are compared with this one "
    "in a section after the summary."
)


INPUTS = ('summary', 'heldout', 'tasks', 'tables', 'figures', 'config', 'captions')  # args naming files read (cli refuses overlaps)
OUTPUTS = ('output', 'fragment', 'config_html')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--summary", required=True, help="results/<run>/summary.txt (elmoc summary --output)")
    parser.add_argument("--heldout", nargs="*", default=[], help="results/<run>/lm/*/*/heldout.json (pretrain.md's view)")
    parser.add_argument("--tasks", nargs="*", default=[], help="results/<run>/tasks/*/*/seed*.json (downstream.md's view)")
    parser.add_argument("--tables", nargs="*", default=[], help="the tables' HTML pages, in the order shown")
    parser.add_argument("--figures", nargs="*", default=[], help="PNG figures, in the order shown")
    parser.add_argument("--captions", help="folder of the figures' captions, <figure stem>.rst (e.g. workflow/report)")
    parser.add_argument("--config", required=True, help="the effective config YAML (elmoc config-dump)")
    parser.add_argument("--run", help="this run's name (config `run`), for the comparison with --runs-under")
    parser.add_argument("--runs-under", help="the folder of every run (results): its other runs are compared with this one")
    add_output(parser, FILE, "the standalone page to write (e.g. results/demo/index.html)", required=False)
    parser.add_argument("--fragment", help="the fragment for the report's landing page (results/<run>/report/landing.html)")
    parser.add_argument("--config-html", help="the config as an HTML page (results/<run>/report/config.html)")


def run(args: argparse.Namespace) -> int:
    from elmoc.errors import ConfigError
    from elmoc.tables.landing import write_results_page

    if not (args.output or args.fragment or args.config_html):
        raise ConfigError("give at least one of --output, --fragment, --config-html")
    if bool(args.run) != bool(args.runs_under):
        raise ConfigError("--run and --runs-under go together (this run's name and the folder of every run); give both")
    for path in write_results_page(args.summary, args.tables, args.figures, args.config, heldout=args.heldout,
                                   tasks=args.tasks, output=args.output,
                                   fragment=args.fragment, config_html=args.config_html, captions=args.captions,
                                   run=args.run, runs_under=args.runs_under):
        print(path)
    return 0
