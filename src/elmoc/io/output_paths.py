"""An output never destroys what the command did not write (issue 30, items 1, 2 and 7).

Every command checks its paths here before any work starts:

* :func:`refuse_outputs_among_inputs`: an output path that is, holds or lies inside one of
  the command's inputs (same inode, or the same resolved path; issue 42) is refused, so that
  ``elmoc embed --model M --top in.txt in.txt`` cannot overwrite the sentences nor
  ``lm-finetune --lm-dir V --output V/model`` the variant's runs.  :mod:`elmoc.cli` calls it
  before every command with the command's complete input set (declared and implicit).
* :func:`refuse_foreign_output_folder`: an existing output folder holding another command's
  output (its :data:`MANIFEST`) or run files the command does not resume.
* :func:`check_output_directory`: a command that writes a whole folder (``export``,
  ``compress``, ``fetch``, ``corpus``) replaces it only when it is absent, empty, or
  an earlier output of the *same* command, recognised by the :data:`MANIFEST` file
  that :func:`output_directory` writes into every folder it makes (with the files it wrote:
  a file added since is named in a warning before the folder is replaced); a folder that
  holds one of the command's inputs, or the current directory, is refused too.
* :func:`remove_stale_temps`: the temporaries of :mod:`elmoc.io.atomic` that a
  killed run (SIGKILL, a node crash) left beside an output, removed by the next run.
  Only names of the atomic helpers' pattern for that one output are candidates, and
  only those no running process holds (each writer keeps an ``flock`` on its
  temporary while it writes), so a concurrent run's work in progress is never touched.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Union

from elmoc.errors import OutputError
from elmoc.io.atomic import Terminated, sigterm_as_interrupt  # re-exported: the commands import them from here
from elmoc.io.atomic import atomic_directory

try:  # POSIX; elsewhere no temporary counts as held and none is removed
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

log = logging.getLogger(__name__)

MANIFEST = ".elmoc-output.json"
"""Written into every folder made by :func:`output_directory`: ``{"command": NAME}``."""

PathLike = Union[str, "os.PathLike[str]"]
Paths = Mapping[str, Union[PathLike, Iterable[PathLike], None]]


def _listed(paths: Paths) -> list[tuple[str, Path]]:
    """``{label: path | [paths] | None}`` -> ``[(label, Path)]`` without the Nones."""
    out = []
    for label, value in paths.items():
        if value is None or value is False:
            continue
        values = [value] if isinstance(value, (str, os.PathLike)) else list(value)
        out.extend((label, Path(v)) for v in values if v not in (None, ""))
    return out


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether ``a`` and ``b`` name one file: the same inode (hard links, symlinks), or,
    when either does not exist yet, the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (after resolving both)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def refuse_outputs_among_inputs(command: str, outputs: Paths, inputs: Paths) -> None:
    """Raise :class:`OutputError` when an output is, holds or lies inside one of the
    command's inputs (issue 42's one rule): the same file (same inode, or the same
    resolved path: symlinks and respellings alike), a folder holding an input (``train
    --output-dir`` around its ``--spec``, ``lm-finetune``'s work folder around the variant's
    runs), or a path inside an input folder (``vocab --corpus DIR --out DIR/shard_000.txt``,
    ``predict --task-model TM --output TM/lm/forward.pt``): the command reads that folder.

    Args:
        command: the subcommand's name, for the message.
        outputs / inputs: ``{option: path, list of paths or None}``, e.g.
            ``{"--output": args.output}``; None entries are skipped.
    """
    listed_inputs = _listed(inputs)
    for out_label, out in _listed(outputs):
        for in_label, inp in listed_inputs:
            if same_file(out, inp):
                raise OutputError(out, f"{out_label} is the same file as the input {in_label} ({inp}); "
                                  f"`elmoc {command}` would overwrite its own input: write the output elsewhere")
            if inp.is_dir() and _inside(out, inp):
                what = "a file in" if out.is_file() and out.resolve().parent == inp.resolve() else "inside"
                raise OutputError(out, f"{out_label} is {what} the input folder {in_label} ({inp}); "
                                  f"`elmoc {command}` would overwrite its own input: write the output elsewhere")
            if _inside(inp, out):
                raise OutputError(out, f"{out_label} holds the input {in_label} ({inp}); `elmoc {command}` writes "
                                  "there and would overwrite or delete it: write the output elsewhere")


RUN_FILES = ("model.pt", "checkpoint.pt")
"""A training run's files (``elmoc train``, ``distill``, a task run): an output folder holding one
belongs to the command that wrote it."""


def refuse_foreign_output_folder(command: str, label: str, path: PathLike, owners: Iterable[str] = (),
                                 run_owner=None, runs: Iterable[str] = ()) -> None:
    """Refuse an existing output folder that holds another command's output: a
    :data:`MANIFEST` naming a command outside ``{command, *owners}``, or run files
    (:data:`RUN_FILES`) that ``run_owner(folder)`` does not attribute to one of ``runs``
    (the commands whose runs ``command`` resumes in place; none: any run file is foreign)."""
    path = Path(path)
    if not path.is_dir():
        return
    owner = output_owner(path) if (path / MANIFEST).exists() else None
    if (path / MANIFEST).exists() and owner not in {command, *owners}:
        what = f"an output of `elmoc {owner}`" if owner else f"an output of another command ({MANIFEST})"
        raise OutputError(path, f"{label} is {what}; `elmoc {command}` would write into it and overwrite what it "
                          "holds: give a new folder")
    held = [name for name in RUN_FILES if (path / name).is_file()]
    if not held:
        return
    runs = tuple(runs)
    found = run_owner(path) if (run_owner is not None and runs) else None
    if found in runs or (runs and found is None):  # its own run, or unreadable: the resume names what is wrong
        return
    whose = f"`elmoc {found}`'s" if found else "a training run's"
    raise OutputError(path, f"{label} holds {whose} {' and '.join(held)}; `elmoc {command}` would overwrite them: "
                      "give a new folder (nothing there was changed)")


def check_output_directory(path: PathLike, command: str, inputs: Paths | None = None) -> None:
    """Refuse a folder ``command`` must not replace (before any work starts).

    Accepted: an absent path, an empty folder, or a folder whose :data:`MANIFEST` says
    ``command`` wrote it.  Refused, each in one line: a path that is a file; a non-empty
    folder without that manifest (a training run, the user's notes, another command's
    output); a folder that is, or holds, the current directory or one of ``inputs``
    (``{option: path or paths}``), which replacing it would delete.
    """
    path = Path(path)
    if _inside(Path.cwd(), path):
        raise OutputError(path, f"the output folder is (or holds) the current directory; `elmoc {command}` replaces "
                          "its output folder whole: give a new folder, e.g. out/")
    for label, inp in _listed(inputs or {}):
        if _inside(inp, path):
            raise OutputError(path, f"the output folder holds the input {label} ({inp}), which replacing it would "
                              f"delete: give `elmoc {command}` another output folder")
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir() or path.is_symlink():
        raise OutputError(path, f"exists and is not a folder; `elmoc {command}` writes a folder here: remove it or "
                          "give another path")
    if not any(path.iterdir()):
        return
    owner = output_owner(path)
    if owner == command:
        return
    what = (f"an output of `elmoc {owner}`" if owner else
            f"not an output of `elmoc {command}` (no {MANIFEST} naming it)")
    raise OutputError(path, f"the folder exists, is not empty and is {what}; `elmoc {command}` would replace it "
                      "whole: give a new or empty folder, or remove this one yourself if nothing in it is needed")


def output_owner(path: PathLike) -> str | None:
    """The command named by the :data:`MANIFEST` in folder ``path`` (None: no readable manifest)."""
    try:
        recorded = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    command = recorded.get("command") if isinstance(recorded, dict) else None
    return command if isinstance(command, str) else None


@contextlib.contextmanager
def output_directory(path: PathLike, command: str, inputs: Paths | None = None) -> Iterator[Path]:
    """:func:`elmoc.io.atomic.atomic_directory` for a command's output folder: checks the
    folder (:func:`check_output_directory`, again at write time), removes temporaries of
    earlier killed runs, yields the temp folder and writes :data:`MANIFEST` into it last."""
    check_output_directory(path, command, inputs)
    for added in files_added(path):
        log.warning("%s: not written by `elmoc %s` (added to its earlier output); replacing the folder deletes "
                    "it: stop now (Ctrl-C) and move it elsewhere to keep it", Path(path) / added, command)
    remove_stale_temps(path, directories=True)
    with atomic_directory(path) as tmp:
        yield tmp
        written = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if not p.is_dir())
        (tmp / MANIFEST).write_text(json.dumps({"command": command, "files": written}) + "\n", encoding="utf-8")


def files_added(path: PathLike) -> list[str]:
    """Files in the earlier output folder ``path`` that its :data:`MANIFEST` does not list (the
    user's additions, which replacing the folder deletes); none when the manifest lists no files."""
    path = Path(path)
    try:
        recorded = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    listed = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(listed, list):
        return []
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                  if not p.is_dir() and p.name != MANIFEST and p.relative_to(path).as_posix() not in listed)


