"""`elmoc downstream-table`: the downstream scores, mean ± std over seeds per task and variant."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "downstream-table"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc downstream-table --inputs results/demo/tasks/*/*/seed*.json --output results/demo/tables/downstream.md'
HELP = "write the flat downstream table (Markdown, optional CSVs) from task metrics JSON files"
DESCRIPTION = (
    "Mean ± std over seeds per task and variant of the task metrics JSONs --inputs: Markdown to --output, "
    "the same table as CSV to --csv, every single run as CSV to --runs-csv. Prints the table in Markdown."
)


INPUTS = ('inputs',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output', 'csv', 'runs_csv')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inputs", nargs="+", required=True, help="results/demo/tasks/*/*/seed*.json")
    add_output(parser, FILE, "the table in Markdown")
    parser.add_argument("--csv", help="also write the table as CSV here")
    parser.add_argument("--runs-csv", help="also write every single run as CSV here")


def run(args: argparse.Namespace) -> int:
    from elmoc.tables.flat import downstream_view
    from elmoc.tables.render import to_markdown, write_files

    table, runs = downstream_view(args.inputs)
    write_files(table, md=args.output, csv=args.csv)
    write_files(runs, csv=args.runs_csv)
    print(to_markdown(table))
    return 0
