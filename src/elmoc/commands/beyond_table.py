"""`elmoc beyond-table`: the table beyond the paper (Transformer and masked-LM variants)."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_output

NAME = "beyond-table"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc beyond-table --heldout results/demo/lm/*/*/heldout.json --tasks results/demo/tasks/*/*/seed*.json '
    '--output-dir results/demo/tables'
)
HELP = "build the table beyond the paper (encoder x output layer) from result files"
DESCRIPTION = (
    "The Transformer and masked-LM variants by encoder x output layer, with the ELMo LSTM's rows for "
    "reference, into --output-dir as beyond.{md,csv,tex,html}, from heldout.json files (--heldout, with the "
    "spec.yaml beside their run folders), task metrics JSONs (--tasks) and the bench JSON (--bench); "
    "--presets-json names each variant's preset (a TRANS BASE / TRANS LARGE / GPT row is named from it). "
    "Prints the table in Markdown."
)


INPUTS = ('heldout', 'tasks', 'bench')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)
TABLES = ("beyond",)  # the tables written into --output-dir (tests check these are the files run writes)


def outputs(args: argparse.Namespace) -> dict:
    """What is written: each table's .md/.csv/.tex/.html in --output-dir, not the folder (the
    workflow's results/demo/tables also holds the input --bench, results/demo/tables/bench.json)."""
    from elmoc.tables.render import out_dir_outputs

    return out_dir_outputs(TABLES, args.output_dir)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heldout", nargs="*", default=[], help="results/demo/lm/*/*/heldout.json")
    parser.add_argument("--tasks", nargs="*", default=[], help="results/demo/tasks/*/*/seed*.json")
    parser.add_argument("--bench", help="bench.json of `elmoc bench` (an absent file: gaps)")
    parser.add_argument("--presets-json", metavar="JSON", help="{variant: preset name} of the config's variants "
                        "as a JSON object (default: none)")
    add_output(parser, DIR, "output folder, e.g. results/demo/tables", old=("--out-dir",))


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from elmoc.config_section import Section
    from elmoc.records import read_json
    from elmoc.tables.beyond import beyond_table
    from elmoc.tables.render import to_markdown, write
    from elmoc.tables.runs import read_lm_runs, read_task_runs

    presets = Section.parse(args.presets_json or "{}", "variant presets", flag="--presets-json")
    table = beyond_table(read_lm_runs(args.heldout), read_task_runs(args.tasks),
                         read_json(args.bench) if args.bench and Path(args.bench).exists() else None,
                         {variant: presets.get(variant, str) for variant in presets.data})
    write(table, args.output_dir)
    print(to_markdown(table))
    return 0
