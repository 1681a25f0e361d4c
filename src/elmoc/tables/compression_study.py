"""``elmoc compression-table``'s study: an original model and its smaller versions measured the
same way (size, side-by-side speed, fidelity, heldout metric, task scores over seeds), the task
features and runs kept in a work folder under each model's fingerprint so that a rerun reuses them.

``args``: the command's parsed options (module :mod:`elmoc.commands.compression_table`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from elmoc.tables import compression


def run_study(args: Any) -> int:
    """The study and its files (NAME.md/.csv/.json/.png/.pdf in args.output_dir); the exit status
    (a task run that stopped: its own, and a rerun resumes it)."""
    import logging

    import torch

    from elmoc.errors import ConfigError, InputFileError
    from elmoc.features.sentences import read_sentences
    from elmoc.pretrained.side_by_side import measure_side_by_side

    for name in ("num_sentences", "rounds", "batch_size"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    models = _models(args)
    heldout = _heldout(args, models)
    sections = _sections(args)
    sentences = read_sentences(args.sentences)[: args.num_sentences]
    if not sentences:
        raise InputFileError(args.sentences, "holds no sentences; give the heldout shard (one sentence per line)")
    logging.getLogger(__name__).info("timing %d models side by side on %d sentences, %d rounds", len(models) + 1,
                                     len(sentences), args.rounds)
    records = measure_side_by_side(args.original, models, sentences, args.rounds, args.batch_size)
    dirs = {"original": Path(args.original), **models}
    scores = _downstream(args, sections, dirs)
    if isinstance(scores, int):
        return scores  # a task run stopped (its exit status): a rerun resumes it
    downstream, metrics = scores
    rows = [{"role": role, **records[role], "heldout": heldout.get(role), "downstream": downstream[role]}
            for role in compression.role_order(list(dirs))]
    _write(args, _summary(args, sentences, list(sections), metrics, rows))
    return 0


def _downstream(args: Any, sections: dict, dirs: dict) -> "tuple[dict, dict] | int":
    """``(role -> task -> {"test": {seed: score}, "dev": ..., "metric"}, task -> metric)`` of every
    task run (seed by seed: a run cut short has every model at the seeds before), or the exit
    status of a task run that stopped."""
    downstream: dict[str, dict[str, dict]] = {role: {} for role in dirs}
    metrics = {}
    for task, section in sections.items():
        features = {role: _features(args, task, section, role, d) for role, d in dirs.items()}
        for seed in args.seeds:
            for role, path in features.items():
                record = _task_run(args, task, section, role, path, seed)
                if record is None:
                    continue  # --finished-only, and this run is not
                if isinstance(record, int):
                    return record
                entry = downstream[role].setdefault(task, {"test": {}, "dev": {}})
                entry["test"][seed], entry["dev"][seed] = record["test"], record["dev"]
                entry["metric"] = metrics[task] = record["metric"]
    return downstream, metrics


def _summary(args: Any, sentences: list, tasks: list, metrics: dict, rows: list) -> dict:
    import os
    import shlex
    import sys
    import time

    import torch

    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": shlex.join(["elmoc", *sys.argv[1:]]), "original": str(Path(args.original).resolve()),
        "measured": {"sentences": len(sentences), "tokens": sum(len(s) for s in sentences),
                     "sentences_file": str(args.sentences), "batch_size": args.batch_size, "rounds": args.rounds,
                     "threads": torch.get_num_threads(), "load_average": list(os.getloadavg()),
                     "machine": f"{os.cpu_count()} CPUs"},
        "tasks": tasks, "task_metrics": metrics, "seeds": args.seeds, "rows": rows,
        "heldout_note": "the recorded final value of each model's own training run(s), "
                        "the mean of its directions (heldout.json `after`)",
    }


def _write(args: Any, summary: dict) -> None:
    """NAME.md, .csv, .json and the figure into args.output_dir; the Markdown table printed."""
    import json

    from elmoc.io.atomic import atomic_file
    from elmoc.tables.render import write_files

    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = compression.build_table(summary, args.name)
    write_files(table, md=out / f"{args.name}.md", csv=out / f"{args.name}.csv")
    with atomic_file(out / f"{args.name}.json") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    compression.draw_figure(summary, out / args.name)
    print((out / f"{args.name}.md").read_text(encoding="utf-8"))


def _models(args) -> dict:
    """Role -> directory of --model and --models-under, roles checked, the original excluded."""
    from pathlib import Path

    from elmoc.errors import ConfigError, InputFileError
    from elmoc.pretrained.loader import MODEL_FILE
    from elmoc.tables.compression import role_group

    pairs = list(args.model)
    if args.models_under:
        under = Path(args.models_under)
        if not under.is_dir():
            raise InputFileError(under, "is not a folder; give the folder that holds one model directory per role")
        pairs += [(p.name, str(p)) for p in sorted(under.iterdir()) if (p / MODEL_FILE).is_file()]
    models: dict = {}
    for role, directory in pairs:
        if role_group(role) == "original":
            raise ConfigError(f"--model {role}={directory}: the original is --original; give the others their roles")
        if role in models and Path(models[role]).resolve() != Path(directory).resolve():
            raise ConfigError(f"role {role!r} given twice ({models[role]}, {directory}); name each model once")
        if not (Path(directory) / MODEL_FILE).is_file():
            raise InputFileError(directory, f"is not a model directory (no {MODEL_FILE}); give one written by "
                                 "elmoc export, compress, distill or prune")
        models[role] = Path(directory)
    return models


def _heldout(args, models: dict) -> dict:
    """Role -> ``{"metric", "value", "files"}`` from --heldout; a float16/bfloat16/int8 copy without
    a run of its own gets the original's, marked ``inherited``."""
    import json
    import statistics

    from elmoc.errors import ConfigError, InputFileError
    from elmoc.tables.compression import is_copy

    files: dict[str, list[str]] = {}
    for role, path in args.heldout:
        if role != "original" and role not in models:
            raise ConfigError(f"--heldout {role}={path}: no model has role {role!r}; give it with --model")
        files.setdefault(role, []).append(path)
    out = {}
    for role, paths in files.items():
        records = []
        for path in paths:
            try:
                records.append(json.loads(open(path, encoding="utf-8").read()))
            except (OSError, json.JSONDecodeError) as e:
                raise InputFileError(path, f"is not a readable heldout.json ({e}); give the run's heldout.json")
            if records[-1].get("after") is None:
                raise InputFileError(path, "has no final heldout value (`after`); give a finished run's heldout.json")
        metric = {r.get("metric") for r in records}
        if len(metric) != 1:
            raise ConfigError(f"--heldout {role}: files of different metrics {sorted(map(str, metric))}")
        out[role] = {"metric": metric.pop(), "value": statistics.fmean(r["after"] for r in records), "files": paths}
    for role in models:
        if role not in out and "original" in out and is_copy(role):
            out[role] = {**out["original"], "inherited": True}
    return out


