"""The command line's conventions, in one place (not a command: the name starts with ``_``).

* A file a command writes is ``--output FILE``; a folder it writes is ``--output-dir DIR``
  (:func:`add_output`).  Other spellings a command accepted before (``--out``, ``--out-dir``,
  ``--output`` for a folder) still work, print one deprecation line on stderr and are left out
  of ``--help``.
* ``--device`` is ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (:func:`add_device`); the CLI
  checks it before the command runs (:func:`elmoc.devices.check_device`: one line, exit 1).
* Seconds-or-``auto`` values (:func:`seconds_or_auto`) and the stored precision and layout of
  feature files (:func:`add_storage_arguments`) are read the same way by every command that takes
  them (``--boundaries``: :mod:`elmoc.features.boundaries`).
"""
from __future__ import annotations

import argparse

from elmoc.config_section import Deprecated

FILE, DIR = "file", "dir"
_NEW = {FILE: "--output", DIR: "--output-dir"}
_METAVAR = {FILE: "FILE", DIR: "DIR"}


def add_output(parser: argparse.ArgumentParser, kind: str, help: str, old: tuple[str, ...] = (),
               required: bool = True, default=None) -> argparse.Action:
    """``--output FILE`` (``kind`` FILE) or ``--output-dir DIR`` (``kind`` DIR), stored as
    ``args.output`` / ``args.output_dir``; ``old`` spellings still accepted with a warning."""
    new = _NEW[kind]
    return parser.add_argument(new, *old, dest=new[2:].replace("-", "_"), action=Deprecated, deprecated=old,
                               required=required, default=default, metavar=_METAVAR[kind], help=help)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help (unless the text gives it or it is None/False), the
    description wrapped but its indented lines (an example's command line) kept as written, and
    no deprecated spelling shown."""

    def _fill_text(self, text, width, indent):
        lines = []
        for line in text.splitlines():
            lines.append(indent + line if line.startswith("  ") else super()._fill_text(line, width, indent))
        return "\n".join(lines)

    def _format_action_invocation(self, action):
        deprecated = getattr(action, "deprecated", ())
        if not deprecated:
            return super()._format_action_invocation(action)
        shown = argparse.Action([s for s in action.option_strings if s not in deprecated], action.dest,
                                nargs=action.nargs, metavar=action.metavar)
        return super()._format_action_invocation(shown)

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" in text or "default" in text.lower() or action.default in (None, False, argparse.SUPPRESS):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + " (default: %(default)s)"
        return text


def add_device(parser: argparse.ArgumentParser, default: str | None = "cpu", what: str = "") -> None:
    """``--device``: cpu, cuda, cuda:N or auto (cuda when a GPU is visible)."""
    parser.add_argument("--device", default=default,
                        help=f"cpu, cuda, cuda:N or auto (cuda when a GPU is visible){what}")


def seconds_or_auto(text: str) -> float | None:
    """``auto`` -> None; seconds >= 0 -> float; anything else is a usage error."""
    if text == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 or 'auto', got {text!r}")
    return value


def add_storage_arguments(parser: argparse.ArgumentParser, layout: bool) -> None:
    """``--dtype`` (extract, embed) and ``--layout`` (extract); defaults None: float32, allennlp."""
    parser.add_argument("--dtype", choices=("float32", "float16"), default=None,
                        help="stored precision (default float32); float16 halves the file, the tasks compute in float32")
    if layout:
        parser.add_argument("--layout", choices=("allennlp", "contiguous"), default=None,
                            help="allennlp (default): dataset str(i) per sentence, as `allennlp elmo`; contiguous: one "
                            "dataset `features` [layers, total_tokens, dim] + `offsets`, which the tasks read without "
                            "an HDF5 call per sentence (docs/downstream.md; `elmoc convert-features` converts)")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of an LM training run (``elmoc train``, and ``elmoc distill`` for its student)."""
    from elmoc.directions import RUNS

    parser.add_argument("--spec", required=True, help="LM spec YAML (results/demo/lm/<variant>/spec.yaml)")
    parser.add_argument("--direction", choices=RUNS, required=True,
                        help="forward or backward: one direction of a spec with train.directions: separate "
                             "(the default); joint: both at once, for a spec with train.directions: joint; "
                             "masked: the one model of a spec with train.objective: masked_lm")
    add_output(parser, DIR, "where checkpoint.pt, model.pt, heldout.json, train_log.jsonl go")
    add_device(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--no-resume", action="store_true",
                        help="delete an existing checkpoint.pt and start from scratch")
    parser.add_argument("--stale-checkpoint", choices=["refuse", "set-aside"], default="refuse",
                        help="a checkpoint.pt of another spec, direction or vocabulary: refuse it with one line "
                             "(default), or keep it as checkpoint.<config hash>.pt and start afresh (the workflow)")
    parser.add_argument("--max-steps", type=int, default=None, help="override train.max_steps")
    parser.add_argument("--stop-margin", type=seconds_or_auto, default=None, metavar="SECONDS|auto",
                        help="inside a SLURM job, stop and save this many seconds before its end time (default "
                             "auto: the trainer's, from its longest checkpoint write; the workflow: "
                             "resources.pretrain.stop_margin_s)")
