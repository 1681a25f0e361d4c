"""Result files -> the paper's tables, ours beside the published numbers.

Inputs (any subset; what is missing becomes a gap, never an error):

* ``results/lm/{variant}/{direction}/heldout.json`` (+ ``train_log.jsonl`` and the
  variant's ``spec.yaml`` beside them): :func:`read_lm_runs`;
* ``results/tasks/{task}/{variant}/seed{seed}.json``: :func:`read_task_runs`;

(both record types are defined and read strictly in :mod:`elmoc.tables.records`: a
missing required field or a field of the wrong type is one error naming file and field)
* ``results/baselines/{task}/majority.json``: majority-class baselines;
* ``results/tables/bench.json`` of ``elmoc bench``: Tables 4 and 5.

:func:`table2`, :func:`table3`, :func:`table4`, :func:`table5` return
:class:`~elmoc.tables.render.Table` objects; :func:`pretrain_table` and
:func:`downstream_table` are the flat pandas views (``pretrain.md``, ``downstream.md``).
A cell ``†`` marks a number whose setting differs from the paper's (scale, sizes,
hardware); the notes under each table say how.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pandas as pd

from elmoc.errors import InputFileError
from elmoc.tables import paper
from elmoc.tables.records import HeldoutRecord, TaskRecord
from elmoc.tables.render import Table

DAGGER = "†"


def read_jsonl(path: str | Path) -> list[dict]:
    """Records of a ``train_log.jsonl``; a missing file is an empty log."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise InputFileError(path, f"invalid JSON line: {e.msg}", i) from None
    return records


# --- pretraining runs -------------------------------------------------------------------


@dataclass
class LMRun:
    """One trained direction (or a joint bi-LM's one run, direction ``"joint"``, whose
    heldout values, tokens, time and parameters cover both directions): its
    :class:`~elmoc.tables.records.HeldoutRecord` plus its train log and the variant's spec."""

    variant: str
    record: HeldoutRecord
    log: list[dict] = field(default_factory=list)
    spec: dict = field(default_factory=dict)

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
        train = [r for r in self.log if r.get("event") == "train" and r.get("tokens_per_s")]
        if train:
            return float(train[-1]["tokens_per_s"])
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
        history = self.record.history or [r for r in self.log if r.get("event") == "heldout"]
        train = [r for r in self.log if r.get("event") == "train"]

        def elapsed(rec: dict) -> float | None:
            if rec.get("seconds") is not None:
                return float(rec["seconds"])
            if rec.get("tokens_per_s"):
                return rec["tokens"] / rec["tokens_per_s"]
            return None

        points = []
        for h in history:
            if h.get("value") is None or h.get("tokens") is None:
                continue
            if h.get("seconds") is not None:
                t = float(h["seconds"])
            elif h.get("tag") == "before" or h.get("step", 0) == 0:
                t = 0.0
            elif h.get("tag") == "after" and self.seconds is not None:
                t = self.seconds
            else:
                prior = [elapsed(r) for r in train if r.get("step", 0) <= h.get("step", 0)]
                prior = [p for p in prior if p is not None]
                t = prior[-1] if prior else float("nan")
            points.append((int(h["tokens"]), t, float(h["value"])))
        return points


def read_lm_runs(heldout_paths: Iterable[str | Path]) -> list[LMRun]:
    """``.../{variant}/{direction}/heldout.json`` -> runs (log and ``../spec.yaml`` if present)."""
    import yaml

    runs = []
    for path in map(Path, heldout_paths):
        record = HeldoutRecord.from_json(path)
        spec_path = path.parent.parent / "spec.yaml"
        spec = {}
        if spec_path.exists():
            try:
                spec = yaml.safe_load(spec_path.read_text(encoding="utf-8")) or {}
            except yaml.YAMLError as e:
                raise InputFileError(spec_path, f"invalid YAML: {e}") from None
        runs.append(LMRun(variant=path.parent.parent.name, record=record,
                          log=read_jsonl(path.with_name("train_log.jsonl")), spec=spec))
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


# --- downstream runs --------------------------------------------------------------------


TASK_COLUMNS = ["task", "variant", "seed", "metric", "dev", "test", "status", "scale", "seconds", "threads", "path"]


