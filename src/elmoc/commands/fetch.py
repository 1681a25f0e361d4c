"""``elmoc fetch``: download (or locate) an input file, checksummed and atomic."""
from __future__ import annotations

NAME = "fetch"
HELP = "fetch files from a PyPI wheel, an http(s)/file URL or a local path, sha256-checked"
DESCRIPTION = (
    "Materialise SOURCE into OUT_DIR. SOURCE is 'pypi:PKG==VER' (a wheel fetched with "
    "`pip download --no-deps`; --member globs select the files inside it), an http(s):// or "
    "file:// URL (streamed, hashed, renamed into place), or a local path (checked to exist). "
    "--sha256 pins the fetched file (the wheel itself for pypi: sources), --size its length in "
    "bytes. A URL must be pinned by one of them ('--sha256 none' without --size is refused unless "
    "--allow-unpinned is given: use that once on a trusted network, the log gives the hash to pin); "
    "an unpinned pypi: wheel is accepted with a warning (pip checks it against the index). A "
    "transfer shorter than its Content-Length or a mismatch is an error and leaves nothing "
    "behind. OUT_DIR gets the files (members flat, under their base names) and a .fetch.json "
    "manifest; a second run with the same request does nothing."
)


def add_arguments(parser) -> None:
    parser.add_argument("source", help="pypi:PKG==VER, http(s)/file URL, or local path")
    parser.add_argument("--out", required=True, metavar="OUT_DIR", help="output directory (replaced atomically)")
    parser.add_argument("--sha256", required=True, help="pinned sha256 of the fetched file, or 'none'")
    parser.add_argument("--size", type=int, default=None, metavar="BYTES",
                        help="pinned size in bytes of the fetched file (a pin when the sha256 is unknown)")
    parser.add_argument("--allow-unpinned", action="store_true",
                        help="accept a URL without --sha256/--size (logs its hash so that it can be pinned)")
    parser.add_argument("--member", action="append", default=[], metavar="GLOB",
                        help="archive member(s) to extract (repeatable; required for pypi: sources)")
    parser.add_argument("--wheel", default=None, metavar="FILENAME",
                        help="exact wheel file name for pypi: sources (pins platform tags)")
    parser.add_argument("--cache", default=None, metavar="DIR",
                        help="where wheels/archives are kept between runs (default: OUT_DIR/../.cache)")


def run(args) -> int:
    from elmoc.data.fetch import FetchSpec, fetch

    sha = None if str(args.sha256).lower() in ("none", "null", "") else args.sha256
    spec = FetchSpec(source=args.source, sha256=sha, members=args.member, wheel=args.wheel, size=args.size,
                     allow_unpinned=args.allow_unpinned)
    fetch(spec, args.out, args.cache)
    return 0
