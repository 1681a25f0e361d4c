"""``elmoc compression-table``: an original model and its smaller versions measured the same way (issue 36.4)."""
from __future__ import annotations

import argparse

NAME = "compression-table"
HELP = "one table of a model and its smaller versions (float16/int8 copies, students, pruned, ticket): size, speed, fidelity, scores"
DESCRIPTION = (
    "Measures --original and every --model ROLE=DIR (roles: original's copies float16, bfloat16, int8; "
    "student[-NAME]; pruned-LEVEL; ticket; ticket-control) the same way: parameters and bytes stored, "
    "embedding tokens/s of all of them timed in the same rounds in this process (--rounds, order rotated, "
    "fastest pass of each), mean cosine to the original's features per layer on the first --num-sentences "
    "of --sentences, the heldout metric recorded by each model's training run (--heldout ROLE=heldout.json, "
    "one per direction; a float16/bfloat16/int8 copy shows the original's, marked) and, for each of "
    "--tasks, the task trained on each model's features with every --seeds (`elmoc task`; mean, sample sd, "
    "difference to the original). Writes NAME.md, .csv, .json and the figure NAME.png/.pdf (size and speed "
    "against the score) into --out-dir. Task features and runs are kept in --work-dir under each model's "
    "fingerprint: a rerun (after a stop, or with one more model) reuses them, and a stopped task run resumes "
    "from its checkpoint; the side-by-side timing is always measured afresh."
)

INPUTS = ('original', 'models_under', 'sentences', 'config', 'fasttext', 'vocab')  # files read; never an output (cli)
OUTPUTS = ('out_dir', 'work_dir')


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return key, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--original", required=True, help="the uncompressed trained model directory (elmoc export)")
    parser.add_argument("--model", type=_pair, action="append", default=[], metavar="ROLE=DIR",
                        help="a smaller model directory and its role (repeat)")
    parser.add_argument("--models-under", metavar="DIR", help="also every model directory DIR/ROLE/ (role = its name)")
    parser.add_argument("--sentences", required=True, help="sentences to time and compare on, one per line "
                        "(the heldout shard, results/corpus/heldout.txt)")
    parser.add_argument("--num-sentences", type=int, default=200, help="the first N of them (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of every model (default 3)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (timing and tasks)")
    parser.add_argument("--heldout", type=_pair, action="append", default=[], metavar="ROLE=FILE",
                        help="heldout.json of the role's training run (repeat: one per direction, averaged)")
    parser.add_argument("--tasks", nargs="*", default=[], help="downstream tasks to score every model on")
    sections = parser.add_mutually_exclusive_group()
    sections.add_argument("--config", help="workflow config holding tasks.<task> for --tasks")
    sections.add_argument("--sections-json", help='{"<task>": section, ...} (what the workflow passes)')
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="task seeds (default 1)")
    parser.add_argument("--fasttext", help="static vectors for the tasks whose section sets with_fasttext "
                        "(as the workflow's task runs: tasks.vectors)")
    parser.add_argument("--vocab", help="vocabulary of a .npy --fasttext table")
    parser.add_argument("--scale", choices=["demo", "cpu", "full"], default="demo", help="label of the task runs")
    parser.add_argument("--work-dir", required=True, help="task features and runs, reused by a rerun")
    parser.add_argument("--finished-only", action="store_true",
                        help="train nothing: score each model with the task runs already finished in --work-dir "
                        "(the others are gaps; a cell names its seeds when they are not all of --seeds)")
    parser.add_argument("--out-dir", required=True, help="where NAME.md/.csv/.json/.png/.pdf go")
    parser.add_argument("--name", default="compression", help="file stem of the outputs (default compression)")


