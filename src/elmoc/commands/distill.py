"""`elmoc distill`: train a smaller student LM to reproduce a trained one (issue 36.1)."""
from __future__ import annotations

import argparse
import logging

log = logging.getLogger(__name__)

NAME = "distill"
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
    from elmoc.commands import train
    from elmoc.config_section import add_section_argument

    train.add_arguments(parser)
    parser.add_argument("--teacher", required=True,
                        help="the teacher's model.pt for --direction (results/lm/<variant>/<direction>/model.pt)")
    add_section_argument(parser, "distill.students.<name> (lm_weight, layer_weights, layers, init_from_teacher)")


def run(args: argparse.Namespace) -> int:
    from functools import partial
    from pathlib import Path

    from elmoc.commands import train
    from elmoc.config_section import Section
    from elmoc.errors import InputFileError
    from elmoc.train.distill import DistillationTrainer, DistillSettings

    settings = DistillSettings.from_section(Section.parse(args.section_json or "{}", "distill"))
    if not Path(args.teacher).is_file():
        raise InputFileError(args.teacher, "not found; train the teacher first (`elmoc train`, or the workflow's "
                             "pretrain rule) and give its model.pt of this direction")
    return train.run(args, trainer=partial(DistillationTrainer, teacher=args.teacher, distill=settings),
                     preflight=partial(check_student, args))


def check_student(args: argparse.Namespace, spec: dict, vocab) -> None:
    """Before the output folder exists: the teacher is an LM of --direction (or a joint bi-LM) and
    the student is no larger than it.  Distillation here compresses: a student whose encoder is
    of the teacher's type with more parameters is refused (to train a larger LM, use `elmoc
    train`); one of another type (a Transformer student of an LSTM teacher) may need more, and is
    warned about (docs/safety.md)."""
    from pathlib import Path

    import numpy as np

    from elmoc.errors import ConfigError
    from elmoc.model_file import direction_payload, load_checkpoint
    from elmoc.params import count_parameters

    if args.direction not in ("forward", "backward"):
        return  # the trainer says a student is trained one direction at a time
    teacher = direction_payload(load_checkpoint(args.teacher, mmap=True), args.direction, args.teacher)
    teacher_size = sum(v.numel() for k, v in teacher["model"].items() if k.startswith("encoder."))
    tables = {}  # each frozen table's width, from its header (the table itself is read by the trainer)
    for table in _vectors(spec):
        if str(table).endswith(".npy") and Path(table).is_file():
            tables[table] = int(np.load(table, mmap_mode="r").shape[-1])
    student_size = count_parameters(spec, len(vocab), table_dims=tables, ignore_files=True)["encoder"]
    kinds = (spec.get("encoder") or {}).get("type"), (teacher["spec"].get("encoder") or {}).get("type")
    if student_size > teacher_size and kinds[0] != kinds[1]:  # another architecture: it may have to be larger
        log.warning("%s: the student's %s encoder has %s parameters, more than the teacher's %s encoder (%s: %s): "
                    "the distilled LM will not be smaller", args.spec, kinds[0], f"{student_size:,}", kinds[1],
                    args.teacher, f"{teacher_size:,}")
    elif student_size > teacher_size:
        raise ConfigError(f"{args.spec}: the student's encoder has {student_size:,} parameters, more than the "
                          f"teacher's ({args.teacher}: {teacher_size:,}); distillation trains a smaller LM: give "
                          "the student fewer or narrower layers (to train a larger LM, use `elmoc train`)")


def _vectors(node) -> list[str]:
    """Every ``vectors`` file a spec names (its frozen tables)."""
    if isinstance(node, dict):
        own = [node["vectors"]] if isinstance(node.get("vectors"), str) else []
        return own + [v for value in node.values() for v in _vectors(value)]
    if isinstance(node, list):
        return [v for value in node for v in _vectors(value)]
    return []
