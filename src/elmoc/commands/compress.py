"""`elmoc compress`: a smaller copy of a model directory (float16, bfloat16 or int8), measured."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_output

NAME = "compress"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc compress results/demo/models/elmo-c --output-dir results/demo/compressed/elmo-c/int8 --format int8 '
    '--measure results/demo/corpus/heldout.txt'
)
HELP = "write a float16/bfloat16/int8 copy of a model directory, with its measured size, speed and fidelity"
DESCRIPTION = (
    "Copy MODEL_DIR (written by `elmoc export`, of a variant or of the released bilm-tf ELMo) to --output-dir "
    "with its weights in --format: float16 or bfloat16 (half the size; widened to float32 on load) or "
    "int8 (torch dynamic quantization of every Linear, the LSTM matrices included; CPU only). Frozen "
    ".npy tables become float16. The copy is measured against MODEL_DIR on --measure (one sentence per "
    "line): size on disk, embedding tokens/s (alternated runs) and the per-layer mean cosine of the "
    "features; the figures go into elmoc-model.json and the model card. `elmoc embed --model` and "
    "elmoc.Elmo.from_pretrained load the copy like any model directory."
)


INPUTS = ('model_dir', 'measure')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model_dir", help="the model directory to compress (elmoc export)")
    add_output(parser, DIR, "directory to write: absent, empty or an earlier output of this command (replaced atomically)", old=("--output",))
    from elmoc.config import declared_values  # the registered formats, read without importing torch

    parser.add_argument("--format", required=True, dest="fmt",
                        metavar="{" + ",".join(declared_values("compression", "TABLE_COPY")) + "}",
                        help="storage format of the weights (a registered compressed format)")
    parser.add_argument("--measure", required=True, metavar="SENTENCES_FILE",
                        help="sentences (one per line, whitespace-tokenized) to measure the copy on")
    parser.add_argument("--tokenize", action="store_true", help="--measure lines are raw text: tokenize them")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch when measuring (default 64)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads when measuring")
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed rounds, each running both models in alternating order (default 3)")


def command_line(args: argparse.Namespace) -> str:
    """The command as typed (for the model card)."""
    import shlex

    parts = ["elmoc", "compress", shlex.quote(args.model_dir), "--output-dir", shlex.quote(args.output_dir),
             "--format", args.fmt, "--measure", shlex.quote(args.measure), "--batch-size", str(args.batch_size),
             "--rounds", str(args.rounds)]
    if args.tokenize:
        parts.append("--tokenize")
    if args.threads:
        parts += ["--threads", str(args.threads)]
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    import torch

    from elmoc.errors import ConfigError
    from elmoc.features.sentences import read_sentences
    from elmoc.io.output_paths import check_output_directory
    from elmoc.pretrained.compress import compress_model
    from elmoc.pretrained.formats import check_format

    check_format(args.fmt)
    check_output_directory(args.output_dir, NAME, {"MODEL_DIR": args.model_dir, "--measure": args.measure})
    for name in ("batch_size", "rounds"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    sentences = read_sentences(args.measure, tokenize=args.tokenize)
    compress_model(args.model_dir, args.output_dir, args.fmt, sentences, args.measure, args.batch_size, args.rounds,
                   command_line(args))
    return 0
