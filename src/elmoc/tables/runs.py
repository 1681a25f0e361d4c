"""Result files -> typed runs: what every table, figure and the summary read.

* :func:`read_lm_runs`: ``results/lm/{variant}/{direction}/heldout.json`` (+ ``train_log.jsonl``
  and the variant's ``spec.yaml`` beside them) -> :class:`LMRun` objects, and the per-variant
  sums of a bi-LM (:func:`variant_params`, :func:`variant_seconds`, ...);
* :func:`read_task_runs`: ``results/tasks/{task}/{variant}/seed{seed}.json`` (or majority
  baselines) -> the long table, one row per score.

Both record types are defined and read strictly in :mod:`elmoc.records`: a missing
required field or a field of the wrong type is one error naming file and field.  Nothing
here formats a cell; the layouts (:mod:`elmoc.tables.models`, :mod:`elmoc.tables.speed`,
:mod:`elmoc.tables.flat`) do.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from elmoc.config import load_yaml
from elmoc.errors import InputFileError
from elmoc.records import HeldoutRecord, TaskRecord, TrainLog, TrainPoint


# --- pretraining runs -------------------------------------------------------------------


def read_spec_file(path: Path) -> dict[str, Any] | None:
    """A resolved LM spec (``results/lm/{variant}/spec.yaml``), or ``None`` when absent;
    invalid YAML or a non-mapping is an :class:`InputFileError` naming the file
    (:func:`elmoc.config.load_yaml`)."""
    return load_yaml(path, mapping="an LM spec") if path.exists() else None


@dataclass(frozen=True)
class LMSetting:
    """What the tables say of a variant's setting, from its ``spec.yaml`` (``elmoc spec``) beside
    the run folders; each ``None`` where the spec (or the file) lacks it."""

    epochs: int | None = None
    batch_size: int | None = None
    cell_size: int | None = None
    projection_size: int | None = None
    description: str | None = None  # the spec's one line: what the variant is

    @classmethod
    def from_yaml(cls, path: Path) -> "LMSetting":
        spec = read_spec_file(path)
        if spec is None:
            return cls()
        train, encoder = spec.get("train") or {}, spec.get("encoder") or {}
        return cls(epochs=train.get("epochs"), batch_size=train.get("batch_size"),
                   cell_size=encoder.get("cell_size"), projection_size=encoder.get("projection_size"),
                   description=spec.get("description"))


@dataclass
class LMRun:
    """One trained direction (or a joint bi-LM's one run, direction ``"joint"``, whose
    heldout values, tokens, time and parameters cover both directions): its
    :class:`~elmoc.records.HeldoutRecord` plus its train log and the variant's setting."""

    variant: str
    record: HeldoutRecord
    log: TrainLog = field(default_factory=TrainLog)
    setting: LMSetting = field(default_factory=LMSetting)

    @property
    def direction(self) -> str:
        return self.record.direction

    @property
    def metric(self) -> str | None:
        return self.record.metric

    @property
    def seconds(self) -> float | None:
        """Wall time of training (the trainer's own count, continuous across resumes)."""
        return self.record.seconds

    @property
    def processes(self) -> int:
        """Data-parallel processes (one per GPU) of the run; 1 where heldout.json predates the key."""
        return self.record.processes

    @property
    def tokens(self) -> int | None:
        return self.record.tokens

    @property
    def params(self) -> int | None:
        return self.record.trainable_parameters

    def tokens_per_second(self) -> float | None:
        """Training throughput from the run's log: the last ``train`` record's
        ``tokens_per_s`` (tokens over time since the run started or resumed); without a
        log, ``heldout.json``'s tokens / seconds."""
        train = [r for r in self.log.train if r.tokens_per_s]
        if train:
            return train[-1].tokens_per_s
        if self.tokens and self.seconds:
            return self.tokens / self.seconds
        return None

    def curve(self) -> list[tuple[int, float, float]]:
        """Heldout points ``(tokens, seconds since start, value)`` in training order.

        The wall time of a point is its own ``seconds`` field when the trainer wrote
        one, else the elapsed time of the nearest train record at or before its step
        (``seconds`` field, or ``tokens / tokens_per_s``); the final point uses the
        total training time.
        """
        history = self.record.history or self.log.heldout

        def elapsed(rec: TrainPoint) -> float | None:
            if rec.seconds is not None:
                return rec.seconds
            if rec.tokens_per_s and rec.tokens is not None:
                return rec.tokens / rec.tokens_per_s
            return None

        points = []
        for h in history:
            if h.value is None or h.tokens is None:
                continue
            step = h.step or 0
            if h.seconds is not None:
                t = h.seconds
            elif h.tag == "before" or step == 0:
                t = 0.0
            elif h.tag == "after" and self.seconds is not None:
                t = self.seconds
            else:
                prior = [elapsed(r) for r in self.log.train if (r.step or 0) <= step]
                prior = [p for p in prior if p is not None]
                t = prior[-1] if prior else float("nan")
            points.append((h.tokens, t, h.value))
        return points


