"""`elmoc paper-tables`: the paper's Tables 2-5 with our numbers beside the paper's."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_output

NAME = "paper-tables"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc paper-tables --heldout results/demo/lm/*/*/heldout.json --tasks results/demo/tasks/*/*/seed*.json '
    '--output-dir results/demo/tables'
)
HELP = "build the paper's Tables 2-5 (Markdown, CSV, LaTeX, HTML) from result files"
DESCRIPTION = (
    "Tables 2, 3, 4 and 5 into --output-dir (table2, table3, table4_speed, table5_speed; .md .csv .tex .html), "
    "ours beside the paper's, from heldout.json files (--heldout), task metrics JSONs (--tasks), majority "
    "baselines (--majority) and the bench JSON (--bench); whatever is missing is a gap. Prints each table "
    "in Markdown."
)


INPUTS = ('heldout', 'tasks', 'majority', 'bench')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)
TABLES = ("table2", "table3", "table4_speed", "table5_speed")  # the tables written into --output-dir (tests check these are the files run writes)


def outputs(args: argparse.Namespace) -> dict:
    """What is written: each table's .md/.csv/.tex/.html in --output-dir, not the folder (the
    workflow's results/demo/tables also holds the input --bench, results/demo/tables/bench.json)."""
    from elmoc.tables.render import out_dir_outputs

    return out_dir_outputs(TABLES, args.output_dir)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heldout", nargs="*", default=[], help="results/demo/lm/*/*/heldout.json")
    parser.add_argument("--tasks", nargs="*", default=[], help="results/demo/tasks/*/*/seed*.json")
    parser.add_argument("--majority", nargs="*", default=[], help="results/demo/baselines/*/majority.json")
    parser.add_argument("--bench", help="bench.json of `elmoc bench` (an absent file: gaps)")
    add_output(parser, DIR, "output folder, e.g. results/demo/tables", old=("--out-dir",))


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from elmoc.records import read_json
    from elmoc.tables.models import table2, table3
    from elmoc.tables.render import to_markdown, write
    from elmoc.tables.runs import read_lm_runs, read_task_runs
    from elmoc.tables.speed import table4, table5

    lm_runs, task_runs = read_lm_runs(args.heldout), read_task_runs(args.tasks)
    bench = read_json(args.bench) if args.bench and Path(args.bench).exists() else None
    for table in (table2(lm_runs, task_runs, read_task_runs(args.majority)), table3(lm_runs, task_runs),
                  table4(bench), table5(bench)):
        write(table, args.output_dir)
        print(to_markdown(table))
    return 0
