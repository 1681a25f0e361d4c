"""What a training run records in its output folder besides its weights.

``train_log.jsonl`` (one JSON record per log step and heldout evaluation; cut back to
the checkpoint's length on resume, so it reads as one uninterrupted run), the final
``heldout.json`` summary, and the process-layout ``segments`` (the checkpoint,
``model.pt`` and ``heldout.json`` say from which step each thread/process count trained).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from elmoc.directions import DIRECTIONS, JOINT
from elmoc.records import write_heldout_record

log = logging.getLogger("elmoc.train.loop")  # the trainer's lines, as they always were


def append_record(path: Path, record: dict) -> None:
    """Append one record to ``train_log.jsonl`` (a full disk: :class:`~elmoc.errors.DiskFullError`;
    a partial line is cut off when the run resumes, :func:`truncate_log`)."""
    from elmoc.io.atomic import disk_full_as_error

    with disk_full_as_error(path), open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def truncate_log(path: Path, size: int | None) -> None:
    """Cut ``train_log.jsonl`` back to ``size`` bytes, its length at the checkpoint: the
    records written after it (before a kill) are written again by the resumed run."""
    if size is None or not path.exists():
        return
    have = path.stat().st_size
    if have > size:
        os.truncate(path, size)
    elif have < size:
        log.warning("%s is shorter than when the checkpoint was taken; some records are missing", path)


def write_summary(path: Path, run: dict[str, Any], history: list[dict]) -> None:
    """Write ``heldout.json``: ``run`` (direction, steps, tokens, seconds, layout, ...; ``seconds``
    leave out native kernel builds, given as ``native_build_s``), the
    first and last heldout result of ``history`` and the whole history; a joint bi-LM's
    also each direction's before/after beside the combined metric."""
    summary = {
        **{k: run[k] for k in ("direction", "steps", "tokens", "seconds", "threads", "processes", "segments",
                               "config_hash")},
        **({"native_build_s": run["native_build_s"]} if "native_build_s" in run else {}),
        "metric": history[-1]["metric"] if history else None,
        "before": history[0]["value"] if history else None,
        "after": history[-1]["value"] if history else None,
        "constant_baseline": history[-1].get("constant_baseline") if history else None,
        "history": history, "trainable_parameters": run["trainable_parameters"],
    }
    if run["direction"] == JOINT:
        for name in DIRECTIONS:
            part = [h[name] for h in history]
            summary[name] = {"metric": part[-1]["metric"] if part else None,
                             "before": part[0]["value"] if part else None,
                             "after": part[-1]["value"] if part else None,
                             "loss_after": part[-1]["loss"] if part else None,
                             "constant_baseline": part[-1].get("constant_baseline") if part else None}
    write_heldout_record(path, summary)  # checked as the tables read it (elmoc.records)


def resumed_segments(payload: dict[str, Any], step: int, layout: dict[str, int], path: Path,
                     warn: bool = True) -> list[dict[str, Any]]:
    """The checkpoint's process-layout segments, with this run's appended when it differs.

    A run may resume under another thread or process count (a week-long run must
    survive a move to another allocation): allowed, with a WARNING, since the result
    then equals neither layout's uninterrupted run bit for bit (other summation orders,
    other per-rank RNG streams and negatives); ``segments`` (checkpoint, ``model.pt``,
    ``heldout.json``) records from which step each layout trained.  A checkpoint of an
    older elmoc records no process count: only its thread count is compared.
    """
    segments = [dict(s) for s in payload.get("segments") or
                [{"step": 0, "threads": payload.get("threads"), "processes": payload.get("processes")}]]
    last = segments[-1]
    changed = [key for key in ("threads", "processes") if last.get(key) is not None and last[key] != layout[key]]
    if changed and warn:
        log.warning("%s resumes at step %d under another layout (%s): allowed, but the result will equal "
                    "neither layout's uninterrupted run bit for bit (recorded under 'segments' in the checkpoint, "
                    "model.pt and heldout.json)", path, step,
                    ", ".join(f"{k} {last[k]} -> {layout[k]}" for k in changed))
    if changed or any(last.get(k) is None for k in layout):
        segments.append({"step": step, **layout})
    return segments
