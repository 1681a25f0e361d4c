"""`elmoc finetune-table`: feature-based and fine-tuned task runs side by side (issue 37)."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "finetune-table"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc finetune-table --inputs results/demo/finetune/*/*/*/seed*.json --output results/demo/tables/finetune.md'
HELP = "write the side-by-side table of features and fine-tuning (Markdown, CSV, LaTeX, HTML) from task metrics JSONs"
DESCRIPTION = (
    "Rows variant x mode (features, then each fine-tuning recipe, read from each metrics JSON's encoder and "
    "recipe), per task the test score (mean ± sd over seeds, n), the mean wall time of a run and the paper's "
    "feature-based value. Markdown to --output, the same table to --csv, --tex, --html. Prints the Markdown."
)


INPUTS = ('inputs',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output', 'csv', 'tex', 'html')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inputs", nargs="+", required=True,
                        help="results/demo/tasks/*/*/seed*.json and results/demo/finetune/*/*/*/seed*.json")
    add_output(parser, FILE, "the table in Markdown")
    parser.add_argument("--csv", help="also write the table as CSV here")
    parser.add_argument("--tex", help="also write the table as LaTeX (booktabs) here")
    parser.add_argument("--html", help="also write the table as HTML here")


def run(args: argparse.Namespace) -> int:
    from elmoc.tables.finetune import finetune_view
    from elmoc.tables.render import to_markdown, write_files

    table = finetune_view(args.inputs)
    write_files(table, md=args.output, csv=args.csv, tex=args.tex, html=args.html)
    print(to_markdown(table))
    return 0