# ---------------------------------------------------------------- temporaries of killed runs


@contextlib.contextmanager
def _claimed(path: Path) -> Iterator[bool]:
    """Whether no process holds ``path`` (file or folder; False when that cannot be told);
    when True, this process holds it until the block ends, so that a writer that created
    it an instant ago cannot take it while it is removed (:func:`elmoc.io.atomic.held_temp`
    then tries another name)."""
    if fcntl is None:
        yield False
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free = True
        except OSError:
            free = False
        yield free
    finally:
        os.close(fd)  # closing drops the lock


def temp_patterns(path: PathLike, directories: bool = False) -> list[str]:
    """Globs, in ``path``'s folder, of the temporaries :mod:`elmoc.io.atomic` makes for ``path``:
    ``.STEM.*.tmpSUFFIX`` (atomic_path / atomic_file) or, with ``directories``,
    ``.NAME.*.tmp`` and ``.NAME.*.old`` (atomic_directory)."""
    p = Path(path)
    if directories:
        return [f".{p.name}.*.tmp", f".{p.name}.*.old"]
    return [f".{p.stem}.*.tmp{p.suffix}"]


def remove_stale_temps(path: PathLike, directories: bool = False, companions: tuple[str, ...] = (),
                       patterns: Iterable[str] | None = None) -> list[Path]:
    """Delete the temporaries that killed writes of ``path`` left beside it; returns them.

    Args:
        directories: ``path`` is written by ``atomic_directory`` (temp and set-aside folders).
        companions: suffixes of files a writer keeps beside its temporary (``.index`` of
            :func:`elmoc.features.store.write_features`): removed with it, or alone when
            their temporary is gone.
        patterns: other globs in ``path``'s folder (instead of :func:`temp_patterns`).
    """
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        return []
    removed = []
    for pattern in (list(patterns) if patterns is not None else temp_patterns(path, directories)):
        for tmp in sorted(folder.glob(pattern)):
            if tmp.is_symlink():
                continue
            with _claimed(tmp) as free:
                if not free:
                    continue
                if directories and tmp.name.endswith(".old") and (tmp / path.name).is_dir() and not path.exists():
                    os.replace(tmp / path.name, path)  # killed between atomic_directory's two renames: the
                    # previous output comes back (the new one, complete or not, is the .tmp folder beside it)
                if tmp.is_dir():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink(missing_ok=True)
            removed.append(tmp)
            for suffix in companions:
                companion = Path(f"{tmp}{suffix}")
                if companion.is_file():
                    companion.unlink(missing_ok=True)
                    removed.append(companion)
        for suffix in companions:
            for companion in sorted(folder.glob(pattern + suffix)):
                if companion.is_file() and not companion.with_name(companion.name[: -len(suffix)]).exists():
                    companion.unlink(missing_ok=True)
                    removed.append(companion)
    return removed


__all__ = ["MANIFEST", "RUN_FILES", "OutputError", "Terminated", "check_output_directory",
           "output_directory", "output_owner", "refuse_foreign_output_folder", "refuse_outputs_among_inputs",
           "remove_stale_temps", "same_file", "sigterm_as_interrupt", "temp_patterns"]