def read_task_runs(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Long table, one row per result record (:class:`~elmoc.tables.records.TaskRecord`):
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


def _fmt(mean: float, std: float | None) -> str:
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.2f}"
    return f"{mean:.2f}±{std:.2f}"


def score_cell(runs: pd.DataFrame, variant: str, task: str, mark: bool = True) -> str | None:
    """``mean±std (n=k)`` of the test scores in %, ``†`` for non-paper scale; the status
    of a run that could not run; ``None`` (a gap) when nothing ran."""
    sel = runs[(runs.variant == variant) & (runs.task == task)] if not runs.empty else runs
    if sel.empty:
        return None
    ok = sel[(sel.status == "ok") & sel.test.notna()]
    if ok.empty:
        return str(sel.status.iloc[0])
    scores = ok.test.astype(float) * 100.0
    std = float(scores.std(ddof=1)) if len(scores) > 1 else None
    cell = f"{_fmt(float(scores.mean()), std)} (n={len(scores)})"
    if mark and (ok.scale != "full").any():
        cell += f" {DAGGER}"
    return cell


def paper_cell(variant: str, task: str) -> str | None:
    value = paper.DOWNSTREAM.get(variant, {}).get(task)
    return None if value is None else _fmt(*value)


def _tasks(runs: pd.DataFrame, only_seen: bool = False) -> list[str]:
    """Task columns: the paper's tasks in its order (only those with runs when
    ``only_seen``), each followed by the extra scores that its runs report
    (``srl`` -> ``srl:conll05-f1``), then any other task."""
    seen = set(runs.task) if not runs.empty else set()
    out = []
    for t in paper.TASKS:
        extras = {f"{t}:{e}" for e in paper.EXTRA_SCORES.get(t, ())}
        out += [x for x in [t] + sorted(extras) if x in seen or not only_seen]
        out += sorted(x for x in seen - extras if x.startswith(f"{t}:"))
    return out + sorted(x for x in seen if x not in out)


def _count(n: float | None) -> str | None:
    if n is None:
        return None
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}K"
    return str(int(n))


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def scale_caption(lm_runs: list[LMRun], task_runs: pd.DataFrame) -> str:
    """Our run's scale in one sentence: corpus tokens, model sizes, hardware, seeds."""
    parts = []
    tokens = {}
    for r in lm_runs:
        epochs = (r.spec.get("train") or {}).get("epochs")
        if r.tokens and epochs:
            tokens[r.variant] = r.tokens / epochs
    if tokens:
        lo, hi = min(tokens.values()), max(tokens.values())
        span = _count(lo) if _count(lo) == _count(hi) else f"{_count(lo)}-{_count(hi)}"
        parts.append(f"pretraining corpus ≈{span} tokens per epoch")
    sizes = sorted({(e.get("cell_size"), e.get("projection_size"))
                    for e in ((r.spec.get("encoder") or {}) for r in lm_runs) if e.get("cell_size")})
    if sizes:
        parts.append("LSTM cell/projection " + ", ".join(f"{c}/{p}" for c, p in sizes))
    hw = sorted({f"{r.record.device}, {r.record.threads} thread(s)" if r.record.threads else r.record.device
                 for r in lm_runs})
    if hw:
        parts.append("trained on " + "; ".join(hw))
    if not task_runs.empty:
        seeds = sorted({int(s) for s in task_runs.seed.dropna()})
        scales = sorted(set(task_runs.scale.dropna()))
        if seeds:
            parts.append(f"downstream seeds {', '.join(map(str, seeds))} (scale: {', '.join(scales)})")
    if not parts:
        return "Ours: no results yet (every cell of ours is a gap)."
    return "Ours: " + "; ".join(parts) + f". Paper: {paper.PAPER_SCALE['corpus']}; {paper.PAPER_SCALE['model']}."


# --- Tables 2 and 3 ---------------------------------------------------------------------


def _setting_differs(runs: list[LMRun]) -> bool:
    """Whether a variant's LM differs from the paper's size (cell 4096, projection 512)."""
    for r in runs:
        enc = r.spec.get("encoder") or {}
        if enc.get("cell_size") not in (None, 4096) or enc.get("projection_size") not in (None, 512):
            return True
    return False


def _downstream_rows(variants: Iterable[str], task_runs: pd.DataFrame, tasks: list[str]) -> list[list[str | None]]:
    rows = []
    for v in variants:
        row: list[str | None] = [paper.PAPER_LABELS.get(v, v)]
        for t in tasks:
            row += [score_cell(task_runs, v, t), paper_cell(v, t)]
        rows.append(row)
    return rows


