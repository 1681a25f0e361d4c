"""`elmoc prune`: prune a trained LM round by round with fine-tuning, and its lottery ticket."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_device, add_output

from elmoc.directions import RUNS

NAME = "prune"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc prune --model results/demo/lm/elmo-c/forward/model.pt --direction forward --output-dir '
    'results/demo/prune/elmo-c/magnitude/forward'
)
HELP = "prune a trained LM (magnitude or whole units) with fine-tuning between rounds; optionally its lottery ticket"
DESCRIPTION = (
    "Prune the trained LM --model (one direction's model.pt, or a joint or masked LM's) in rounds, one per "
    "prune.levels entry, each followed by prune.finetune_steps steps of fine-tuning on the LM objective "
    "on the corpus its spec names (the training loop of `elmoc train`). prune.method magnitude: the "
    "smallest weights of the encoder's matrices go (levels: sparsities, layer-wise), masks kept applied "
    "while fine-tuning; structured: whole LSTM cells (a Transformer's feed-forward units) go (levels: "
    "fractions of the units), so the matrices shrink. Every round's folder under --output-dir "
    "(round1, round2, ...) is an ordinary training run whose model.pt `elmoc export` reads. With "
    "prune.ticket (magnitude), the rounds find the lottery ticket (Frankle & Carbin 2019): each round "
    "prunes the previous round's survivors, rewinds them to the weights the LM had at train.rewind_step "
    "(train it with train.rewind_step: 0) and retrains them to the end of the LM's schedule (roundN/), "
    "beside the same mask on a fresh initialisation (controlN/); ticket/ and control/ link to the last "
    "pair (prune.ticket_procedure: finetune_rounds_then_rewind_once, elmoc's former procedure, fine-tunes "
    "the rounds and rewinds once into ticket/ and control/). prune.json sums up parameters, nonzero weights and the heldout "
    "metric of each. A killed or stopped run (SIGTERM/SIGUSR1: exit 75) resumes where it was when rerun."
)

INPUTS = ("model",)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ("output_dir",)


def implicit_inputs(args: argparse.Namespace) -> dict:
    """The run --model belongs to, its vocabulary and its spec's files."""
    from elmoc.commands._paths import lm_file_inputs

    return lm_file_inputs(args.model, "--model")



def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.config_section import add_section_argument

    parser.add_argument("--model", required=True, help="the trained LM's model.pt (results/demo/lm/<variant>/<run>/)")
    parser.add_argument("--direction", choices=RUNS, required=True, help="the run --model is (as `elmoc train`)")
    add_output(parser, DIR, "where round1/ ... , ticket/, control/ and prune.json go")
    add_section_argument(parser, "prune")
    add_device(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from elmoc.attempts import OutputLock
    from elmoc.train.lm_data import lm_data
    from elmoc.config_section import Section
    from elmoc.errors import InputFileError
    from elmoc.model_file import load_checkpoint
    from elmoc.train.prune_loop import PruneSettings, prune
    from elmoc.train.settings import TrainSettings
    from elmoc.train.signals import EXIT_INTERRUPTED

    # its keys are checked by from_section: the shared ones and the method's options
    settings = PruneSettings.from_section(Section.parse(args.section_json or "{}", "prune"))
    if args.threads:
        torch.set_num_threads(args.threads)
    payload = load_checkpoint(args.model, mmap=True)
    if payload.get("direction") != args.direction:  # reversed text would be trained and labelled the other way
        raise InputFileError(args.model, f"is the {payload.get('direction')} run's LM, not {args.direction}: give "
                             f"--direction {payload.get('direction')}, or the {args.direction} run's model.pt")
    spec = payload["spec"]
    OutputLock(args.output_dir).acquire()  # held until this process exits
    vocab, vocab_path, make_batches, make_heldout, _ = lm_data(
        spec, args.model, args.direction, TrainSettings.from_config(spec.get("train", {})))
    result = prune(Path(args.model), Path(args.output_dir), settings, vocab, make_batches, make_heldout,
                   direction=args.direction, vocab_path=str(vocab_path), device=args.device)
    return EXIT_INTERRUPTED if result is not None else 0
