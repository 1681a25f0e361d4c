"""`elmoc extract`: bi-LM features for a sentences file, as `allennlp elmo --all` HDF5 (or the
contiguous layout, float32 or float16)."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_device, add_output, add_storage_arguments
from elmoc.features.boundaries import boundaries_flags, boundaries_option

NAME = "extract"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc extract --forward results/demo/lm/elmo-c/forward/model.pt --backward '
    'results/demo/lm/elmo-c/backward/model.pt --sentences results/demo/tasks/sst5/sentences.txt --output '
    'results/demo/features/elmo-c/sst5.hdf5'
)
HELP = "write bi-LM layer activations for a sentences file to HDF5 (allennlp elmo layout)"
DESCRIPTION = (
    "Run a forward and a backward LM (model.pt) over one tokenized sentence per line and "
    "write dataset str(i) of shape [layers, tokens, 2*hidden] for line i ([layers, tokens, hidden] "
    "for a one-direction LM, train.directions: forward, given as --forward alone), plus "
    "sentence_to_index (JSON: sentence -> key), like `allennlp elmo --all`. Words outside "
    "the LM vocabulary keep their identity: char-CNN inputs read their characters, FastText "
    "inputs the vector fastText composes from their n-grams (the .bin the input table was "
    "made from), char-CNN tables the vector of that char-CNN; only closed word tables read <unk>. "
    "Sentence boundaries (<s> ... </s> around each sentence) follow the model's kind unless forced: "
    "the released bilm-tf ELMo gets them (AllenNLP), every LM elmoc trained reads bare tokens (the "
    "authors' ELMo-C code). --layout contiguous writes one dataset `features` [layers, total_tokens, dim] "
    "and `offsets` instead of one dataset per line; --dtype float16 halves the file. The workflow passes "
    "the config's `features` section (batch_size, boundaries, closed_vocabulary, layout, dtype) as "
    "--section-json instead of those options."
)


INPUTS = ('forward', 'backward', 'sentences', 'vocab', 'fasttext_model', 'char_cnn_model')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)


def implicit_inputs(args: argparse.Namespace) -> dict:
    """What the LM files read or keep beside them: the vocabulary recorded in the checkpoint
    (when no --vocab), the spec's vectors table and corpus, the run's checkpoint.pt."""
    from elmoc.commands._paths import lm_file_inputs

    return {**lm_file_inputs(args.forward, "--forward"), **lm_file_inputs(args.backward, "--backward")}



BOUNDARY_CHOICES = ("auto", "true", "false")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.config_section import add_section_argument

    add_section_argument(parser, "features section")
    parser.add_argument("--forward", required=True, help="forward LM model.pt (or checkpoint.pt); a joint bi-LM's or a masked LM's model.pt as both "
                        "--forward and --backward (a masked LM gives one bidirectional stack of layers)")
    parser.add_argument("--backward", help="backward LM model.pt (or checkpoint.pt; the joint or masked model.pt again); "
                        "omit it for a one-direction LM (train.directions: forward: the forward LM's features alone)")
    parser.add_argument("--sentences", required=True, help="one whitespace-tokenized sentence per line")
    add_output(parser, FILE, "HDF5 file to write")
    parser.add_argument("--vocab", help="vocabulary file (default: the one recorded in the checkpoint)")
    parser.add_argument("--fasttext-model", help="fastText .bin composing out-of-vocabulary words of a FastText "
                        "input (default: results/demo/fasttext/NAME.bin beside the input table)")
    parser.add_argument("--char-cnn-model", help="ELMo model.pt whose char-CNN made a char-CNN input table "
                        "(ELMo-C-CNN; default: results/demo/lm/elmo/joint/model.pt, else .../forward/model.pt, beside results/demo/vectors/cnn.npy)")
    parser.add_argument("--closed-vocabulary", action="store_true",
                        help="map words outside the LM vocabulary to <unk> instead of composing their input vectors")
    parser.add_argument("--batch-size", type=int, default=None, help="sentences per batch (default 64)")
    parser.add_argument("--boundaries", choices=BOUNDARY_CHOICES, default=None,
                        help="wrap sentences in <s> ... </s> before encoding (dropped from the output): auto (default) "
                        "by the model's kind, yes for the released bilm-tf ELMo (AllenNLP's way), no for every LM elmoc "
                        "trained (the authors' ELMo-C code feeds bare tokens); true or false forces it")
    parser.add_argument("--no-boundaries", action="store_true", help="the same as --boundaries false")
    add_storage_arguments(parser, layout=True)
    add_device(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")


def run(args: argparse.Namespace) -> int:
    import torch

    from elmoc.features.sentences import read_sentences
    from elmoc.features.store import write_features
    from elmoc.pretrained.loader import load_checkpoints

    if args.section_json is not None:
        from elmoc.config_section import Section, refuse_with_section

        refuse_with_section(args, {"--batch-size": args.batch_size, "--no-boundaries": args.no_boundaries,
                                   "--boundaries": args.boundaries, "--closed-vocabulary": args.closed_vocabulary,
                                   "--layout": args.layout, "--dtype": args.dtype})
        f = Section.parse(args.section_json, "features",
                          keys=("batch_size", "boundaries", "closed_vocabulary", "layout", "dtype"))
        args.batch_size = f.get("batch_size", int)
        boundaries = boundaries_option(f.get("boundaries", (bool, str), "auto"), "config features.boundaries")
        args.closed_vocabulary = f.get("closed_vocabulary", bool, False)
        args.layout, args.dtype = f.get("layout", str), f.get("dtype", str)
    else:
        boundaries = boundaries_flags(args.boundaries, args.no_boundaries)
    args.batch_size = 64 if args.batch_size is None else args.batch_size
    layout, dtype = args.layout or "allennlp", args.dtype or "float32"
    from elmoc.features.layouts import dtype_of, writer_of

    writer_of(layout), dtype_of(dtype)  # a bad config value stops before the model loads
    if args.threads:
        torch.set_num_threads(args.threads)
    bilm = load_checkpoints(args.forward, args.backward, args.vocab, fasttext_model=args.fasttext_model,
                            closed_vocabulary=args.closed_vocabulary, char_cnn_model=args.char_cnn_model,
                            boundaries=boundaries)
    sentences = read_sentences(args.sentences)
    # the file records the choice (attribute `boundaries`)
    write_features(bilm, sentences, args.output, batch_size=args.batch_size, device=args.device, layout=layout,
                   dtype=dtype)
    return 0
