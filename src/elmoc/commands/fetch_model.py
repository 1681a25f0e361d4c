"""``elmoc fetch-model``: a released ELMo by name, or a model directory's archive at a URL, into the cache."""
from __future__ import annotations

NAME = "fetch-model"
GROUP = "use"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc fetch-model small'
HELP = "download a released ELMo (original, medium, small) or a model directory at a URL into the cache, pinned"
DESCRIPTION = (
    "Fetch SOURCE once into the model cache (--cache, default $ELMOC_CACHE, else $XDG_CACHE_HOME/elmoc, else "
    "~/.cache/elmoc) and print the model directory's path. SOURCE is a released ELMo's name (original, medium, "
    "small: AllenNLP's published bilm-tf options.json + weights HDF5, converted once into a model directory) or "
    "the http(s)/file URL of a model directory packed as an archive (.tar.gz, .tgz, .tar, .zip). AllenNLP "
    "publishes no checksums: without --sha256 each file is trusted on first use, its sha256 and size recorded in "
    "CACHE/pins.yaml and checked on every later fetch. Once fetched, nothing is downloaded again: "
    "elmoc.Elmo.from_pretrained(SOURCE) and `elmoc embed --model DIR` work offline."
)

INPUTS = ()  # args naming files read; an output among them is refused (cli)
OUTPUTS = ("cache",)


def add_arguments(parser) -> None:
    parser.add_argument("source", help="original, medium, small, or the URL of a model directory's archive")
    parser.add_argument("--sha256", default=None, help="the archive's sha256 (a URL source; default: trust on "
                        "first use, pinned in CACHE/pins.yaml)")
    parser.add_argument("--cache", default=None, metavar="DIR", help="the model cache (default $ELMOC_CACHE, "
                        "else $XDG_CACHE_HOME/elmoc, else ~/.cache/elmoc)")


def run(args) -> int:
    from elmoc.io.output_paths import sigterm_as_interrupt
    from elmoc.pretrained.hub import fetch_model

    with sigterm_as_interrupt():  # SIGTERM as Ctrl-C: a partial download is deleted
        print(fetch_model(args.source, sha256=args.sha256, cache=args.cache))
    return 0
