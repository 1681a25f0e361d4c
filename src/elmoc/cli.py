"""The ``elmoc`` command line.

Every module in :mod:`elmoc.commands` is a subcommand: it defines ``NAME``,
``HELP`` (one line), ``add_arguments(parser)``, ``run(args) -> int`` and ``INPUTS`` /
``OUTPUTS``: the ``args`` attributes that name the files it reads and writes; optionally
``outputs(args)`` (what those outputs write, when it is less than the whole path: ``export
--format checkpoints`` writes two files per run in its folder), ``implicit_inputs(args)`` /
``implicit_outputs(args)`` (``{label: path or paths}``: what it
reads through a spec, a checkpoint, a model directory or a task section, or writes beside its
output), ``RESUMES`` (the commands whose run files it may resume in its output folder) and
``MANIFEST_OWNERS``.  Before ``run`` starts, an output that is, holds or lies inside an input,
or an output folder holding another command's output, is refused in one line
(:func:`_refuse_outputs_among_inputs`, issue 42's one rule).  Command
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
import os
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


# The headings of `elmoc --help`, in order: a command module's GROUP names one (internals when unset).
GROUPS = {
    "use": "use a trained model",
    "train": "prepare data and train",
    "evaluate": "evaluate and report",
    "internals": "internals (the workflow's plumbing)",
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given the command line ``argv``, only the command it names
    gets its arguments: another command's ``add_arguments`` may import torch (``task``: every
    registered task), seconds of start-up that a workflow job such as ``with-gpus`` would pay."""
    from elmoc.commands._options import HelpFormatter

    named = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    modules = list(_command_modules())
    parser = argparse.ArgumentParser(
        prog="elmoc",
        usage="elmoc [-h] [--version] [-v] COMMAND [ARGS ...]",
        description="ELMo-C: contextual word representations with continuous outputs, "
        "and the softmax baselines it replaces.",
        epilog=_grouped_commands(modules) + "\n\n`elmoc COMMAND --help` shows a command's options, defaults "
        "and an example.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"elmoc {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (also after the command)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS)
    every = named not in {m.NAME for m in modules}
    for module in modules:
        p = sub.add_parser(module.NAME, prog=f"elmoc {module.NAME}", description=getattr(module, "DESCRIPTION", module.HELP),
                           epilog=_example(module), formatter_class=HelpFormatter)
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging")
        if every or module.NAME == named:
            module.add_arguments(p)
        p.set_defaults(_run=module.run, _paths=_declared_paths(module, p), _module=module)
    return parser


def _grouped_commands(modules) -> str:
    """The commands under their GROUPS headings, each with its one-line HELP."""
    width = max(len(m.NAME) for m in modules) + 2
    blocks = []
    for group, title in GROUPS.items():
        rows = [f"  {m.NAME.ljust(width)}{m.HELP}" for m in modules if getattr(m, "GROUP", "internals") == group]
        if rows:
            blocks.append(f"{title}:\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def _example(module) -> str | None:
    example = getattr(module, "EXAMPLE", None)
    return f"example:\n  {example}" if example else None


def _declared_paths(module, parser: argparse.ArgumentParser) -> dict[str, list[tuple[str, str]]]:
    """``{"inputs": [(label, dest)], "outputs": [...]}`` of a command module's INPUTS and
    OUTPUTS, labelled as the user types them (``--output``, ``OUTPUT_FILE``)."""
    labels = {a.dest: (a.option_strings[0] if a.option_strings else a.dest.upper()) for a in parser._actions}
    return {kind: [(labels.get(dest, dest), dest) for dest in getattr(module, kind.upper())]
            for kind in ("inputs", "outputs")}


def _refuse_outputs_among_inputs(args: argparse.Namespace) -> None:
    """The one rule of issue 42, before any work: the command's complete input set (its
    declared INPUTS and what ``implicit_inputs(args)`` adds: files read through a spec, a
    checkpoint, a model directory or a task section) and its complete output set (OUTPUTS
    and ``implicit_outputs(args)``, e.g. lm-finetune's work folder); an output that is,
    holds or lies inside an input is refused, and so is an existing output folder that
    holds another command's output (its manifest, or run files that are not the runs the
    command resumes, ``RESUMES``)."""
    from elmoc.io.output_paths import refuse_foreign_output_folder, refuse_outputs_among_inputs

    module, paths = args._module, args._paths
    inputs = {label: getattr(args, dest) for label, dest in paths["inputs"]}
    outputs = {label: getattr(args, dest) for label, dest in paths["outputs"]}
    if not any(v not in (None, "", [], False) for v in outputs.values()):
        return
    if getattr(module, "outputs", None) is not None:  # what the options name is written more precisely
        outputs = module.outputs(args)
    implicit_outputs = getattr(module, "implicit_outputs", None)
    if implicit_outputs is not None:
        outputs.update(implicit_outputs(args))
    implicit_inputs = getattr(module, "implicit_inputs", None)
    if implicit_inputs is not None:
        inputs.update(implicit_inputs(args))
    refuse_outputs_among_inputs(args.command, outputs, inputs)
    runs = getattr(module, "RESUMES", ())
    for label, value in outputs.items():
        for path in ([value] if isinstance(value, (str, os.PathLike)) else value or ()):
            if path:
                refuse_foreign_output_folder(args.command, label, path, getattr(module, "MANIFEST_OWNERS", ()),
                                             run_owner=_run_owner if runs else None, runs=runs)


def _check_device(args: argparse.Namespace) -> None:
    """Every command's ``--device``: ``auto`` made cuda or cpu, a CUDA device without CUDA refused
    in one line before any work (torch is imported only for a device other than cpu)."""
    device = getattr(args, "device", None)
    if device is not None and device != "cpu":
        from elmoc.devices import check_device

        args.device = check_device(device)


def _run_owner(folder):
    from elmoc.commands._paths import run_owner

    return run_owner(folder)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
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
        _check_device(args)
        _refuse_outputs_among_inputs(args)
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
    except KeyboardInterrupt as e:  # Ctrl-C (SIGINT), or SIGTERM where the command turns it into one
        status = getattr(e, "exit_status", EXIT_SIGINT)
        print(f"elmoc {args.command}: {'interrupted' if status == EXIT_SIGINT else 'terminated (SIGTERM)'}",
              file=sys.stderr)
        return status


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
