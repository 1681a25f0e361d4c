"""``elmoc predict``: run a saved task model (``elmoc task --save-model``) on new input."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_device, add_output

NAME = "predict"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc predict sentences.txt --task-model sst5-model --output predictions.jsonl'
HELP = "predict with a saved task model directory (elmoc task --save-model); write JSON lines"
DESCRIPTION = (
    "Loads the task model directory written by `elmoc task --save-model DIR` (its section, weights, "
    "label vocabularies, word table and the bi-LM in DIR/lm), computes the LM features of the input "
    "in process with that frozen bi-LM, and writes one JSON record per instance to --output, in input "
    "order: the tokens and the prediction, labels as strings (sst: label; ner: BIOUL tags; snli: label "
    "of the pair; srl: BIO tags of the predicate; coref: clusters of [start, end] token offsets). "
    "INPUT is one whitespace-tokenized sentence per line (--input-format sentences, the default of the "
    "single-sentence tasks sst and ner) or a file in the task's own format, read by its reader "
    "(--input-format task, the default of every other task: snli jsonl, CoNLL-2003, CoNLL-2012); gold "
    "labels in it are ignored. Words outside the saved word table get its unknown-word row. The output "
    "file appears only when complete."
)

INPUTS = ("input_file", "task_model")  # args naming files read; an output among them is refused (cli)
OUTPUTS = ("output",)
MAX_LINE_TOKENS = 1000  # a sentence longer than this is refused (--max-line-tokens)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input_file", help="sentences.txt (one tokenized sentence per line) or the task's own format")
    parser.add_argument("--task-model", required=True, help="task model directory (elmoc task --save-model)")
    add_output(parser, FILE, "JSON lines to write, one record per instance")
    parser.add_argument("--input-format", choices=("sentences", "task"), default=None,
                        help="sentences: one sentence per line; task: the task's own format (default: sentences "
                             "for single-sentence tasks, else task)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="instances per batch (default: the run's trainer.eval_batch_size)")
    parser.add_argument("--max-line-tokens", type=int, default=MAX_LINE_TOKENS, metavar="N",
                        help=f"refuse a sentence longer than N tokens (default {MAX_LINE_TOKENS}: a longer line is "
                             "a document or several sentences, and the task model's memory grows with its square)")
    add_device(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")


def run(args: argparse.Namespace) -> int:
    import json

    import torch

    from elmoc.devices import resolve_device
    from elmoc.errors import ConfigError
    from elmoc.io.atomic import atomic_file
    from elmoc.io.output_paths import sigterm_as_interrupt
    from elmoc.tasks.task_model import load_task_model, read_instances, saved_task

    if args.batch_size is not None and args.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    _, task = saved_task(args.task_model)
    if task.sentence_instance(["probe"]) is not None and args.input_format in (None, "sentences"):
        check_sentences_file(args.input_file, args.max_line_tokens)  # (other tasks refuse sentences)
    instances = read_instances(task, args.input_file, args.input_format)  # bad input: refused before the LM loads
    saved = load_task_model(args.task_model, resolve_device(args.device))
    with sigterm_as_interrupt():  # SIGTERM as Ctrl-C: the temporary is deleted, exit 143
        with atomic_file(args.output) as out:
            for record in saved.predict(instances, args.batch_size):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return 0



def check_sentences_file(path: str, max_tokens: int) -> None:
    """Refuse, in one line, a sentences file that is another format (a JSON object per line: SNLI's
    ``.jsonl``; CoNLL columns) or holds a line of more than ``max_tokens`` tokens, before any model
    loads: such a file would be labelled, fragment by fragment, with exit 0, or exhaust the memory."""
    import json

    from elmoc.errors import InputFileError

    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return  # read_instances names a missing file
    with f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if number <= 20 and text.startswith("{"):
                try:
                    record = json.loads(text)
                except ValueError:
                    record = None
                if isinstance(record, dict):
                    raise InputFileError(path, "is JSON lines (another task's file, e.g. SNLI's .jsonl), not one "
                                         "tokenized sentence per line; give the sentences, or --input-format task "
                                         "for a file in this task model's own format", number)
            if number <= 20 and (text.startswith("-DOCSTART-") or text.startswith("#begin document")):
                raise InputFileError(path, "is a CoNLL file (another task's format), not one tokenized sentence per "
                                     "line; give the sentences, or --input-format task for a file in this task "
                                     "model's own format", number)
            count = len(text.split())
            if count > max_tokens:
                raise InputFileError(path, f"has {count:,} tokens on one line, more than --max-line-tokens "
                                     f"{max_tokens:,} (one sentence per line: split the document into sentences, or "
                                     "raise --max-line-tokens if the machine has the memory)", number)
