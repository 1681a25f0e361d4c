"""``elmoc vectors``: the word-vector table aligned with the vocabulary."""
from __future__ import annotations

from elmoc.commands._options import FILE, add_output

NAME = "vectors"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc vectors --vocab results/demo/vocab/vocab.txt --model results/demo/fasttext/cc.bin --output '
    'results/demo/vectors/cc.npy'
)
HELP = "write a float32 [vocab, dim] .npy table from a fastText .bin (or N(0,1) random)"
DESCRIPTION = (
    "Row i is the fastText vector of vocabulary token i (get_word_vector: words outside the "
    "fastText vocabulary are composed from character n-grams); rows that are still all-zero get "
    "the vector of '<unk>' (if that is zero too, they stay zero and are counted in the log). "
    "With --random: N(0,1) entries of size --dim from --seed (ELMo-C-RND targets; the workflow "
    "passes the config's `fasttext.random` section {dim, seed} as --section-json instead). Written "
    "atomically."
)


INPUTS = ('vocab', 'model')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)

def add_arguments(parser) -> None:
    from elmoc.config_section import add_section_argument

    parser.add_argument("--vocab", required=True, help="vocabulary file (results/demo/vocab/vocab.txt)")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="fastText .bin model")
    src.add_argument("--random", action="store_true", help="N(0,1) random table instead")
    parser.add_argument("--dim", type=int, default=None, help="dimension of the --random table (default 300)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the --random table (default 1)")
    add_section_argument(parser, "fasttext.random section (with --random)")
    add_output(parser, FILE, "output .npy, e.g. results/demo/vectors/cc.npy", old=("--out",))


def run(args) -> int:
    import logging

    from elmoc.data.vectors.tables import fasttext_table, random_table, save_table
    from elmoc.data.vocab.vocabulary import Vocabulary

    dim, seed = args.dim, args.seed
    if args.section_json is not None:
        from elmoc.config_section import Section, refuse_with_section
        from elmoc.errors import ConfigError

        refuse_with_section(args, {"--dim": dim, "--seed": seed, "--model": args.model})
        if not args.random:
            raise ConfigError("--section-json (fasttext.random) goes with --random")
        r = Section.parse(args.section_json, "fasttext.random", keys=("dim", "seed"))
        dim, seed = r.get("dim", int), r.get("seed", int)
    vocab = Vocabulary.load(args.vocab)
    if args.random:
        table = random_table(len(vocab), 300 if dim is None else dim, 1 if seed is None else seed)
    else:
        table, _ = fasttext_table(vocab, args.model)
    save_table(args.output, table)
    logging.getLogger("elmoc.vectors").info("wrote %s table to %s", tuple(table.shape), args.output)
    return 0
