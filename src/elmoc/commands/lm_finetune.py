"""`elmoc lm-finetune`: ULMFiT's LM fine-tuning of a trained variant on a task's text, exported."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_device, add_output

NAME = "lm-finetune"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc lm-finetune --lm-dir results/demo/lm/elmo-c --text results/demo/tasks/sst5/text --output-dir '
    'results/demo/lm_finetune/elmo-c/sst5/model'
)
HELP = "fine-tune a trained LM on a task's own text with its own objective (ULMFiT), as a model directory"
DESCRIPTION = (
    "ULMFiT's intermediate step: every training run of the variant in --lm-dir (results/demo/lm/VARIANT: forward "
    "and backward, or the one joint or masked LM) continues from its model.pt on the task's text with the "
    "LM's own output layer and loss, through the training loop of `elmoc train`, for lm_finetune.epochs "
    "epochs. --text is the task's split folder (results/demo/tasks/TASK/text: train.txt, dev.txt, test.txt, from "
    "`elmoc task-sentences --split-dir`): its train and dev sentences by default (lm_finetune.text "
    "train_dev), test's too with lm_finetune.text transductive (the model.pt's lm_finetuned section says "
    "which); a sentences file is read whole (its splits unknown: a warning). The optimizer "
    "(lm_finetune.schedule): slanted (default; ULMFiT section 3.2): Adam with discriminative rates "
    "(lm_finetune.lr 0.004 at the output layer, divided by decay 2.6 per layer down) on the slanted "
    "triangular schedule (cut_frac 0.1, ratio 32) at batch_size 64 rows; pretraining: the former stage "
    "(a fresh optimizer of the LM's own spec, warm-up restarting, or Adam at lm_finetune.lr; the "
    "pretraining batch). The text's last 10% of sentences is the heldout text (each run's heldout.json: "
    "before and after). The runs are then exported as one model directory at --output-dir (as `elmoc export` writes "
    "it; usable as `elmoc task --lm`). Work folder: --output-dir's parent (text/, and one run folder per run "
    "with checkpoint.pt, model.pt, heldout.json, train_log.jsonl). A killed or stopped run (SIGTERM/SIGUSR1: "
    "exit 75) resumes where it was when rerun; a finished run is reused."
)

INPUTS = ("lm_dir", "text")  # args naming files read; an output among them is refused (cli)
OUTPUTS = ("output_dir",)
MANIFEST_OWNERS = ("export",)  # --output-dir is a model directory as `elmoc export` writes it


def implicit_outputs(args: argparse.Namespace) -> dict:
    """The work folder (--output-dir's parent): text/ and one run folder per run are written there."""
    from pathlib import Path

    return {"--output-dir's parent (the work folder)": str(Path(args.output_dir).absolute().parent)}


def implicit_inputs(args: argparse.Namespace) -> dict:
    """The variant's spec.yaml, each run's model.pt and what it names (vocabulary, corpus, vectors)."""
    from pathlib import Path

    from elmoc.commands._paths import lm_file_inputs, spec_file_inputs

    lm_dir = Path(args.lm_dir)
    found = {"--lm-dir's spec.yaml": str(lm_dir / "spec.yaml"), **spec_file_inputs(lm_dir / "spec.yaml", "--lm-dir")}
    for model in sorted(lm_dir.glob("*/model.pt")):
        found[f"--lm-dir's {model.parent.name}/model.pt"] = str(model)
        found.update(lm_file_inputs(model, f"--lm-dir's {model.parent.name}/model.pt"))
    return found



def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.config_section import add_section_argument

    parser.add_argument("--lm-dir", required=True, help="the trained variant's folder (results/demo/lm/VARIANT)")
    parser.add_argument("--text", required=True, help="the task's split folder (results/demo/tasks/TASK/text, from "
                        "`elmoc task-sentences --split-dir`), or a sentences file read whole")
    add_output(parser, DIR, "the model directory to write (results/demo/lm_finetune/VARIANT/TASK/model); its parent "
                             "is the work folder", old=("--output",))
    parser.add_argument("--epochs", type=int, default=None, help="epochs over the text (default 1; the workflow "
                        "passes lm_finetune.epochs in --section-json instead)")
    add_section_argument(parser, "lm_finetune")
    add_device(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from elmoc.attempts import OutputLock
    from elmoc.train.lm_data import lm_data
    from elmoc.config_section import Section, refuse_with_section
    from elmoc.directions import BACKWARD, FORWARD, single_run
    from elmoc.io.output_paths import check_output_directory
    from elmoc.pretrained.writer import export_model
    from elmoc.train.lm_finetune import LMFineTuneSettings, finetune, run_files
    from elmoc.train.signals import EXIT_INTERRUPTED

    refuse_with_section(args, {"--epochs": args.epochs})
    data = {} if args.epochs is None else {"epochs": args.epochs}
    section = Section.parse(args.section_json, "lm_finetune") if args.section_json is not None else \
        Section(data, "lm_finetune")
    settings = LMFineTuneSettings.from_section(section)
    output = Path(args.output_dir)
    sources = run_files(args.lm_dir)
    check_output_directory(output, "export", {"--lm-dir": list(sources.values()), "--text": args.text})
    if args.threads:
        torch.set_num_threads(args.threads)
    lock = OutputLock(output.parent).acquire()  # the work folder: one writer at a time
    try:
        done = finetune(args.lm_dir, args.text, output.parent, settings, lm_data, device=args.device)
        if done.interrupted:
            return EXIT_INTERRUPTED
        single = single_run(tuple(done.models))
        files = dict.fromkeys((FORWARD, BACKWARD), done.models[single]) if single else done.models
        export_model(files[FORWARD], files.get(BACKWARD), output,
                     command=f"elmoc lm-finetune --lm-dir {args.lm_dir} --text {args.text} --output-dir {args.output_dir}")
    finally:
        lock.release()
    return 0