def _task_columns(tasks: list[str]) -> list[str]:
    cols = []
    for t in tasks:
        label = paper.TASK_LABELS.get(t, t)
        cols += [label, f"{label} (paper)"]
    return cols


def paper_global_batch(p: dict, joint: bool) -> int:
    """The paper's global batch of one training run (our ``train.batch_size``): per-GPU batch
    x the GPUs of the run -- all of them for a joint bi-LM, half for each separate direction
    (footnote 7's 2 + 2 split)."""
    return int(p["batch_per_gpu"] * (p["gpus"] if joint else max(1, p["gpus"] // 2)))


def table2(lm_runs: list[LMRun], task_runs: pd.DataFrame, majority: pd.DataFrame | None = None) -> Table:
    """Table 2: FastText_CC, ELMo, ELMo-A, ELMo-Sub, ELMo-C; time, batch, parameters, scores."""
    lms = by_variant(lm_runs)
    tasks = _tasks(task_runs)
    columns = ["Model", "Time", "Time (paper)", "Batch", "Batch/GPU (paper)", "Params", "Params (paper)"]
    columns += _task_columns(tasks)
    rows = []
    for v in paper.TABLE2_ROWS:
        p = paper.TABLE2_TRAINING.get(v)
        runs = lms.get(v, [])
        differs = _setting_differs(runs)
        seconds = variant_seconds(runs)
        time = _duration(seconds)
        if time is not None:
            time += f" {DAGGER}"  # never the paper's hardware: see the note
        batches = sorted({(r.spec.get("train") or {}).get("batch_size") for r in runs} - {None})
        batch = "/".join(map(str, batches)) or None
        if batch and p and batches != [paper_global_batch(p, any(r.direction == "joint" for r in runs))]:
            batch += f" {DAGGER}"
        params = _count(variant_params(runs))
        if params and differs:
            params += f" {DAGGER}"
        row = [paper.PAPER_LABELS[v], time, f"{p['days']:g} days × {p['gpus']} GPUs" if p else None,
               batch, str(p["batch_per_gpu"]) if p else None, params, f"{p['params'] / 1e6:.0f}M" if p else None]
        for t in tasks:
            row += [score_cell(task_runs, v, t), paper_cell(v, t)]
        rows.append(row)
    if majority is not None and not majority.empty:
        row = ["majority class"] + [None] * 6
        for t in tasks:
            row += [score_cell(majority, "majority", t), None]
        rows.append(row)
    notes = [
        "Scores: test metric in % (SNLI accuracy, Coref average F1, SST-5 accuracy, NER F1, SRL span F1), "
        "mean±std over seeds (n runs). A gap (—) is a run that has not happened; a text cell is why a run could not.",
        "SRL (span F1): AllenNLP's span F1 over BIO spans without V, the value the paper printed; SRL (CoNLL-05 "
        "script): the official CoNLL-2005 scorer's argument F1 of the same runs (C-X pieces merged into their X, "
        "an argument right only if every piece is), which the paper's footnote 6 says is higher and the rest "
        "of the SRL literature reports; the paper gives no value for it.",
        f"{DAGGER} our setting differs from the paper's: scores at demo/cpu scale (data or model size), "
        "times on our hardware (caption), our batch (the global batch of a run) differs from the paper's "
        "per-GPU batch x the GPUs of a run (all of them for a joint bi-LM, half for each direction of a "
        "separate pair), "
        "parameters of our scaled-down models.",
        "Time: training wall time x processes (GPUs), both directions' runs added (a joint bi-LM: its one "
        "run), from each run's heldout.json, to compare with the paper's days x GPUs; Params: trainable parameters of both directions added (a joint bi-LM: its shared "
        "input and output layer once), counted from the model.",
    ]
    return Table("table2", "Table 2: the main models, ours beside the paper's",
                 scale_caption(lm_runs, task_runs), columns, rows, notes)


def table3(lm_runs: list[LMRun], task_runs: pd.DataFrame) -> Table:
    """Table 3: the ELMo-C ablations (input/output vector choices)."""
    tasks = _tasks(task_runs)
    columns = ["Model"] + _task_columns(tasks)
    rows = _downstream_rows(paper.TABLE3_ROWS, task_runs, tasks)
    notes = ["Rows: ELMo-C with other input/output vectors (-ONEB: FastText on 1B Word; -RND: random output "
             "vectors; -CNN: ELMo's trained char-CNN vectors on both sides; -CNN-CC / -CC-CNN: CNN input with "
             "FastText output, and the reverse).",
             f"{DAGGER} our scores are at demo/cpu scale, not comparable with the paper's. A gap (—) is a run that "
             "has not happened.",
             "SRL (span F1): AllenNLP's span F1, the paper's value; SRL (CoNLL-05 script): the official CoNLL-2005 "
             "scorer's argument F1 of the same runs (no paper value)."]
    return Table("table3", "Table 3: ELMo-C variants, ours beside the paper's",
                 scale_caption(lm_runs, task_runs), columns, rows, notes)


# --- Tables 4 and 5 (speed) -------------------------------------------------------------


def _bench_caption(bench: dict | None) -> str:
    if not bench:
        return "Ours: no bench results (run `elmoc bench`, or set bench.enabled); every cell of ours is a gap."
    s = bench.get("settings", {})
    return (f"Ours: device {s.get('device', '?')}, {s.get('threads', '?')} thread(s), widths ×{s.get('width_scale', 1):g}, "
            f"vocabularies ×{s.get('vocab_scale', 1):g}, memory budget {s.get('memory_budget_mb', 0):.0f} MB, "
            f"{s.get('world', '?')} data-parallel processes{' (quick run)' if s.get('quick') else ''}. "
            "Paper: GPUs at full size.")


def _bench_differs(bench: dict | None) -> bool:
    s = (bench or {}).get("settings", {})
    return bool(bench) and (s.get("width_scale", 1) != 1 or s.get("vocab_scale", 1) != 1 or s.get("device") != "cuda")


def table4(bench: dict | None) -> Table:
    """Table 4: output layers on the ELMo encoder (params, max batch, S1/S2/S3)."""
    rows_by = {r["label"]: r for r in (bench or {}).get("table4", [])}
    mark = f" {DAGGER}" if _bench_differs(bench) else ""
    columns = ["Layer", "Params (paper size)", "Params (paper)", "Max batch", "Max batch (paper)",
               "S1", "S1 (paper)", "S2", "S2 (paper)", "S3", "S3 (paper)"]
    rows = []
    for label, (p_params, p_batch, p1, p2, p3) in paper.TABLE4.items():
        r = rows_by.get(label)
        base = label == "CONT"
        pap = [f"{v}s" if base else f"{v}x" for v in (p1, p2, p3)]
        if r is None:
            ours = [None] * 5
        else:
            if base:
                s = [f"{r['s1_step_s']:.3f}s" if r.get("s1_step_s") else None,
                     f"{r['s2_s_per_mwords']:.1f}s" if r.get("s2_s_per_mwords") else None,
                     f"{r['s3_s_per_mwords']:.1f}s" if r.get("s3_s_per_mwords") else None]
            else:
                s = [f"{r[k]:.2f}x" if r.get(k) else None for k in ("s1_ratio", "s2_ratio", "s3_ratio")]
            s = [None if x is None else x + mark for x in s]
            ours = [_count(r.get("params_paper_size")), (f"{r['max_batch']}{mark}" if r.get("max_batch") else None)] + s
        rows.append([label, ours[0], p_params, ours[1], str(p_batch), ours[2], pap[0], ours[3], pap[1], ours[4], pap[2]])
    notes = ["S1: batch 1, seconds per step; S2: the largest batch that fits the memory budget, seconds per 1M "
             "words; S3: data-parallel processes at that batch, per 1M words. CONT in seconds, other layers as "
             "ratios to CONT (higher = slower than CONT).",
             f"{DAGGER} measured at reduced widths/vocabularies and/or on CPU (caption); ratios, not absolute "
             "times, are what compares with the paper. A gap (—) was not measured."]
    return Table("table4_speed", "Table 4: output layers on the ELMo encoder, ours beside the paper's",
                 _bench_caption(bench), columns, rows, notes)


def table5(bench: dict | None) -> Table:
    """Table 5: seconds per 1M words of each encoder x output layer (ratios to CONT)."""
    by = {(r["encoder"], r["layer"]): r for r in (bench or {}).get("table5", [])}
    mark = f" {DAGGER}" if _bench_differs(bench) else ""
    columns = ["Layer"]
    for e in paper.TABLE5_ENCODERS:
        columns += [e, f"{e} (paper)"]
    rows = []
    for layer, ref in paper.TABLE5.items():
        row: list[str | None] = [layer]
        for e in paper.TABLE5_ENCODERS:
            r = by.get((e, layer))
            p = ref[e]
            if layer == "CONT":
                ours = None if r is None else f"{r['s_per_mwords']:.1f}s{mark}"
                pap = f"{p}s"
            else:
                ours = None if r is None else f"{r['ratio']:.2f}x{mark}"
                pap = "OOM" if p is None else f"{p}x"
            row += [ours, pap]
        rows.append(row)
    notes = ["CONT: seconds per 1M words; other layers: ratio to CONT on the same encoder. ADAPTIVE and SAMPLED "
             "at the 800K vocabulary (scaled as in the caption).",
             f"{DAGGER} measured at reduced widths/vocabularies and/or on CPU. A gap (—) was not measured."]
    return Table("table5_speed", "Table 5: encoders × output layers, ours beside the paper's",
                 _bench_caption(bench), columns, rows, notes)


# --- flat views (pretrain.md, downstream.md) --------------------------------------------


def pretrain_table(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Rows: variant, direction, heldout metric before/after, steps, tokens, seconds, params.

    A joint bi-LM is one row (direction ``joint``: the combined metric, both directions'
    tokens, its one run's time and parameters) with each direction's final value in
    ``after_forward`` / ``after_backward`` (empty for a separate direction's row)."""
    def r4(x):
        return None if x is None else round(float(x), 4)

    rows = []
    for run in read_lm_runs(paths):
        rec = run.record
        rows.append({
            "variant": run.variant, "direction": run.direction, "metric": rec.metric,
            "before": r4(rec.before), "after": r4(rec.after),
            "constant_baseline": r4(rec.constant_baseline), "steps": rec.steps,
            "tokens": rec.tokens, "seconds": None if run.seconds is None else round(run.seconds, 1),
            "tokens_per_s": None if run.tokens_per_second() is None else round(run.tokens_per_second()),
            "trainable_params": run.params,
            **{f"after_{d}": r4(rec.directions_after.get(d)) if run.direction == "joint" else None
               for d in ("forward", "backward")},
        })
    if not rows:
        raise InputFileError("(none)", "no heldout.json files given")
    return pd.DataFrame(rows)


def downstream_table(paths: Iterable[str | Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(display table, long table of every run): one row per variant, one column per
    task, each cell ``mean±std (n) [scale]; paper X``; a task that could not run shows
    its status (e.g. ``no data: set tasks.ner.train``)."""
    long = read_task_runs(paths)
    if long.empty:
        raise InputFileError("(none)", "no downstream result files given")
    variants = list(dict.fromkeys(long["variant"]))
    tasks = _tasks(long, only_seen=True)
    table = []
    for variant in variants:
        row = {"variant": variant, "paper_label": paper.PAPER_LABELS.get(variant, "")}
        for task in tasks:
            cell = score_cell(long, variant, task, mark=False)
            if cell is None:
                row[task] = "not run"
                continue
            sel = long[(long.variant == variant) & (long.task == task) & (long.status == "ok")]
            if not sel.empty:
                cell += " [demo]" if (sel.scale == "demo").any() else " [cpu]" if (sel.scale == "cpu").any() else ""
                ref = paper_cell(variant, task)
                if ref is not None:
                    cell += f"; paper {ref}"
            row[task] = cell
        table.append(row)
    return pd.DataFrame(table), long


def write_table(df: pd.DataFrame, md_path: str | Path, csv_path: str | Path | None = None,
                title: str | None = None, notes: Iterable[str] = ()) -> None:
    """A flat DataFrame as Markdown (+ CSV), written atomically."""
    from elmoc.data.atomic import atomic_file

    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join("" if pd.isna(v) else str(v) for v in r.tolist()) + " |")
    text = (f"# {title}\n\n" if title else "") + "\n".join(lines) + "\n"
    notes = list(notes)
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    with atomic_file(md_path) as f:
        f.write(text)
    if csv_path is not None:
        with atomic_file(csv_path) as f:
            df.to_csv(f, index=False)
