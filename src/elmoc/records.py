"""The result records the pipeline writes and the tables, figures and summary read, each
defined once (here, below every writer and reader) and read strictly.

* :class:`TaskRecord`: a downstream result, ``results/tasks/{task}/{variant}/seed{seed}.json``
  (``elmoc task``) or a majority baseline ``results/baselines/{task}/majority.json``
  (``elmoc majority-baseline``);
* :class:`HeldoutRecord`: a pretraining run's ``results/lm/{variant}/{direction}/heldout.json``
  (``elmoc train``, or the released ELMo's export);
* :class:`TrainLog`: the ``train_log.jsonl`` beside it, its ``train`` and ``heldout`` events
  (:class:`TrainPoint`, :class:`HeldoutPoint`); a missing log is an empty one.

``from_json(path)`` checks every field it uses: a required field that is missing, or
any field of the wrong type (``"test": "high"``, ``"seed": [1]``, ``"after": "bad"``),
raises :class:`~elmoc.errors.InputFileError` naming the file, the field, what was
expected and what was found, so the table commands and ``elmoc summary`` print one line
instead of failing later inside pandas.  Optional fields are listed with their default
in each class; other keys of the file (history, trainer settings, ...) are kept in
``data`` untouched.  Numbers are ints or floats, never booleans.  A downstream score
(``test``, ``dev`` and those of ``extra_scores``) is a fraction in [0, 1], as every task
metric writes it (the tables show it x 100): NaN, an infinity or ``7.5`` is refused in
one line naming the file and the field, never averaged into a table cell or dropped from it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elmoc.directions import DIRECTIONS
from elmoc.errors import InputFileError

SCALES = ("demo", "cpu", "full")
_MISSING = object()


def read_json(path: str | Path) -> dict:
    """A JSON object from ``path`` (InputFileError when absent, invalid or not an object)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFileError(path, "result file not found") from None
    except json.JSONDecodeError as e:
        raise InputFileError(path, f"invalid JSON: {e.msg}", e.lineno) from None
    except UnicodeDecodeError:
        raise InputFileError(path, "not UTF-8 text; expected a JSON result file") from None
    if not isinstance(data, dict):
        raise InputFileError(path, "expected a JSON object")
    return data


