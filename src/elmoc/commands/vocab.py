"""``elmoc vocab``: the word vocabulary (specials first, then by frequency)."""
from __future__ import annotations

NAME = "vocab"
HELP = "build the frequency-sorted vocabulary from train shards, or load an external list"
DESCRIPTION = (
    "Write OUT as 'token<TAB>count' lines in id order: <pad> <s> </s> <unk> (ids 0-3), then "
    "either the words of the train shards under --corpus with count >= --min-count by "
    "descending count (ties by token), or, with --from-file, the first field of every line of an "
    "external list such as bilm-tf's vocab-2016-09-10.txt in file order (its <S> </S> <UNK> kept "
    "as ordinary entries, duplicates, blank lines and tokens with control characters skipped). "
    "--max-size caps the total size including the 4 specials."
)


def add_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", metavar="TRAIN_DIR", help="directory of shard_*.txt (results/corpus/train)")
    src.add_argument("--from-file", metavar="PATH", help="external vocabulary list, one token per line")
    parser.add_argument("--out", required=True, help="output vocabulary, e.g. results/vocab/vocab.txt")
    parser.add_argument("--max-size", type=int, default=None, help="cap on the size incl. specials (default: none)")
    parser.add_argument("--min-count", type=int, default=1, help="minimum corpus count (default 1; --corpus only)")


def run(args) -> int:
    from elmoc.data.vocab import build_vocabulary

    build_vocabulary(args.out, corpus=args.corpus, from_file=args.from_file, max_size=args.max_size,
                     min_count=args.min_count)
    return 0