def run(args: argparse.Namespace) -> int:
    import json
    import logging
    import os
    import shlex
    import sys
    import time
    from pathlib import Path

    import torch

    from elmoc.errors import ConfigError, InputFileError
    from elmoc.features.sentences import read_sentences
    from elmoc.io.atomic import atomic_file
    from elmoc.pretrained.side_by_side import measure_side_by_side
    from elmoc.tables import compression
    from elmoc.tables.render import write_files

    log = logging.getLogger(__name__)
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
    log.info("timing %d models side by side on %d sentences, %d rounds", len(models) + 1, len(sentences), args.rounds)
    records = measure_side_by_side(args.original, models, sentences, args.rounds, args.batch_size)
    dirs = {"original": Path(args.original), **models}
    downstream: dict[str, dict[str, dict]] = {role: {} for role in dirs}
    metrics = {}
    for task, section in sections.items():
        features = {role: _features(args, task, section, role, d) for role, d in dirs.items()}
        for seed in args.seeds:  # seed by seed: a run cut short has every model at the seeds before
            for role, path in features.items():
                record = _task_run(args, task, section, role, path, seed)
                if record is None:
                    continue  # --finished-only, and this run is not
                if isinstance(record, int):
                    return record  # a task run stopped (its exit status): a rerun resumes it
                entry = downstream[role].setdefault(task, {"test": {}, "dev": {}})
                entry["test"][seed], entry["dev"][seed] = record["test"], record["dev"]
                entry["metric"] = metrics[task] = record["metric"]
    rows = []
    for role in compression.role_order(list(dirs)):
        rows.append({"role": role, **records[role], "heldout": heldout.get(role), "downstream": downstream[role]})
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": shlex.join(["elmoc", *sys.argv[1:]]), "original": str(Path(args.original).resolve()),
        "measured": {"sentences": len(sentences), "tokens": sum(len(s) for s in sentences),
                     "sentences_file": str(args.sentences), "batch_size": args.batch_size, "rounds": args.rounds,
                     "threads": torch.get_num_threads(), "load_average": list(os.getloadavg()),
                     "machine": f"{os.cpu_count()} CPUs"},
        "tasks": list(sections), "task_metrics": metrics, "seeds": args.seeds, "rows": rows,
        "heldout_note": "the recorded final value of each model's own training run(s), "
                        "the mean of its directions (heldout.json `after`)",
    }
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = compression.build_table(summary, args.name)
    write_files(table, md=out / f"{args.name}.md", csv=out / f"{args.name}.csv")
    with atomic_file(out / f"{args.name}.json") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    compression.draw_figure(summary, out / args.name)
    print((out / f"{args.name}.md").read_text(encoding="utf-8"))
    return 0


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
    from elmoc.tables.compression import is_copy, role_group

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

    from elmoc.commands import task_sentences
    from elmoc.features.sentences import read_sentences
    from elmoc.features.store import write_features
    from elmoc.pretrained.loader import load_bilm

    section_json = json.dumps(section, sort_keys=True)
    work = Path(args.work_dir)
    sentences = work / "sentences" / f"{task}-{hashlib.sha256(section_json.encode()).hexdigest()[:12]}.txt"
    if not sentences.is_file():
        sentences.parent.mkdir(parents=True, exist_ok=True)
        _call(task_sentences, ["--task", task, "--section-json", section_json, "--output", str(sentences)])
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

    from elmoc.commands import task as task_command

    output = features.parent.parent / "tasks" / features.stem / f"seed{seed}.json"
    if not output.is_file() and args.finished_only:
        return None
    if not output.is_file():
        output.parent.mkdir(parents=True, exist_ok=True)
        argv = ["--task", task, "--section-json", json.dumps(section, sort_keys=True), "--variant", role,
                "--seed", str(seed), "--scale", args.scale, "--features", str(features), "--device", "cpu",
                "--output", str(output)]
        argv += ["--threads", str(args.threads)] if args.threads else []
        if args.fasttext and section.get("with_fasttext"):  # as the workflow's task runs
            argv += ["--fasttext", args.fasttext] + (["--vocab", args.vocab] if args.vocab else [])
        status = _call(task_command, argv)
        if status:
            return status
    return json.loads(output.read_text(encoding="utf-8"))


def _call(module, argv: list[str]) -> int:
    """Run another elmoc command in this process, its arguments parsed by its own parser."""
    parser = argparse.ArgumentParser(prog=f"elmoc {module.NAME}")
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(argv)) or 0)