def _is(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "score":
        return _is(value, "number") and math.isfinite(value) and 0 <= value <= 1
    if kind == "list":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    raise AssertionError(kind)


_WORDS = {"str": "a string", "int": "an integer", "number": "a number", "list": "a list", "object": "an object",
          "score": "a score: a finite fraction in [0, 1] (the tables show it x 100)"}


def _get(path: Path, data: dict, key: str, kind: str, *, nullable: bool = False, default: Any = _MISSING,
         where: str = "", line: int | None = None) -> Any:
    """``data[key]`` checked to be of ``kind`` (or null when ``nullable``); ``default`` when
    absent, an error when absent and no default is given."""
    name = f"{where}{key}"
    if key not in data:
        if default is _MISSING:
            raise InputFileError(path, f"result record lacks the required field {name!r} ({_WORDS[kind]}); "
                                 "re-run the step that writes this file", line)
        return default
    value = data[key]
    if value is None and nullable:
        return None
    if not _is(value, kind):
        expected = _WORDS[kind] + (" or null" if nullable else "")
        raise InputFileError(path, f"field {name!r} must be {expected}, got {value!r} ({type(value).__name__}); "
                             "fix the file or re-run the step that writes it", line)
    return float(value) if kind in ("number", "score") else value


@dataclass(frozen=True)
class ExtraScore:
    """A score reported beside a task's headline metric (SRL's official CoNLL-2005 F1)."""

    label: str
    dev: float | None
    test: float | None


@dataclass(frozen=True)
class TaskRecord:
    """One downstream result (or majority baseline).

    Required: ``task``, ``variant`` (str), ``seed`` (int), ``metric`` (str), ``scale``
    (demo | cpu | full), ``status`` (str; "ok" or why the run could not happen), ``test``
    (score or null: a finite fraction in [0, 1]).  Optional: ``dev`` (score or null; None), ``seconds`` (number or
    null; None), ``threads`` (int or null; None), ``metric_label`` (str; the metric name),
    ``extra_scores`` (``{name: {"label": str, "dev": score|null, "test": score|null}}``; {}).
    """

    path: str
    task: str
    variant: str
    seed: int
    metric: str
    scale: str
    status: str
    test: float | None
    dev: float | None = None
    seconds: float | None = None
    threads: int | None = None
    metric_label: str = ""
    extra_scores: dict[str, ExtraScore] = field(default_factory=dict)

    @classmethod
    def from_json(cls, path: str | Path) -> "TaskRecord":
        return cls.from_dict(read_json(path), path)

    @classmethod
    def from_dict(cls, data: dict, path: str | Path) -> "TaskRecord":
        """The record of ``data`` (the JSON object of ``path``), checked as :meth:`from_json` does."""
        path = Path(path)
        task, variant = _get(path, data, "task", "str"), _get(path, data, "variant", "str")
        seed, metric = _get(path, data, "seed", "int"), _get(path, data, "metric", "str")
        scale = _get(path, data, "scale", "str")
        if scale not in SCALES:
            raise InputFileError(path, f"field 'scale' must be one of {', '.join(SCALES)}, got {scale!r}")
        extras = {}
        for name, value in _get(path, data, "extra_scores", "object", default={}).items():
            where = f"extra_scores.{name}."
            if not isinstance(value, dict):
                raise InputFileError(path, f"field 'extra_scores.{name}' must be an object with label, dev, test; "
                                     f"got {value!r}")
            extras[name] = ExtraScore(_get(path, value, "label", "str", where=where),
                                      _get(path, value, "dev", "score", nullable=True, default=None, where=where),
                                      _get(path, value, "test", "score", nullable=True, where=where))
        return cls(
            path=str(path), task=task, variant=variant, seed=seed, metric=metric, scale=scale,
            status=_get(path, data, "status", "str"), test=_get(path, data, "test", "score", nullable=True),
            dev=_get(path, data, "dev", "score", nullable=True, default=None),
            seconds=_get(path, data, "seconds", "number", nullable=True, default=None),
            threads=_get(path, data, "threads", "int", nullable=True, default=None),
            metric_label=_get(path, data, "metric_label", "str", default=metric), extra_scores=extras)


def write_task_record(path: str | Path, data: dict) -> TaskRecord:
    """Write a downstream result (``elmoc task``) or majority baseline (``elmoc majority-baseline``)
    to ``path`` as indented JSON, atomically, after checking it as :class:`TaskRecord` reads it:
    the writers and the readers share this one definition, so a record the tables would refuse
    (no ``scale``, a string ``test``) fails where it is written.  Other keys are kept as given."""
    from elmoc.io.atomic import atomic_file

    record = TaskRecord.from_dict(data, path)
    with atomic_file(path) as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    return record


@dataclass(frozen=True)
class HeldoutPoint:
    """One heldout evaluation: an entry of ``heldout.json``'s ``history`` or a ``heldout`` event
    of ``train_log.jsonl``.  All optional: ``value``, ``seconds`` (number or null), ``tokens``,
    ``step`` (int or null), ``tag`` (str or null: ``before``, ``step<N>``, ``after``)."""

    value: float | None = None
    tokens: int | None = None
    step: int | None = None
    seconds: float | None = None
    tag: str | None = None

    @classmethod
    def from_dict(cls, entry: dict, path: Path, where: str = "", line: int | None = None) -> "HeldoutPoint":
        def get(key: str, kind: str) -> Any:
            return _get(path, entry, key, kind, nullable=True, default=None, where=where, line=line)

        return cls(value=get("value", "number"), tokens=get("tokens", "int"), step=get("step", "int"),
                   seconds=get("seconds", "number"), tag=get("tag", "str"))


@dataclass(frozen=True)
class TrainPoint:
    """A ``train`` event of ``train_log.jsonl``: ``step``, ``tokens`` (int or null), ``loss``,
    ``tokens_per_s`` (tokens over time since the run started or resumed) and ``seconds``
    (wall time of training so far; absent in older logs), numbers or null; all optional."""

    step: int | None = None
    tokens: int | None = None
    loss: float | None = None
    tokens_per_s: float | None = None
    seconds: float | None = None

    @classmethod
    def from_dict(cls, entry: dict, path: Path, line: int | None = None) -> "TrainPoint":
        def get(key: str, kind: str) -> Any:
            return _get(path, entry, key, kind, nullable=True, default=None, line=line)

        return cls(step=get("step", "int"), tokens=get("tokens", "int"), loss=get("loss", "number"),
                   tokens_per_s=get("tokens_per_s", "number"), seconds=get("seconds", "number"))


@dataclass(frozen=True)
class TrainLog:
    """The ``train`` and ``heldout`` events of a ``train_log.jsonl``, in file order (other events
    are skipped); each line must be a JSON object, each field of the right type."""

    train: list[TrainPoint] = field(default_factory=list)
    heldout: list[HeldoutPoint] = field(default_factory=list)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> "TrainLog":
        """The log at ``path``; a missing file is an empty log."""
        path = Path(path)
        if not path.exists():
            return cls()
        log = cls()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputFileError(path, f"invalid JSON line: {e.msg}", i) from None
            if not isinstance(entry, dict):
                raise InputFileError(path, f"expected a JSON object per line, got {entry!r}", i)
            event = entry.get("event")
            if event == "train":
                log.train.append(TrainPoint.from_dict(entry, path, i))
            elif event == "heldout":
                log.heldout.append(HeldoutPoint.from_dict(entry, path, line=i))
        return log


@dataclass(frozen=True)
class HeldoutRecord:
    """One pretraining run's ``heldout.json``.

    Required: ``metric`` (str or null), ``after`` (number or null: the final heldout
    value), ``steps`` (int), ``tokens`` (int or null), ``seconds`` (number or null).
    Optional: ``direction`` (str; the folder name), ``before`` and ``constant_baseline``
    (number or null; None), ``trainable_parameters`` and ``threads`` (int or null; None),
    ``processes`` (int; 1, for files that predate it), ``device`` (str; "cpu"),
    ``history`` (list of :class:`HeldoutPoint` objects; []), ``forward``/``backward`` (a joint bi-LM's
    per-direction ``{"after": number|null, ...}``; None).  ``data`` is the whole file.
    """

    path: str
    direction: str
    metric: str | None
    after: float | None
    steps: int
    tokens: int | None
    seconds: float | None
    before: float | None = None
    constant_baseline: float | None = None
    trainable_parameters: int | None = None
    threads: int | None = None
    processes: int = 1
    device: str = "cpu"
    history: list[HeldoutPoint] = field(default_factory=list)
    directions_after: dict[str, float | None] = field(default_factory=dict)
    data: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, path: str | Path) -> "HeldoutRecord":
        return cls.from_dict(read_json(path), path)

    @classmethod
    def from_dict(cls, data: dict, path: str | Path) -> "HeldoutRecord":
        """Check ``data`` (the content of ``path``) as :meth:`from_json` reads it."""
        path = Path(path)
        history = []
        for i, entry in enumerate(_get(path, data, "history", "list", default=[])):
            if not isinstance(entry, dict):
                raise InputFileError(path, f"field 'history[{i}]' must be an object, got {entry!r}")
            history.append(HeldoutPoint.from_dict(entry, path, where=f"history[{i}]."))
        per_direction = {}
        for name in DIRECTIONS:
            part = _get(path, data, name, "object", nullable=True, default=None)
            if part is not None:
                per_direction[name] = _get(path, part, "after", "number", nullable=True, default=None,
                                           where=f"{name}.")
        processes = _get(path, data, "processes", "int", nullable=True, default=1)
        return cls(
            path=str(path), direction=_get(path, data, "direction", "str", default=path.parent.name),
            metric=_get(path, data, "metric", "str", nullable=True),
            after=_get(path, data, "after", "number", nullable=True),
            steps=_get(path, data, "steps", "int"), tokens=_get(path, data, "tokens", "int", nullable=True),
            seconds=_get(path, data, "seconds", "number", nullable=True),
            before=_get(path, data, "before", "number", nullable=True, default=None),
            constant_baseline=_get(path, data, "constant_baseline", "number", nullable=True, default=None),
            trainable_parameters=_get(path, data, "trainable_parameters", "int", nullable=True, default=None),
            threads=_get(path, data, "threads", "int", nullable=True, default=None),
            processes=processes or 1, device=_get(path, data, "device", "str", default="cpu"),
            history=history, directions_after=per_direction, data=data)


def write_heldout_record(path: str | Path, data: dict) -> HeldoutRecord:
    """Write a pretraining run's ``heldout.json`` (``elmoc train``) atomically, after checking
    it as :class:`HeldoutRecord` reads it: the trainer and the tables share this one
    definition, so a summary the tables would refuse fails where it is written."""
    from elmoc.io.atomic import atomic_file

    record = HeldoutRecord.from_dict(data, path)
    with atomic_file(path) as f:
        f.write(json.dumps(data, indent=2) + "\n")
    return record
