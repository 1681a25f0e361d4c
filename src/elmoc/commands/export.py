"""`elmoc export`: a trained bi-LM (or the released bilm-tf ELMo) as a self-contained directory."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_output

from elmoc.directions import DIRECTIONS

NAME = "export"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc export --variant elmo-c --results results/demo --output-dir results/demo/models/elmo-c'
HELP = "write a self-contained model directory (weights, vocabulary, tables, model card)"
DESCRIPTION = (
    "Collect both directions of a trained variant (RESULTS/lm/VARIANT/{forward,backward}/model.pt; "
    "a joint bi-LM's joint/model.pt; a masked LM's masked/model.pt, one bidirectional stack; a "
    "one-direction LM's forward/model.pt alone, train.directions: forward), "
    "the vocabulary, the frozen input tables and, for FastText inputs, fastText's n-gram buckets "
    "(so words outside the vocabulary get their vector without the .bin) into DIR, with a model "
    "card README.md. Load DIR with elmoc.Elmo.from_pretrained(DIR) or `elmoc embed --model DIR`. "
    "With --bilm-tf-options/--bilm-tf-weights the released ELMo is converted instead; with "
    "--format checkpoints it becomes OUTPUT_DIR/{forward,backward}/model.pt for the workflow. "
    "With --to bilm-tf a trained char-CNN ELMo-LSTM bi-LM (a retrained ELMo or a variant built the same way) "
    "is written as bilm-tf's options.json + weights.hdf5 instead, which AllenNLP's Elmo and bilm-tf load; "
    "models with another input (ELMo-C's FastText) have no such format and are refused."
)


INPUTS = ('forward', 'backward', 'fasttext_model', 'char_cnn_model', 'bilm_tf_options', 'bilm_tf_weights', 'vocab', 'spec')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)


def outputs(args: argparse.Namespace) -> dict:
    """What is written: the folder --output-dir, replaced whole; with --format checkpoints only the
    files {direction}/model.pt and heldout.json in it (the workflow's results/<run>/lm/elmo, beside its
    spec.yaml, which is an input)."""
    from pathlib import Path

    if args.format != "checkpoints":
        return {"--output-dir": args.output_dir}
    return {f"--output-dir's {run}/{name}": str(Path(args.output_dir) / run / name)
            for run in ([args.direction] if args.direction else DIRECTIONS) for name in ("model.pt", "heldout.json")}


def implicit_inputs(args: argparse.Namespace) -> dict:
    """The variant's run files (--variant) and what each LM file names (vocabulary, vectors, corpus)."""
    from pathlib import Path

    from elmoc.commands._paths import lm_file_inputs

    files = {"--forward": args.forward, "--backward": args.backward}
    if args.variant:
        for run in sorted((Path(args.results) / "lm" / args.variant).glob("*/*.pt")):
            files[f"--variant's {run.parent.name}/{run.name}"] = str(run)
    found = {label: path for label, path in files.items() if path and label.startswith("--variant")}
    for label, path in files.items():
        found.update(lm_file_inputs(path, label))
    return found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_output(parser, DIR, "directory to write: absent, empty or an earlier output of this command (replaced atomically)", old=("--output",))
    parser.add_argument("--variant", help="trained variant under --results (RESULTS/lm/VARIANT)")
    parser.add_argument("--results", default="results", help="the folder holding lm/VARIANT: a workflow run's, results/<run> "
                        "(e.g. results/demo; default results)")
    parser.add_argument("--forward", help="forward model.pt (instead of --variant)")
    parser.add_argument("--backward", help="backward model.pt (instead of --variant; none for a one-direction LM)")
    parser.add_argument("--fasttext-model", help="fastText .bin the input table was made from "
                        "(default: results/demo/fasttext/NAME.bin beside the table)")
    parser.add_argument("--char-cnn-model", help="ELMo model.pt whose char-CNN made a char-CNN input table "
                        "(default: results/demo/lm/elmo/joint/model.pt, else .../forward/model.pt, beside results/demo/vectors/cnn.npy)")
    parser.add_argument("--boundaries", choices=("auto", "true", "false"), default=None,
                        help="embed with <s> ... </s> around sentences: auto (default) by the model's kind, as "
                        "`elmoc extract` (the released ELMo yes, LMs elmoc trained no); true or false forces it")
    parser.add_argument("--no-boundaries", action="store_true", help="the same as --boundaries false")
    parser.add_argument("--bilm-tf-options", help="released ELMo options.json (convert instead of export)")
    parser.add_argument("--bilm-tf-weights", help="released ELMo weights .hdf5")
    parser.add_argument("--vocab", help="with --bilm-tf-*: vocabulary for word-id inputs (e.g. vocab-2016-09-10.txt)")
    parser.add_argument("--spec", help="with --format checkpoints: the variant's resolved spec.yaml")
    parser.add_argument("--direction", choices=DIRECTIONS,
                        help="with --format checkpoints: write only this direction (default both)")
    parser.add_argument("--format", choices=("directory", "checkpoints"), default="directory",
                        help="checkpoints: write OUTPUT_DIR/{forward,backward}/model.pt (bilm-tf only)")
    parser.add_argument("--to", choices=("elmoc", "bilm-tf"), default="elmoc",
                        help="bilm-tf: write OUTPUT_DIR/options.json + OUTPUT_DIR/weights.hdf5 of a char-CNN ELMo-LSTM "
                        "variant, for AllenNLP's Elmo and bilm-tf (default elmoc: a model directory)")


OPTIONS = ("variant", "results", "forward", "backward", "fasttext_model", "char_cnn_model", "boundaries", "no_boundaries",
           "output_dir")


def command_line(args: argparse.Namespace) -> str:
    """The export command as typed (for the model card)."""
    import shlex

    parts = ["elmoc", "export"]
    for key in OPTIONS:
        value = getattr(args, key)
        if value is True:
            parts.append(f"--{key.replace('_', '-')}")
        elif value not in (None, False) and not (key == "results" and value == "results"):
            parts += [f"--{key.replace('_', '-')}", shlex.quote(str(value))]
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    from elmoc.pretrained.export_run import run_export

    return run_export(args, command_line(args))