def _sections(args) -> dict:
    """Task -> its config section, from --config or --sections-json."""
    import json

    from elmoc.errors import ConfigError
    from elmoc.tasks.config import load_task_section

    if not args.tasks:
        return {}
    if args.config:
        return {t: load_task_section(args.config, t)[0] for t in args.tasks}
    if not args.sections_json:
        raise ConfigError("--tasks needs the tasks' sections: --config FILE or --sections-json JSON")
    try:
        given = json.loads(args.sections_json)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--sections-json is not JSON ({e}); pass {{\"<task>\": section, ...}}")
    missing = [t for t in args.tasks if not isinstance(given, dict) or not isinstance(given.get(t), dict)]
    if missing:
        raise ConfigError(f"--sections-json has no section for {', '.join(missing)}; add them or drop them from --tasks")
    return {t: given[t] for t in args.tasks}


def fingerprint(directory) -> str:
    """12 hex digits of sha256 over a model directory's meta and weights files: its work folder's name."""
    import hashlib
    from pathlib import Path

    from elmoc.io.tensor_files import stored_file
    from elmoc.pretrained.loader import MODEL_FILE, read_model_meta, stacks_of

    directory = Path(directory)
    digest = hashlib.sha256()
    for name in [MODEL_FILE] + [stored_file(directory, s).name for s in stacks_of(read_model_meta(directory))]:
        with open(directory / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:12]


def _features(args, task: str, section: dict, role: str, directory):
    """The feature file of the task's sentences by the model in ``directory`` (made once, kept in
    the work folder named by the model's fingerprint); the task's sentences are written once too."""
    import hashlib
    import json
    from pathlib import Path

    from types import SimpleNamespace

    from elmoc.features.sentences import read_sentences
    from elmoc.features.store import write_features
    from elmoc.pretrained.loader import load_bilm
    from elmoc.tasks.task_run import write_task_sentences

    section_json = json.dumps(section, sort_keys=True)
    work = Path(args.work_dir)
    sentences = work / "sentences" / f"{task}-{hashlib.sha256(section_json.encode()).hexdigest()[:12]}.txt"
    if not sentences.is_file():
        sentences.parent.mkdir(parents=True, exist_ok=True)
        write_task_sentences(SimpleNamespace(task=task, config=None, section_json=section_json, output=str(sentences)))
    features = work / f"{role}-{fingerprint(directory)}" / "features" / f"{sentences.stem}.hdf5"
    if not features.is_file() and not args.finished_only:
        features.parent.mkdir(parents=True, exist_ok=True)
        write_features(load_bilm(directory), read_sentences(sentences), features, batch_size=args.batch_size)
    return features


def _task_run(args, task: str, section: dict, role: str, features, seed: int) -> dict | int | None:
    """The metrics record of ``elmoc task`` on ``features`` at ``seed`` (a finished run's JSON is
    reused), the exit status of a run that stopped (a rerun resumes it from its checkpoint), or
    None with --finished-only for a run not finished."""
    import json

    from types import SimpleNamespace

    from elmoc.tasks.task_run import run_task_command

    output = features.parent.parent / "tasks" / features.stem / f"seed{seed}.json"
    if not output.is_file() and args.finished_only:
        return None
    if not output.is_file():
        output.parent.mkdir(parents=True, exist_ok=True)
        vectors = args.fasttext if section.get("with_fasttext") else None  # as the workflow's task runs
        status = run_task_command(SimpleNamespace(
            task=task, config=None, section_json=json.dumps(section, sort_keys=True), variant=role, seed=seed,
            scale=args.scale, features=str(features), device="cpu", output=str(output), threads=args.threads,
            fasttext=vectors, vocab=args.vocab if vectors else None, lm=None, checkpoint_minutes=None,
            stop_margin=None, stale_checkpoint="set-aside", save_model=None, lm_model=None))
        if status:
            return status
    return json.loads(output.read_text(encoding="utf-8"))
