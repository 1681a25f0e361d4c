"""The ``elmoc`` command line.

Every module in :mod:`elmoc.commands` is a subcommand: it defines ``NAME``,
``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.  Command
modules import heavy libraries (torch, fasttext) inside ``run`` so that
``elmoc --help`` stays fast.  Workflow rules call these subcommands, so every
stage also runs without Snakemake.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import io
import logging
import pkgutil
import sys

from elmoc import __version__
from elmoc.errors import ElmocError
from elmoc.process_tree import EXIT_SIGINT


def _command_modules():
    import elmoc.commands as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        yield module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmoc",
        description="ELMo-C: contextual word representations with continuous outputs, "
        "and the softmax baselines it replaces.",
    )
    parser.add_argument("--version", action="version", version=f"elmoc {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    _stacks_on_fatal_signals()
    try:
        return int(args._run(args) or 0)
    except ElmocError as e:  # an error may name its own exit status (e.g. a busy output folder)
        print(f"elmoc {args.command}: error: {e}", file=sys.stderr)
        return getattr(e, "exit_status", 1)
    except (OSError, RuntimeError) as e:  # a full disk outside the atomic writers (which name their file)
        from elmoc.errors import DiskFullError
        from elmoc.io.atomic import free_bytes, out_of_space

        if not out_of_space(e):
            raise
        where = getattr(e, "filename", None) or "."
        print(f"elmoc {args.command}: error: {DiskFullError(where, free_bytes(where))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C (SIGINT) outside a handler of the command's own
        print(f"elmoc {args.command}: interrupted", file=sys.stderr)
        return EXIT_SIGINT


def _stacks_on_fatal_signals() -> None:
    """A process killed by SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL (a C++ library's
    ``std::terminate``, a crash in a native kernel) writes every thread's Python stack to
    stderr first, so a job log of a week-long run says where it died.  Skipped when stderr
    is not a real file (a caller that captures it in memory) or a caller enabled it already."""
    if faulthandler.is_enabled():
        return
    try:
        faulthandler.enable(all_threads=True)
    except (AttributeError, ValueError, io.UnsupportedOperation):
        pass


if __name__ == "__main__":
    sys.exit(main())
