"""`elmoc convert-features`: a feature file rewritten in the other layout or dtype."""
from __future__ import annotations

import argparse

NAME = "convert-features"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc convert-features results/demo/features/elmo-c/sst5.hdf5 sst5.contiguous.hdf5 --layout contiguous'
HELP = "rewrite a feature HDF5 file in the allennlp or contiguous layout, float32 or float16"
DESCRIPTION = (
    "Read a feature file of either layout (written by `elmoc extract`, `elmoc embed --all` or "
    "`allennlp elmo --all`; it needs its sentence_to_index) and write it again: --layout allennlp "
    "(dataset str(i) per sentence, as AllenNLP writes it) or contiguous (one dataset `features` "
    "[layers, total_tokens, dim] and `offsets`, which the tasks read without an HDF5 call per "
    "sentence), --dtype float32 or float16 (default: the input's). Every sentence keeps its "
    "position, key and values (float16: rounded once); the index and the attributes are copied. "
    "The output file appears only when complete."
)

INPUTS = ("input_file",)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ("output_file",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input_file", help="feature HDF5 file to read")
    parser.add_argument("output_file", help="feature HDF5 file to write")
    parser.add_argument("--layout", choices=("allennlp", "contiguous"), required=True, help="layout to write")
    parser.add_argument("--dtype", choices=("float32", "float16"), default=None,
                        help="precision to write (default: the input's)")


def run(args: argparse.Namespace) -> int:
    from elmoc.features.store import convert_features
    from elmoc.io.output_paths import sigterm_as_interrupt

    with sigterm_as_interrupt():  # SIGTERM as Ctrl-C: the half-written temporary is deleted, exit 143
        convert_features(args.input_file, args.output_file, args.layout, args.dtype)
    return 0
