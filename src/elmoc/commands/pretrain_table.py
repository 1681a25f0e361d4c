"""`elmoc pretrain-table`: one row per trained LM direction, flat."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "pretrain-table"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc pretrain-table --inputs results/demo/lm/*/*/heldout.json --output results/demo/tables/pretrain.md'
HELP = "write the flat pretraining table (Markdown, optional CSV and loss curves) from heldout.json files"
DESCRIPTION = (
    "One row per trained direction (or joint / masked run) of the heldout.json files --inputs (with the "
    "train_log.jsonl and spec.yaml beside them): Markdown to --output, the same table as CSV to --csv, "
    "training-loss curves as PNG to --plot. Prints the table in Markdown."
)


INPUTS = ('inputs',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output', 'csv', 'plot')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inputs", nargs="+", required=True, help="results/demo/lm/*/*/heldout.json")
    add_output(parser, FILE, "the table in Markdown")
    parser.add_argument("--csv", help="also write the table as CSV here")
    parser.add_argument("--plot", help="also draw training-loss curves (PNG) here")


def run(args: argparse.Namespace) -> int:
    from elmoc.tables.flat import pretrain_view
    from elmoc.tables.render import to_markdown, write_files

    table = pretrain_view(args.inputs)
    write_files(table, md=args.output, csv=args.csv)
    if args.plot:
        from elmoc.tables.plot import learning_curves

        learning_curves(args.inputs, args.plot)
    print(to_markdown(table))
    return 0
