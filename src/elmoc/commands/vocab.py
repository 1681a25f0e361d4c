"""``elmoc vocab``: the word vocabulary (specials first, then by frequency)."""
from __future__ import annotations

from elmoc.commands._options import FILE, add_output

NAME = "vocab"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc vocab --corpus results/demo/corpus/train --output results/demo/vocab/vocab.txt'
HELP = "build the frequency-sorted vocabulary from train shards, or load an external list"
DESCRIPTION = (
    "Write OUTPUT as 'token<TAB>count' lines in id order: <pad> <s> </s> <unk> (ids 0-3), then "
    "either the words of the train shards under --corpus with count >= --min-count by "
    "descending count (ties by token), or, with --from-file, the first field of every line of an "
    "external list such as bilm-tf's vocab-2016-09-10.txt in file order (its <S> </S> <UNK> kept "
    "as ordinary entries, duplicates, blank lines and tokens with control characters skipped). "
    "--max-size caps the total size including the 4 specials. The workflow passes the config's "
    "`vocab` section (file, min_count, max_size) as --section-json; --corpus then names the train "
    "shards used when the section has no `file`."
)


INPUTS = ('corpus', 'from_file')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)

def add_arguments(parser) -> None:
    from elmoc.config_section import add_section_argument

    add_section_argument(parser, "vocab section")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--corpus", metavar="TRAIN_DIR", help="directory of shard_*.txt (results/demo/corpus/train)")
    src.add_argument("--from-file", metavar="PATH", help="external vocabulary list, one token per line")
    add_output(parser, FILE, "output vocabulary, e.g. results/demo/vocab/vocab.txt", old=("--out",))
    parser.add_argument("--max-size", type=int, default=None, help="cap on the size incl. specials (default: none)")
    parser.add_argument("--min-count", type=int, default=None, help="minimum corpus count (default 1; --corpus only)")


def run(args) -> int:
    from elmoc.config_section import Section, refuse_with_section
    from elmoc.data.vocab.vocabulary import build_vocabulary
    from elmoc.errors import ConfigError

    corpus, from_file, max_size, min_count = args.corpus, args.from_file, args.max_size, args.min_count
    if args.section_json is not None:
        refuse_with_section(args, {"--from-file": from_file, "--max-size": max_size, "--min-count": min_count})
        v = Section.parse(args.section_json, "vocab", keys=("file", "min_count", "max_size"))
        from_file = v.get("file", str) or None
        corpus = None if from_file else corpus
        max_size, min_count = v.get("max_size", int) or None, v.get("min_count", int, 1)
    if not corpus and not from_file:
        raise ConfigError("give --corpus or --from-file (or --section-json with --corpus)")
    from elmoc.io.output_paths import refuse_outputs_among_inputs

    refuse_outputs_among_inputs(NAME, {"--output": args.output}, {"vocab.file": from_file})  # --section-json's input
    build_vocabulary(args.output, corpus=corpus, from_file=from_file, max_size=max_size,
                     min_count=1 if min_count is None else min_count)
    return 0
