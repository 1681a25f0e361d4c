"""`elmoc summary`: the demo's summary, computed from the run's own result files."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "summary"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc summary --heldout results/demo/lm/*/*/heldout.json --tasks results/demo/tasks/*/*/seed*.json'
HELP = "print params and training tokens/s per variant (ratios to ELMo-C), heldout metric, downstream vs baselines"
DESCRIPTION = (
    "Reads heldout.json (+ train_log.jsonl beside it) of every LM direction, the downstream metrics JSONs "
    "and the majority-class baselines of one run and prints the summary that `make demo` ends with."
)


INPUTS = ('heldout', 'tasks', 'majority')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heldout", nargs="*", default=[], help="results/demo/lm/*/*/heldout.json")
    parser.add_argument("--tasks", nargs="*", default=[], help="results/demo/tasks/*/*/seed*.json")
    parser.add_argument("--majority", nargs="*", default=[], help="results/demo/baselines/*/majority.json")
    add_output(parser, FILE, "also write the summary to this text file", required=False)


def run(args: argparse.Namespace) -> int:
    from elmoc.io.atomic import atomic_file
    from elmoc.tables.runs import read_lm_runs, read_task_runs
    from elmoc.tables.summary import summary_text

    text = summary_text(read_lm_runs(args.heldout), read_task_runs(args.tasks), read_task_runs(args.majority))
    if args.output:
        with atomic_file(args.output) as f:
            f.write(text)
    print(text, end="")
    return 0
