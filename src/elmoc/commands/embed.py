"""`elmoc embed`: features of a sentences file from a model directory (like `allennlp elmo`)."""
from __future__ import annotations

import argparse

NAME = "embed"
HELP = "embed a file of sentences with an exported model directory into HDF5 (allennlp elmo layout)"
DESCRIPTION = (
    "Read one sentence per line (whitespace-tokenized, or raw text with --tokenize), run the "
    "model directory written by `elmoc export` and write dataset str(i) for line i: "
    "[layers, tokens, dim] with --all, [tokens, dim] with --top (last layer) or --average "
    "(mean of the layers), plus sentence_to_index (JSON: sentence -> key)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input_file", help="sentences, one per line")
    parser.add_argument("output_file", help="HDF5 file to write")
    parser.add_argument("--model", required=True, help="model directory (elmoc export)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_const", const="all", dest="layers", help="every layer")
    which.add_argument("--top", action="store_const", const="top", dest="layers", help="the top layer")
    which.add_argument("--average", action="store_const", const="average", dest="layers", help="mean of the layers")
    parser.add_argument("--tokenize", action="store_true", help="lines are raw text: tokenize them (PTB-like)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")


def run(args: argparse.Namespace) -> int:
    import torch

    from elmoc.errors import ConfigError
    from elmoc.features.sentences import read_sentences
    from elmoc.features.store import write_features
    from elmoc.pretrained.loader import load_bilm

    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.threads:
        torch.set_num_threads(args.threads)
    sentences = read_sentences(args.input_file, tokenize=args.tokenize)
    bilm = load_bilm(args.model, args.device)
    write_features(bilm, sentences, args.output_file, batch_size=args.batch_size, device=args.device,
                   layers=args.layers)
    return 0
