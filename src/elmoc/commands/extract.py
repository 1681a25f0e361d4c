"""`elmoc extract`: bi-LM features for a sentences file, as `allennlp elmo --all` HDF5."""
from __future__ import annotations

import argparse

NAME = "extract"
HELP = "write bi-LM layer activations for a sentences file to HDF5 (allennlp elmo layout)"
DESCRIPTION = (
    "Run a forward and a backward checkpoint over one tokenized sentence per line and "
    "write dataset str(i) of shape [layers, tokens, 2*hidden] for line i, plus "
    "sentence_to_index (JSON: sentence -> key), like `allennlp elmo --all`."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--forward", required=True, help="forward LM checkpoint.pt")
    parser.add_argument("--backward", required=True, help="backward LM checkpoint.pt")
    parser.add_argument("--sentences", required=True, help="one whitespace-tokenized sentence per line")
    parser.add_argument("--output", required=True, help="HDF5 file to write")
    parser.add_argument("--vocab", help="vocabulary file (default: the one recorded in the checkpoint)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    parser.add_argument("--no-boundaries", action="store_true",
                        help="do not wrap sentences in <s> ... </s> before encoding")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")


def run(args: argparse.Namespace) -> int:
    import torch

    from elmoc.features.export import BiLM, export_features, read_sentences

    if args.threads:
        torch.set_num_threads(args.threads)
    bilm = BiLM.from_checkpoints(args.forward, args.backward, args.vocab)
    sentences = read_sentences(args.sentences)
    export_features(bilm, sentences, args.output, batch_size=args.batch_size,
                    boundaries=not args.no_boundaries, device=args.device)
    return 0
