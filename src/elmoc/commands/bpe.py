"""``elmoc bpe``: learn BPE subwords on the training corpus (ELMo-Sub)."""
from __future__ import annotations

from elmoc.commands._options import DIR, add_output

NAME = "bpe"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc bpe --corpus results/demo/corpus/train --output-dir results/demo/bpe'
HELP = "learn BPE merges on the corpus; write tokenizer.json and an elmoc vocabulary of subwords"
DESCRIPTION = (
    "Learns byte-pair-encoding merges (Hugging Face tokenizers, whitespace-split corpus tokens, "
    "'##' marks non-initial pieces) on every training shard, then writes OUTPUT_DIR/tokenizer.json and "
    "OUTPUT_DIR/vocab.txt (elmoc vocabulary format: <pad> <s> </s> <unk> first, then subwords in id "
    "order with their corpus counts). Both files are written atomically. The workflow passes the "
    "config's `variants` section (bpe_merges, bpe_min_frequency) as --section-json instead of "
    "--num-merges and --min-frequency."
)


INPUTS = ('corpus',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)

def add_arguments(parser) -> None:
    from elmoc.config_section import add_section_argument

    add_section_argument(parser, "variants section (bpe_merges, bpe_min_frequency)")
    parser.add_argument("--corpus", required=True, nargs="+",
                        help="training text: files or directories of shards (results/demo/corpus/train)")
    parser.add_argument("--num-merges", type=int, default=None,
                        help="BPE merges to learn (paper: about 30K; default 30000)")
    parser.add_argument("--min-frequency", type=int, default=None,
                        help="minimum pair frequency for a merge (default 2)")
    add_output(parser, DIR, "output folder, e.g. results/demo/bpe", old=("--out-dir",))


def run(args) -> int:
    import logging

    from elmoc.data.vocab.subword import build_bpe, corpus_files

    merges, min_frequency = args.num_merges, args.min_frequency
    if args.section_json is not None:
        from elmoc.config_section import Section, refuse_with_section

        refuse_with_section(args, {"--num-merges": merges, "--min-frequency": min_frequency})
        v = Section.parse(args.section_json, "variants", keys=("bpe_merges", "bpe_min_frequency"))
        merges, min_frequency = v.get("bpe_merges", int), v.get("bpe_min_frequency", int)
    files = corpus_files(args.corpus)
    vocab, tokens = build_bpe(files, args.output_dir, 30000 if merges is None else merges,
                              2 if min_frequency is None else min_frequency)
    logging.getLogger("elmoc.bpe").info("wrote %s (%d subwords) from %d files, %d subword tokens", args.output_dir,
                                        len(vocab), len(files), tokens)
    return 0
