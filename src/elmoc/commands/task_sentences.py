"""``elmoc task-sentences``: the distinct tokenized sentences a task needs features for."""
from __future__ import annotations

from elmoc.commands._options import FILE, add_output

NAME = "task-sentences"
GROUP = "internals"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc task-sentences --task sst5 --config config/config.yaml --output results/demo/tasks/sst5/sentences.txt'
HELP = ("write every distinct tokenized sentence of a task (train/dev/test), one per line, for `elmoc extract`; "
        "or each split's, for `elmoc lm-finetune`")
DESCRIPTION = (
    "Reads the task's train, dev and test data (paths from the task section of --config) and writes "
    "each distinct sentence whose contextual features the task needs, tokens joined by single spaces, "
    "one per line, in first-seen order. For SST with use_subtrees this includes every training phrase. "
    "`elmoc extract` turns this file into results/demo/features/{variant}/{task}.hdf5. --split-dir DIR writes "
    "each split's distinct sentences to DIR/train.txt, DIR/dev.txt and DIR/test.txt (the same sentences, "
    "by split; a sentence in two splits is in both files): `elmoc lm-finetune --text DIR` reads the train "
    "and dev files only unless asked for the test split's (lm_finetune.text transductive). Give --output, "
    "--split-dir or both."
)


INPUTS = ('config',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output', 'split_dir')

def add_arguments(parser) -> None:
    from elmoc.tasks.config import add_task_section_arguments

    add_task_section_arguments(parser, config_help="workflow config (uses tasks.<task>) or a single task section YAML")
    add_output(parser, FILE, "sentences file to write (e.g. results/demo/tasks/sst5/sentences.txt)", required=False)
    parser.add_argument("--split-dir", default=None, metavar="DIR", help="also (or only) write each split's "
                        "sentences to DIR/{train,dev,test}.txt (e.g. results/demo/tasks/sst5/text)")


def run(args) -> int:
    import logging

    from elmoc.errors import ConfigError
    from elmoc.tasks.task_run import write_task_sentences

    if not args.output and not args.split_dir:
        raise ConfigError("nothing to write; give --output FILE (every split's sentences) and/or --split-dir DIR "
                          "(one file per split)")
    count = write_task_sentences(args)
    logging.getLogger(__name__).info("%s: %d distinct sentences -> %s", args.task, count,
                                      " and ".join(str(p) for p in (args.output, args.split_dir) if p))
    return 0
