"""`elmoc majority-baseline`: the majority-class baseline of one task."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "majority-baseline"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc majority-baseline --task sst5 --config config/config.yaml --output '
    'results/demo/tasks/sst5/majority/seed1.json'
)
HELP = "score always predicting a task's most frequent training label; write the task metrics JSON"
DESCRIPTION = (
    "Reads the task's training and test data (its section from --section-json, what the workflow passes, "
    "or from --config) and writes a task metrics JSON record (variant 'majority') to --output; a task "
    "without single-label instances or without data gets a record whose status says why. Prints the record."
)


INPUTS = ('config',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.tasks.config import add_task_section_arguments

    add_task_section_arguments(parser, config_help="workflow config (uses tasks.<task>) or a single task section YAML")
    parser.add_argument("--scale", default="demo", choices=["demo", "cpu", "full"], help="the record's scale label")
    add_output(parser, FILE, "task metrics JSON to write")


def run(args: argparse.Namespace) -> int:
    import json

    from elmoc.records import write_task_record
    from elmoc.tables.summary import majority_baseline
    from elmoc.tasks.config import build_task, task_section_from_args

    section, _ = task_section_from_args(args)
    task, _ = build_task(section)
    record = majority_baseline(task, args.task, args.scale)
    write_task_record(args.output, record)
    print(json.dumps(record))
    return 0
