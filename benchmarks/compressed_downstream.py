"""Downstream fidelity of compressed models (issue 24.3): a workflow task's score when the
features of a float16 / bfloat16 / int8 copy replace those of the uncompressed model.

Given a workflow directory whose task ran for a variant (``results/tasks/{task}/{variant}/seed{S}.json``,
``results/tasks/{task}/sentences.txt``, the variant's LMs under ``results/lm/{variant}``), with
everything there only read:

1. the model directory: ``--model DIR``, else ``elmoc export --variant V --results results`` (run in
   the workflow directory, written to the work directory);
2. ``elmoc compress`` of it in each ``--formats``, measured on the task's sentences
   (``--measure-sentences`` of them);
3. for the uncompressed model and each copy: ``elmoc embed --all`` of the task's sentences
   (the feature file ``elmoc task`` reads, ``allennlp elmo`` layout as ``elmoc extract`` writes it),
   then ``elmoc task`` with the workflow's exact arguments: the task's config section as the
   workflow passes it (the config files merged and validated against the workflow's schema, its
   defaults filled), the seed, the scale, the thread count and the static vectors recorded in the
   workflow's own result JSON; relative data paths are made absolute so that nothing runs in the
   workflow directory;
4. a table: the workflow's score (features of ``elmoc extract``), the score with the exported
   model's ``elmoc embed`` features (the like-for-like reference: the same features to ~1e-6)
   and with each copy's, dev and test; each copy's card gets the test score
   (:func:`elmoc.pretrained.compress.record_downstream`).

Usage (the demo's sentiment task; docs/benchmarks.md):
    PYTHONPATH=src .venv/bin/python benchmarks/compressed_downstream.py --workflow-dir /tmp/demo-run \
        --configfile config/config.yaml --task sentiment --variant elmo-c --seeds 1 --work-dir /tmp/cd-sentiment
The task section of such a run, for ``elmoc compression-table --sections-json`` (its data paths absolute):
    PYTHONPATH=src .venv/bin/python benchmarks/compressed_downstream.py --workflow-dir /tmp/demo-run \
        --configfile config/config.yaml --task sentiment --print-sections
SST-5 (after a shared-data run of the workflow in its directory, e.g. the repository root, where
the config's ../shared/data paths resolve):
    PYTHONPATH=src .venv/bin/python benchmarks/compressed_downstream.py --workflow-dir . \
        --configfile config/shared-data.yaml --task sst5 --variant elmo-c --seeds 1 2 3 \
        --work-dir /tmp/cd-sst5
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORMATS = ("float16", "bfloat16", "int8")
PATH_KEYS = ("train", "dev", "test")


def task_section(configfiles: list[str], task: str, workflow_dir: Path) -> dict:
    """``config["tasks"][task]`` as the workflow's rules pass it: the files deep-merged in order
    (Snakemake's ``--configfile A B``), validated with the schema's defaults filled and completed by
    the task class; data paths relative to the workflow directory made absolute."""
    import yaml
    from snakemake.utils import update_config, validate

    from elmoc.tasks.config import complete_sections

    config: dict = {}
    for path in configfiles:
        update_config(config, yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {})
    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    complete_sections(config["tasks"])
    section = json.loads(json.dumps(config["tasks"][task]))
    for key in PATH_KEYS:
        value = section.get(key)
        if isinstance(value, str) and not Path(value).is_absolute():
            section[key] = str((workflow_dir / value).resolve())
    return section


def run(command: list[str], log: Path, cwd: Path | None = None) -> float:
    """Run ``command`` (stdout and stderr to ``log``); wall seconds; exits with the log's tail on failure."""
    start = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    if code != 0:
        raise SystemExit(f"failed ({code}): {shlex.join(command)}\n{log.read_text()[-3000:]}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflow-dir", required=True, help="the workflow's working directory (read only)")
    parser.add_argument("--configfile", nargs="+", required=True, help="the config files of that run, in order")
    parser.add_argument("--task", required=True)
    parser.add_argument("--variant", default="elmo-c")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--model", help="the variant's model directory (default: elmoc export it)")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--embed-threads", type=int, default=2, help="threads of elmoc embed / compress")
    parser.add_argument("--measure-sentences", type=int, default=300,
                        help="task sentences elmoc compress measures the copies on (default 300)")
    parser.add_argument("--elmoc", default=f"{shlex.quote(sys.executable)} -m elmoc.cli")
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--print-sections", action="store_true",
                        help='only print {"TASK": section} as the workflow passes it, the --sections-json of '
                        "`elmoc compression-table` for a workflow directory other than the current one")
    args = parser.parse_args(argv)
    elmoc = shlex.split(args.elmoc)
    wf = Path(args.workflow_dir).resolve()
    if args.print_sections:
        print(json.dumps({args.task: task_section(args.configfile, args.task, wf)}, sort_keys=True))
        return 0
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="compressed-downstream-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    if "PYTHONPATH" not in os.environ:
        os.environ["PYTHONPATH"] = str(REPO / "src")

    sentences = wf / "results" / "tasks" / args.task / "sentences.txt"
    recorded = {s: wf / "results" / "tasks" / args.task / args.variant / f"seed{s}.json" for s in args.seeds}
    for path in [sentences, *recorded.values()]:
        if not path.is_file():
            raise SystemExit(f"{path}: not found; run the workflow's task {args.task!r} for {args.variant!r} first")
    workflow = {s: json.loads(p.read_text()) for s, p in recorded.items()}
    section = json.dumps(task_section(args.configfile, args.task, wf), sort_keys=True)

    if args.model:
        model = Path(args.model).resolve()
    else:
        model = work / "models" / "float32"
        if not (model / "elmoc-model.json").is_file():
            run(elmoc + ["export", "--variant", args.variant, "--results", "results", "--output-dir", str(model)],
                work / "logs" / "export.log", cwd=wf)
    measure = work / "measure.txt"
    lines = sentences.read_text(encoding="utf-8").splitlines()
    measure.write_text("\n".join(lines[: args.measure_sentences]) + "\n", encoding="utf-8")
    models = {"float32": model}
    for fmt in args.formats:
        models[fmt] = work / "models" / fmt
        run(elmoc + ["compress", str(model), "--output-dir", str(models[fmt]), "--format", fmt, "--measure", str(measure),
                     "--threads", str(args.embed_threads)], work / "logs" / f"compress-{fmt}.log")

    scores: dict[str, dict[int, dict]] = {name: {} for name in models}
    for name, directory in models.items():
        features = work / "features" / name / f"{args.task}.hdf5"
        features.parent.mkdir(parents=True, exist_ok=True)
        run(elmoc + ["embed", "--model", str(directory), "--all", "--threads", str(args.embed_threads),
                     str(sentences), str(features)], work / "logs" / f"embed-{name}.log")
        for seed, record in workflow.items():
            out = work / "tasks" / name / f"seed{seed}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            command = elmoc + ["task", "--task", args.task, "--section-json", section, "--variant", args.variant,
                               "--seed", str(seed), "--scale", record["scale"], "--features", str(features),
                               "--device", "cpu", "--output", str(out)]
            if record.get("threads"):
                command += ["--threads", str(record["threads"])]
            inputs = record.get("inputs") or {}
            for key in ("fasttext", "vocab"):
                if inputs.get(key):
                    command += [f"--{key}", str((wf / inputs[key]).resolve())]
            run(command, work / "logs" / f"task-{name}-seed{seed}.log", cwd=work)
            result = json.loads(out.read_text())
            scores[name][seed] = {"dev": result["dev"], "test": result["test"], "metric": result["metric"]}
            print(f"{name} seed {seed}: dev {result['dev']:.4f} test {result['test']:.4f}", flush=True)

    metric = next(iter(workflow.values()))["metric"]
    print(f"\n{args.task} ({metric}), variant {args.variant}, seeds {args.seeds}; workflow = elmoc extract features")
    print(f"{'features':<22} " + " ".join(f"{'dev s' + str(s):>9} {'test s' + str(s):>9}" for s in args.seeds))
    print(f"{'workflow (extract)':<22} " + " ".join(f"{workflow[s]['dev']:>9.4f} {workflow[s]['test']:>9.4f}"
                                                  for s in args.seeds))
    for name in models:
        label = "float32 (embed)" if name == "float32" else name
        print(f"{label:<22} " + " ".join(f"{scores[name][s]['dev']:>9.4f} {scores[name][s]['test']:>9.4f}"
                                         for s in args.seeds))

    from elmoc.pretrained.compress import record_downstream

    mean = lambda name: sum(scores[name][s]["test"] for s in args.seeds) / len(args.seeds)  # noqa: E731
    for fmt in args.formats:
        record_downstream(models[fmt], args.task, {
            "task": args.task, "metric": f"test {metric}" + (f", mean of seeds" if len(args.seeds) > 1 else ""),
            "seed": ",".join(map(str, args.seeds)), "source": mean("float32"), "compressed": mean(fmt),
            "note": (f"variant {args.variant}; features of `elmoc embed` with the source / this copy replace the "
                     f"workflow's, same config section, seed(s), scale and threads "
                     f"(benchmarks/compressed_downstream.py, {time.strftime('%Y-%m-%d')})")})
    if args.json:
        Path(args.json).write_text(json.dumps({"task": args.task, "variant": args.variant, "seeds": args.seeds,
                                               "workflow": {s: {"dev": w["dev"], "test": w["test"]}
                                                            for s, w in workflow.items()},
                                               "scores": scores, "models": {k: str(v) for k, v in models.items()}},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
