"""`elmoc embed`: features of a sentences file from a model directory (like `allennlp elmo`)."""
from __future__ import annotations

import argparse

NAME = "embed"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc embed sentences.txt embeddings.hdf5 --model results/demo/models/elmo-c --all --device auto'
HELP = "embed a file of sentences with an exported model directory into HDF5 (allennlp elmo layout)"
DESCRIPTION = (
    "Read one sentence per line (whitespace-tokenized, or raw text with --tokenize), run the "
    "model directory written by `elmoc export` and write dataset str(i) for line i: "
    "[layers, tokens, dim] with --all, [tokens, dim] with --top (last layer) or --average "
    "(mean of the layers), plus sentence_to_index (JSON: sentence -> key), float32 or, with "
    "--dtype float16, half the size. The file is checked "
    "once, then streamed: 20,000 sentences at a time are sorted by length and cut into batches "
    "of at most --batch-size sentences and --max-tokens padded tokens, so a file of any size "
    "embeds in constant memory (apart from the sentence_to_index text, which --forget-sentences "
    "leaves out). The output file appears only when complete."
)


INPUTS = ('input_file', 'model')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_file',)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.commands._options import add_device, add_storage_arguments

    parser.add_argument("input_file", help="sentences, one per line")
    parser.add_argument("output_file", help="HDF5 file to write")
    parser.add_argument("--model", required=True, help="model directory (elmoc export)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_const", const="all", dest="layers", help="every layer")
    which.add_argument("--top", action="store_const", const="top", dest="layers", help="the top layer")
    which.add_argument("--average", action="store_const", const="average", dest="layers", help="mean of the layers")
    parser.add_argument("--tokenize", action="store_true", help="lines are raw text: tokenize them (PTB-like)")
    parser.add_argument("--batch-size", type=int, default=64, help="at most this many sentences per batch (default 64)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="at most this many padded tokens (sentences x longest) per batch (default: no limit)")
    parser.add_argument("--forget-sentences", action="store_true",
                        help="do not write sentence_to_index (as allennlp elmo); elmoc tasks cannot read such a file")
    add_storage_arguments(parser, layout=False)
    add_device(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")


def run(args: argparse.Namespace) -> int:
    import torch

    from elmoc.errors import ConfigError
    from elmoc.features.embed import check_batching
    from elmoc.features.sentences import check_sentences, iter_sentences
    from elmoc.features.store import write_features
    from elmoc.io.output_paths import sigterm_as_interrupt
    from elmoc.pretrained.loader import load_bilm

    check_batching(args.batch_size, args.max_tokens)
    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    total = check_sentences(args.input_file)  # a bad line is refused before the model loads
    bilm = load_bilm(args.model, args.device)
    with sigterm_as_interrupt():  # SIGTERM as Ctrl-C: the half-written temporaries are deleted, exit 143
        write_features(bilm, iter_sentences(args.input_file, tokenize=args.tokenize), args.output_file,
                       batch_size=args.batch_size, device=args.device, layers=args.layers,
                       max_tokens=args.max_tokens, total=total, forget_sentences=args.forget_sentences,
                       dtype=args.dtype or "float32")
    return 0
