"""``elmoc corpus``: prepare train shards and a heldout file from raw sources."""
from __future__ import annotations

from elmoc.commands._options import DIR, add_output

NAME = "corpus"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc corpus --source lines:my_corpus.txt --heldout 0.1 --output-dir results/demo/corpus'
HELP = "clean, shuffle and split corpus sources into train shards + heldout.txt"
DESCRIPTION = (
    "Read every --source FORMAT:PATH_OR_GLOB (FORMAT: lines = one tokenized sentence per line; "
    "wikitext = WikiText with '= Heading =' lines, split into sentences at . ? ! tokens; raw = "
    "untokenized text, one document per line, sentence-split and PTB-like tokenized), replace "
    "control characters such as NUL by spaces (with a warning naming the file and line), normalise "
    "whitespace, drop empty (and, with --max-length, over-long) sentences, optionally lowercase. "
    "With --shards N the sentences are pooled, shuffled with --seed, the heldout part (--heldout: "
    "fraction < 1 or sentence count) is cut off, and the rest is split into N shards. With "
    "--shards 0 each train file becomes one shard unshuffled and the heldout file comes from "
    "--heldout-source. Writes OUTPUT_DIR/train/shard_NNN.txt, OUTPUT_DIR/heldout.txt, OUTPUT_DIR/stats.json and "
    "OUTPUT_DIR/.elmoc-output.json, atomically: on any error nothing is written. An existing OUTPUT_DIR is replaced "
    "only when it is empty or an earlier `elmoc corpus` output, and never when it holds a source. The "
    "workflow passes the config's `corpus` section as --section-json instead of the other options "
    "(sources, heldout_sources, num_shards, heldout, lowercase, max_length, seed)."
)


# the sources (globs, or in --section-json) are checked against --output-dir by the output folder's check
INPUTS = ()  # args naming files read; an output among them is refused (cli)
OUTPUTS = ()

def add_arguments(parser) -> None:
    from elmoc.config_section import add_section_argument

    add_section_argument(parser, "corpus section")
    parser.add_argument("--source", action="append", default=[], metavar="FORMAT:PATH_OR_GLOB",
                        help="training text (repeatable); quote globs")
    parser.add_argument("--heldout-source", action="append", default=[], metavar="FORMAT:PATH_OR_GLOB",
                        help="heldout text instead of a split of the sources (repeatable)")
    add_output(parser, DIR, "output directory, e.g. results/demo/corpus: absent, empty or an earlier output of this command (replaced atomically)", old=("--out",))
    parser.add_argument("--shards", type=int, default=None,
                        help="number of train shards; 0 = one shard per train file, unshuffled (default 1)")
    parser.add_argument("--heldout", type=float, default=None,
                        help="heldout fraction (<1) or sentence count (>=1) of the pooled sentences "
                             "(default 0.05, or 0 with --heldout-source)")
    parser.add_argument("--lowercase", action="store_true", help="lowercase all text")
    parser.add_argument("--max-length", type=int, default=None, metavar="TOKENS",
                        help="drop sentences longer than this (default: keep all)")
    parser.add_argument("--seed", type=int, default=None, help="shuffle seed (default 1)")


def run(args) -> int:
    from elmoc.data.corpus.prepare import CorpusConfig, prepare_corpus
    from elmoc.data.corpus.readers import parse_source
    from elmoc.errors import ConfigError

    if args.section_json is not None:
        args = _flags_from_section(args)
    if not args.source:
        raise ConfigError("give --source (repeatable) or --section-json")
    args.shards = 1 if args.shards is None else args.shards
    args.seed = 1 if args.seed is None else args.seed
    if args.shards < 0:
        raise ConfigError(f"--shards must be >= 0, got {args.shards}")
    heldout = args.heldout if args.heldout is not None else (0.0 if args.heldout_source else 0.05)
    config = CorpusConfig(
        sources=[parse_source(s) for s in args.source],
        heldout_sources=[parse_source(s) for s in args.heldout_source],
        num_shards=args.shards or None,
        heldout=heldout,
        lowercase=args.lowercase,
        max_length=args.max_length,
        seed=args.seed,
    )
    prepare_corpus(config, args.output_dir)
    return 0


def _flags_from_section(args):
    """Fill the flags from --section-json (the config's `corpus` section)."""
    from elmoc.config_section import Section, refuse_with_section

    refuse_with_section(args, {"--source": args.source, "--heldout-source": args.heldout_source,
                               "--shards": args.shards, "--heldout": args.heldout, "--lowercase": args.lowercase,
                               "--max-length": args.max_length, "--seed": args.seed})
    c = Section.parse(args.section_json, "corpus", keys=("sources", "heldout_sources", "num_shards", "heldout",
                                                        "lowercase", "max_length", "seed"))

    def sources(key: str) -> list[str]:
        return [f"{s.get('format', str, required=True)}:{s.get('path', str, required=True)}"
                for s in c.entries(key, keys=("format", "path"))]

    args.source = sources("sources")
    args.heldout_source = sources("heldout_sources")
    args.shards = c.get("num_shards", int, 0)
    args.seed = c.get("seed", int, 1)
    if not args.heldout_source:
        args.heldout = c.get("heldout", float, 0.05)
    args.lowercase = c.get("lowercase", bool, False)
    args.max_length = c.get("max_length", int, None) or None
    return args
