"""`elmoc distill`: train a smaller student LM to reproduce a trained one (issue 36.1)."""
from __future__ import annotations

import argparse

NAME = "distill"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc distill --spec student.yaml --teacher results/demo/lm/elmo-c/forward/model.pt --direction forward '
    '--output-dir results/demo/distill/small/forward'
)
HELP = "train a smaller student LM (one direction) to reproduce a trained teacher's representations"
DESCRIPTION = (
    "Train the student LM that --spec describes (any preset: fewer or narrower LSTM layers, a smaller "
    "projection, a small Transformer) on the corpus its spec names, with the loss lm_weight x its own LM "
    "loss + each representation's squared distance (input view and every layer, through a learned "
    "projection where the widths differ) to the teacher's representation it reproduces: input view to "
    "input view, top layer to top layer, the layers between spread evenly (distill.layers overrides it). "
    "--teacher is the teacher's model.pt of the same direction (or its joint file); the student must use "
    "its vocabulary. Everything else is `elmoc train`: checkpoint.pt every train.checkpoint_every steps, "
    "resumed exactly by rerunning the same command, SIGTERM/SIGUSR1 saves and exits 75, and at the end "
    "model.pt (the student alone, an ordinary LM of its spec: `elmoc export`, `embed` and the tasks read "
    "it as any other) and heldout.json (the student's own heldout metric)."
)


INPUTS = ('spec', 'teacher')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)
RESUMES = ("distill",)  # a teacher's or another training run's folder is never resumed or replaced (cli)


def implicit_inputs(args: argparse.Namespace) -> dict:
    """The student spec's files, and the teacher's run (its checkpoint.pt, heldout.json, logs),
    vocabulary and spec files."""
    from elmoc.commands._paths import lm_file_inputs, spec_file_inputs

    return {**spec_file_inputs(args.spec, "--spec"), **lm_file_inputs(args.teacher, "--teacher")}



def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.commands._options import add_training_arguments
    from elmoc.config_section import add_section_argument

    add_training_arguments(parser)
    parser.add_argument("--teacher", required=True,
                        help="the teacher's model.pt for --direction (results/demo/lm/<variant>/<direction>/model.pt)")
    add_section_argument(parser, "distill.students.<name> (lm_weight, layer_weights, layers, init_from_teacher)")


def run(args: argparse.Namespace) -> int:
    from functools import partial
    from pathlib import Path

    from elmoc.config_section import Section
    from elmoc.errors import InputFileError
    from elmoc.train.distill import DistillationTrainer, DistillSettings
    from elmoc.train.pretrain_run import run_training
    from elmoc.params import check_student

    settings = DistillSettings.from_section(Section.parse(args.section_json or "{}", "distill"))
    if not Path(args.teacher).is_file():
        raise InputFileError(args.teacher, "not found; train the teacher first (`elmoc train`, or the workflow's "
                             "pretrain rule) and give its model.pt of this direction")
    return run_training(args, trainer=partial(DistillationTrainer, teacher=args.teacher, distill=settings),
                        preflight=partial(check_student, args.spec, args.teacher, args.direction))
