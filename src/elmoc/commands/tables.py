"""`elmoc tables KIND ...`: the table commands by kind (one command per kind is the usual way)."""
from __future__ import annotations

import argparse

NAME = "tables"
GROUP = "internals"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc tables pretrain --inputs results/demo/lm/elmo-c/forward/heldout.json --output pretrain.md'
HELP = ("run paper-tables, beyond-table, figures, pretrain-table, downstream-table, majority-baseline or "
        "config-dump by kind")
DESCRIPTION = (
    "`elmoc tables KIND ARGS` runs the command of KIND with ARGS (see `elmoc <command> --help`): paper = "
    "paper-tables, beyond = beyond-table, figures = figures, pretrain = pretrain-table, downstream = "
    "downstream-table, majority = majority-baseline, config = config-dump. Also understood: --config-json "
    "(majority, config: = --section-json), --section-json and --config-json of beyond (= --presets-json)."
)

# kind -> the module of its command, and the old flag names it understood -> the command's
KINDS = {"paper": "paper_tables", "beyond": "beyond_table", "figures": "figures", "pretrain": "pretrain_table",
         "downstream": "downstream_table", "majority": "majority_baseline", "config": "config_dump"}
RENAMED = {"beyond": {"--section-json": "--presets-json", "--config-json": "--presets-json"},
           "majority": {"--config-json": "--section-json"}, "config": {"--config-json": "--section-json"}}

INPUTS = ()  # the kind's command declares its own, refused in run
OUTPUTS = ()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=list(KINDS), help="what to build")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the arguments of the kind's command")


def run(args: argparse.Namespace) -> int:
    import importlib

    from elmoc.io.output_paths import refuse_outputs_among_inputs

    command = importlib.import_module(f"elmoc.commands.{KINDS[args.kind]}")
    parser = argparse.ArgumentParser(prog=f"elmoc tables {args.kind}", description=command.DESCRIPTION)
    command.add_arguments(parser)
    renamed = RENAMED.get(args.kind, {})
    argv = []
    for arg in args.arguments:
        flag, equals, value = arg.partition("=")
        argv.append(renamed.get(flag, flag) + equals + value if flag.startswith("--") else arg)
    sub = parser.parse_args(argv)
    paths = {kind: {"--" + dest.replace("_", "-"): getattr(sub, dest) for dest in getattr(command, kind)}
             for kind in ("INPUTS", "OUTPUTS")}
    refuse_outputs_among_inputs(f"tables {args.kind}", paths["OUTPUTS"], paths["INPUTS"])
    return command.run(sub)
