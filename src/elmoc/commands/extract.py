"""`elmoc extract`: bi-LM features for a sentences file, as `allennlp elmo --all` HDF5."""
from __future__ import annotations

import argparse

NAME = "extract"
HELP = "write bi-LM layer activations for a sentences file to HDF5 (allennlp elmo layout)"
DESCRIPTION = (
    "Run a forward and a backward LM (model.pt) over one tokenized sentence per line and "
    "write dataset str(i) of shape [layers, tokens, 2*hidden] for line i, plus "
    "sentence_to_index (JSON: sentence -> key), like `allennlp elmo --all`. Words outside "
    "the LM vocabulary keep their identity: char-CNN inputs read their characters, FastText "
    "inputs the vector fastText composes from their n-grams (the .bin the input table was "
    "made from), char-CNN tables the vector of that char-CNN; only closed word tables read <unk>. "
    "The workflow passes the config's `features` section (batch_size, boundaries, closed_vocabulary) "
    "as --section-json instead of those three options."
)


INPUTS = ('forward', 'backward', 'sentences', 'vocab', 'fasttext_model', 'char_cnn_model')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.config_section import add_section_argument

    add_section_argument(parser, "features section")
    parser.add_argument("--forward", required=True, help="forward LM model.pt (or checkpoint.pt); a joint bi-LM's or a masked LM's model.pt as both "
                        "--forward and --backward (a masked LM gives one bidirectional stack of layers)")
    parser.add_argument("--backward", required=True, help="backward LM model.pt (or checkpoint.pt; the joint or masked model.pt again)")
    parser.add_argument("--sentences", required=True, help="one whitespace-tokenized sentence per line")
    parser.add_argument("--output", required=True, help="HDF5 file to write")
    parser.add_argument("--vocab", help="vocabulary file (default: the one recorded in the checkpoint)")
    parser.add_argument("--fasttext-model", help="fastText .bin composing out-of-vocabulary words of a FastText "
                        "input (default: results/fasttext/NAME.bin beside the input table)")
    parser.add_argument("--char-cnn-model", help="ELMo model.pt whose char-CNN made a char-CNN input table "
                        "(ELMo-C-CNN; default: results/lm/elmo/joint/model.pt, else .../forward/model.pt, beside results/vectors/cnn.npy)")
    parser.add_argument("--closed-vocabulary", action="store_true",
                        help="map words outside the LM vocabulary to <unk> (the behaviour before issue 12)")
    parser.add_argument("--batch-size", type=int, default=None, help="sentences per batch (default 64)")
    parser.add_argument("--no-boundaries", action="store_true",
                        help="do not wrap sentences in <s> ... </s> before encoding")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")


def run(args: argparse.Namespace) -> int:
    import torch

    from elmoc.features.sentences import read_sentences
    from elmoc.features.store import write_features
    from elmoc.pretrained.loader import load_checkpoints

    if args.section_json is not None:
        from elmoc.config_section import Section, refuse_with_section

        refuse_with_section(args, {"--batch-size": args.batch_size, "--no-boundaries": args.no_boundaries,
                                   "--closed-vocabulary": args.closed_vocabulary})
        f = Section.parse(args.section_json, "features")
        args.batch_size = f.get("batch_size", int)
        args.no_boundaries = not f.get("boundaries", bool, True)
        args.closed_vocabulary = f.get("closed_vocabulary", bool, False)
    args.batch_size = 64 if args.batch_size is None else args.batch_size
    if args.threads:
        torch.set_num_threads(args.threads)
    bilm = load_checkpoints(args.forward, args.backward, args.vocab, fasttext_model=args.fasttext_model,
                            closed_vocabulary=args.closed_vocabulary, char_cnn_model=args.char_cnn_model)
    sentences = read_sentences(args.sentences)
    write_features(bilm, sentences, args.output, batch_size=args.batch_size,
                   boundaries=not args.no_boundaries, device=args.device)
    return 0
