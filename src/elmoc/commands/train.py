"""`elmoc train`: pretrain one direction of an LM, or a joint bi-LM, from a resolved spec."""
from __future__ import annotations

import argparse

from elmoc.commands._options import add_training_arguments

NAME = "train"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc train --spec results/demo/lm/elmo-c/spec.yaml --direction forward --output-dir '
    'results/demo/lm/elmo-c/forward --device auto'
)
HELP = "pretrain one direction (forward or backward) of an LM variant, or its joint bi-LM, from its spec"
DESCRIPTION = (
    "Train the LM described by a spec YAML (see `elmoc spec` and config/lm/) on the "
    "corpus shards it names, evaluating on the heldout file before and after. "
    "Writes a resumable checkpoint.pt every train.checkpoint_every steps and "
    "train_log.jsonl to --output-dir, and model.pt (the final LM, no optimizer state) "
    "and heldout.json at the very end. Resumes from checkpoint.pt there unless "
    "--no-resume, after checking it was made for the same spec, direction and "
    "vocabulary. On SIGTERM or SIGUSR1 it finishes the current step, saves "
    "checkpoint.pt and exits with status 75 (EX_TEMPFAIL): rerun the same command to "
    "resume; it also stops and saves by itself --stop-margin seconds before a SLURM job's "
    "end time. Only one trainer writes an output folder at a time (<output-dir>/.train.lock; "
    "a second one is refused with exit status 73). Every attempt's outcome is appended to "
    "<output-dir>/attempts.jsonl; when the last two crashed with the same error at the same "
    "checkpoint step, a new attempt is refused at once (delete that file after fixing the "
    "cause). Rank 0's log lines are also appended to <output-dir>/train.log. Under "
    "`elmoc with-gpus` the job's status is 75 when every process stopped and "
    "saved. For data parallelism launch it with torchrun (WORLD_SIZE > 1); "
    "train.batch_size stays the global batch. A spec with train.directions: joint "
    "(the softmax family, as bilm-tf trains ELMo) is one bidirectional model with a "
    "shared input and output layer, trained with --direction joint on forward and "
    "backward windows of the same corpus position; its loss is the mean of the two "
    "directions' mean losses, its token counts count both directions, and heldout.json "
    "gives the combined metric (perplexity: exp of the mean of the two mean NLLs) with "
    "each direction's under \"forward\" and \"backward\". A spec with train.objective: "
    "masked_lm is one masked LM (a bidirectional encoder predicting BERT-masked words, "
    "train.masking), trained with --direction masked; its heldout metric is taken over "
    "the masked positions of the heldout windows, masked with a fixed seed."
)


INPUTS = ('spec',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)
RESUMES = ("train",)  # the runs whose checkpoint.pt/model.pt it may resume or replace in --output-dir (cli)


def implicit_inputs(args: argparse.Namespace) -> dict:
    """The files the spec names (vocabulary, corpus, vectors table, tokenizer): inputs too."""
    from elmoc.commands._paths import spec_file_inputs

    return spec_file_inputs(args.spec, "--spec")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_training_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from elmoc.train.pretrain_run import run_training

    return run_training(args)