def read_lm_runs(heldout_paths: Iterable[str | Path]) -> list[LMRun]:
    """``.../{variant}/{direction}/heldout.json`` -> runs (log and ``../spec.yaml`` if present)."""
    runs = []
    for path in map(Path, heldout_paths):
        record = HeldoutRecord.from_json(path)
        runs.append(LMRun(variant=path.parent.parent.name, record=record,
                          log=TrainLog.from_jsonl(path.with_name("train_log.jsonl")),
                          setting=LMSetting.from_yaml(path.parent.parent / "spec.yaml")))
        kinds = {r.direction == "joint" for r in runs if r.variant == runs[-1].variant}
        if len(kinds) > 1:  # adding a joint run's time/params to a direction's would count one bi-LM twice
            raise InputFileError(path, f"variant {runs[-1].variant!r} has both a joint run and separate-direction "
                                 "runs among the heldout.json files given; pass the kind its spec trains "
                                 "(train.directions) and remove the other's results")
    return runs


def by_variant(runs: Iterable[LMRun]) -> dict[str, list[LMRun]]:
    out: dict[str, list[LMRun]] = {}
    for r in runs:
        out.setdefault(r.variant, []).append(r)
    return out


def variant_params(runs: list[LMRun]) -> int | None:
    """Trainable parameters of a bi-LM: the directions' counts added (as the paper's 76M);
    a joint bi-LM's one count (its shared input and output layer once)."""
    counts = [r.params for r in runs]
    return None if not counts or None in counts else int(sum(counts))


def variant_tokens_per_second(runs: list[LMRun]) -> float | None:
    """Tokens of all directions over the time they took: sum(tokens) / sum(tokens / speed)."""
    tokens, seconds = 0.0, 0.0
    for r in runs:
        speed = r.tokens_per_second()
        if not r.tokens or not speed:
            return None
        tokens += r.tokens
        seconds += r.tokens / speed
    return tokens / seconds if seconds else None


def variant_seconds(runs: list[LMRun]) -> float | None:
    """Device time of a bi-LM's training, as the paper's "days x GPUs": each run's wall time x
    its processes (one per GPU), both directions' runs added; a joint bi-LM's one run (on
    all the GPUs). On one CPU process per run it is the wall time."""
    secs = [r.seconds for r in runs]
    return None if not secs or None in secs else float(sum(r.seconds * r.processes for r in runs))


def variant_heldout(runs: list[LMRun]) -> tuple[str | None, float | None]:
    """(metric, mean of the directions' final heldout values; a joint bi-LM's combined value)."""
    vals = [r.record.after for r in runs if r.record.after is not None]
    metric = next((r.metric for r in runs if r.metric), None)
    return metric, (sum(vals) / len(vals) if vals else None)


def variant_constant_baseline(runs: list[LMRun]) -> float | None:
    """The mean of the directions' constant-prediction baselines (``heldout.json``'s
    ``constant_baseline``: the mean cosine of the best constant prediction on the same heldout
    tokens, what a CONT model must beat); None where a run has none (not a cosine metric)."""
    vals = [r.record.constant_baseline for r in runs]
    return None if not vals or None in vals else sum(vals) / len(vals)


# --- downstream runs --------------------------------------------------------------------


TASK_COLUMNS = ["task", "variant", "seed", "metric", "dev", "test", "status", "scale", "seconds", "threads", "path"]


def read_task_runs(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Long table, one row per result record (:class:`~elmoc.records.TaskRecord`):
    ``task, variant, seed, metric, dev, test, status, scale, seconds, threads, path``, plus
    one row per extra score of a record (SRL's official CoNLL-2005 F1) with ``task``
    ``<task>:<score name>`` (e.g. ``srl:conll05-f1``), so each score is its own column
    of the tables, named for what it is."""
    rows = []
    for path in paths:
        r = TaskRecord.from_json(path)
        row = {"task": r.task, "variant": r.variant, "seed": r.seed, "metric": r.metric, "dev": r.dev,
               "test": r.test, "status": r.status, "scale": r.scale, "seconds": r.seconds, "threads": r.threads,
               "path": r.path}
        rows.append(row)
        for name, extra in r.extra_scores.items():
            rows.append({**row, "task": extra_task(r.task, name), "metric": name, "dev": extra.dev,
                         "test": extra.test})
    return pd.DataFrame(rows, columns=TASK_COLUMNS)


def extra_task(task: str, score: str) -> str:
    """The long table's task key of an extra score: ``srl`` + ``conll05-f1`` -> ``srl:conll05-f1``."""
    return f"{task}:{score}"
