"""``elmoc task-sentences``: the distinct tokenized sentences a task needs features for."""
from __future__ import annotations

from elmoc.commands._options import FILE, add_output

NAME = "task-sentences"
GROUP = "internals"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc task-sentences --task sst5 --config config/config.yaml --output results/tasks/sst5/sentences.txt'
HELP = "write every distinct tokenized sentence of a task (train/dev/test), one per line, for `elmoc extract`"
DESCRIPTION = (
    "Reads the task's train, dev and test data (paths from the task section of --config) and writes "
    "each distinct sentence whose contextual features the task needs, tokens joined by single spaces, "
    "one per line, in first-seen order. For SST with use_subtrees this includes every training phrase. "
    "`elmoc extract` turns this file into results/features/{variant}/{task}.hdf5."
)


INPUTS = ('config',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)

def add_arguments(parser) -> None:
    from elmoc.tasks.config import add_task_section_arguments

    add_task_section_arguments(parser, config_help="workflow config (uses tasks.<task>) or a single task section YAML")
    add_output(parser, FILE, "sentences file to write (e.g. results/tasks/sst5/sentences.txt)")


def run(args) -> int:
    import logging

    from elmoc.tasks.task_run import write_task_sentences

    count = write_task_sentences(args)
    logging.getLogger(__name__).info("%s: %d distinct sentences -> %s", args.task, count, args.output)
    return 0
