"""``elmoc compression-table``: an original model and its smaller versions measured the same way."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_output

NAME = "compression-table"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc compression-table --original results/demo/models/elmo-c --models-under results/demo/compressed/elmo-c '
    '--sentences results/demo/corpus/heldout.txt --work-dir results/demo/compression-work/elmo-c --output-dir '
    'results/demo/tables/compression'
)
HELP = "one table of a model and its smaller versions (float16/int8 copies, students, pruned, ticket): size, speed, fidelity, scores"
DESCRIPTION = (
    "Measures --original and every --model ROLE=DIR (roles: original's copies float16, bfloat16, int8; "
    "student[-NAME]; pruned-LEVEL; ticket; ticket-control) the same way: parameters and bytes stored, "
    "embedding tokens/s of all of them timed in the same rounds in this process (--rounds, order rotated, "
    "fastest pass of each), mean cosine to the original's features per layer on the first --num-sentences "
    "of --sentences, the heldout metric recorded by each model's training run (--heldout ROLE=heldout.json, "
    "one per direction; a float16/bfloat16/int8 copy shows the original's, marked) and, for each of "
    "--tasks, the task trained on each model's features with every --seeds (`elmoc task`; mean, sample sd, "
    "difference to the original). Writes NAME.md, .csv, .json and the figure NAME.png/.pdf (size and speed "
    "against the score) into --output-dir. Task features and runs are kept in --work-dir under each model's "
    "fingerprint: a rerun (after a stop, or with one more model) reuses them, and a stopped task run resumes "
    "from its checkpoint; the side-by-side timing is always measured afresh."
)

INPUTS = ('original', 'models_under', 'sentences', 'config', 'fasttext', 'vocab')  # files read; never an output (cli)
OUTPUTS = ('output_dir', 'work_dir')


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return key, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--original", required=True, help="the uncompressed trained model directory (elmoc export)")
    parser.add_argument("--model", type=_pair, action="append", default=[], metavar="ROLE=DIR",
                        help="a smaller model directory and its role (repeat)")
    parser.add_argument("--models-under", metavar="DIR", help="also every model directory DIR/ROLE/ (role = its name)")
    parser.add_argument("--sentences", required=True, help="sentences to time and compare on, one per line "
                        "(the heldout shard, results/demo/corpus/heldout.txt)")
    parser.add_argument("--num-sentences", type=int, default=200, help="the first N of them (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of every model (default 3)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (timing and tasks)")
    parser.add_argument("--heldout", type=_pair, action="append", default=[], metavar="ROLE=FILE",
                        help="heldout.json of the role's training run (repeat: one per direction, averaged)")
    parser.add_argument("--tasks", nargs="*", default=[], help="downstream tasks to score every model on")
    sections = parser.add_mutually_exclusive_group()
    sections.add_argument("--config", help="workflow config holding tasks.<task> for --tasks")
    sections.add_argument("--sections-json", help='{"<task>": section, ...} (what the workflow passes)')
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="task seeds (default 1)")
    parser.add_argument("--fasttext", help="static vectors for the tasks whose section sets with_fasttext "
                        "(as the workflow's task runs: tasks.vectors)")
    parser.add_argument("--vocab", help="vocabulary of a .npy --fasttext table")
    parser.add_argument("--scale", choices=["demo", "cpu", "full"], default="demo", help="label of the task runs")
    parser.add_argument("--work-dir", required=True, help="task features and runs, reused by a rerun")
    parser.add_argument("--finished-only", action="store_true",
                        help="train nothing: score each model with the task runs already finished in --work-dir "
                        "(the others are gaps; a cell names its seeds when they are not all of --seeds)")
    add_output(parser, DIR, "where NAME.md/.csv/.json/.png/.pdf go", old=("--out-dir",))
    parser.add_argument("--name", default="compression", help="file stem of the outputs (default compression)")


def run(args: argparse.Namespace) -> int:
    from elmoc.tables.compression_study import run_study

    return run_study(args)
