"""``elmoc params``: argument parsing for :mod:`elmoc.params` (trainable parameter counts per variant)."""
from __future__ import annotations

NAME = "params"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc params --config config/paper.yaml'
HELP = "count trainable parameters per variant at the config's sizes (meta device, no allocation)"
DESCRIPTION = (
    "Builds each LM on the meta device and counts trainable parameters. 'paper' counts the "
    "parameters the original models share between directions (input table/char-CNN, softmax) once "
    "and the rest twice, as the paper's Tables 2 and 4; 'trained' is what this pipeline trains: the "
    "joint bi-LM of a spec with train.directions: joint (one input and output layer, two encoders), else "
    "2 x one direction (one direction for train.directions: forward, the GPT presets). Give a workflow config (--config, every pretrain variant) or presets (--preset)."
)


INPUTS = ('config', 'preset')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ()

def add_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="workflow config (e.g. config/paper.yaml): every pretrain variant")
    src.add_argument("--preset", nargs="+", help="LM preset file(s), e.g. config/lm/elmo-a.yaml")
    parser.add_argument("--vocab-size", type=int, help="word vocabulary size (default: the vocab file, else 793475)")
    parser.add_argument("--subword-vocab-size", type=int,
                        help="subword vocabulary size (default: the vocab file, else 30004)")
    parser.add_argument("--table-dim", action="append", default=[], metavar="PATH=DIM",
                        help="width of a frozen table that does not exist yet (default 300; cnn.npy 512)")
    parser.add_argument("--default-table-dim", type=int, default=300, help="width of other missing tables (300)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    import json

    from elmoc.params import format_table, parameter_rows, parse_table_dims

    rows = parameter_rows(config=args.config, presets=args.preset, vocab_size=args.vocab_size,
                          subword_vocab_size=args.subword_vocab_size, table_dims=parse_table_dims(args.table_dim),
                          default_table_dim=args.default_table_dim)
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0
