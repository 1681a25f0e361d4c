"""`elmoc tables`: result files -> the paper's tables (Markdown, CSV, LaTeX) and figures."""
from __future__ import annotations

import argparse

NAME = "tables"
HELP = "build the paper's Tables 2-5, the figures and the flat result tables from result files"
DESCRIPTION = (
    "paper: Tables 2, 3, 4 and 5 in Markdown, CSV and LaTeX (booktabs) into --out-dir, ours beside the "
    "paper's, from heldout.json files (--heldout), task metrics JSONs (--tasks), majority baselines "
    "(--majority) and the bench JSON (--bench); whatever is missing is a gap. "
    "beyond: the table beyond the paper (Transformer and masked-LM variants by encoder x output layer, "
    "with the ELMo LSTM's rows for reference) in the same four formats, from --heldout, --tasks, --bench "
    "and --section-json (variant -> preset name). "
    "figures: heldout metric vs tokens and wall time, speed bars ours vs paper, S2 memory vs batch (PNG+PDF). "
    "pretrain / downstream: the flat tables (--inputs, --output). "
    "majority: the majority-class baseline of one task (--task, --section-json or --config). "
    "config: the workflow's effective config (--section-json) as YAML (--output), for the report."
)


INPUTS = ('heldout', 'tasks', 'majority', 'bench', 'inputs', 'config')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('out_dir', 'output', 'csv', 'runs_csv', 'plot')

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=["paper", "beyond", "figures", "pretrain", "downstream", "majority", "config"], help="what to build")
    parser.add_argument("--heldout", nargs="*", default=[], help="paper/beyond/figures: heldout.json files")
    parser.add_argument("--tasks", nargs="*", default=[], help="paper/beyond: downstream metrics JSON files")
    parser.add_argument("--majority", nargs="*", default=[], help="paper: majority-baseline JSON files")
    parser.add_argument("--bench", help="paper/beyond/figures: bench.json of `elmoc bench` (absent file = gaps)")
    parser.add_argument("--out-dir", help="paper/beyond/figures: output folder")
    parser.add_argument("--inputs", nargs="*", default=[], help="pretrain/downstream: result JSON files")
    parser.add_argument("--output", help="pretrain/downstream: Markdown file; majority: JSON file")
    parser.add_argument("--csv", help="pretrain/downstream: also write the table as CSV here")
    parser.add_argument("--runs-csv", help="downstream: also write every single run as CSV here")
    parser.add_argument("--plot", help="pretrain: also draw training-loss curves (PNG)")
    parser.add_argument("--task", help="majority: task name (key under tasks:)")
    parser.add_argument("--section-json", "--config-json", dest="section_json",
                        help="majority: the task section as JSON; config: the effective workflow config as JSON;"
                             " beyond: {variant: preset name} of pretrain.variants as JSON (optional)"
                             " (--config-json: the old name)")
    parser.add_argument("--config", help="majority: workflow config with tasks.<task>")
    parser.add_argument("--scale", default="demo", choices=["demo", "cpu", "full"], help="majority: label")


def _need(args, *names: str) -> None:
    from elmoc.errors import ConfigError

    for name in names:
        if not getattr(args, name.replace("-", "_")):
            raise ConfigError(f"elmoc tables {args.kind}: give --{name}")


def _preset_names(text: str | None) -> dict[str, str]:
    """``--section-json`` of ``beyond``: a JSON object variant -> preset name (absent: none)."""
    import json

    from elmoc.errors import ConfigError

    if not text:
        return {}
    try:
        names = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"elmoc tables beyond: --section-json is not valid JSON ({e})") from None
    if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise ConfigError("elmoc tables beyond: --section-json must be a JSON object of variant -> preset name, "
                          f"got {text[:80]!r}")
    return names


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from elmoc.io.atomic import atomic_file

    if args.kind == "paper":
        from elmoc.tables.models import table2, table3
        from elmoc.records import read_json
        from elmoc.tables.render import to_markdown, write
        from elmoc.tables.runs import read_lm_runs, read_task_runs
        from elmoc.tables.speed import table4, table5

        _need(args, "out-dir")
        lm_runs = read_lm_runs(args.heldout)
        task_runs = read_task_runs(args.tasks)
        majority = read_task_runs(args.majority)
        bench = read_json(args.bench) if args.bench and Path(args.bench).exists() else None
        for table in (table2(lm_runs, task_runs, majority), table3(lm_runs, task_runs), table4(bench), table5(bench)):
            write(table, args.out_dir)
            print(to_markdown(table))
    elif args.kind == "beyond":
        from elmoc.records import read_json
        from elmoc.tables.beyond import beyond_table
        from elmoc.tables.render import to_markdown, write
        from elmoc.tables.runs import read_lm_runs, read_task_runs

        _need(args, "out-dir")
        table = beyond_table(read_lm_runs(args.heldout), read_task_runs(args.tasks),
                             read_json(args.bench) if args.bench and Path(args.bench).exists() else None,
                             _preset_names(args.section_json))
        write(table, args.out_dir)
        print(to_markdown(table))
    elif args.kind == "figures":
        from elmoc.tables.plot import all_figures

        _need(args, "out-dir")
        for path in all_figures(args.heldout, args.bench, args.out_dir):
            print(path)
    elif args.kind == "majority":
        import json

        from elmoc.records import write_task_record
        from elmoc.tables.summary import majority_baseline
        from elmoc.tasks.config import build_task, task_section_from_args

        _need(args, "task", "output")
        section, _ = task_section_from_args(args)
        task, _ = build_task(section)
        record = majority_baseline(task, args.task, args.scale)
        write_task_record(args.output, record)
        print(json.dumps(record))
    elif args.kind == "config":
        import json

        import yaml

        from elmoc.errors import ConfigError

        _need(args, "section-json", "output")
        try:
            config = json.loads(args.section_json)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--section-json is not valid JSON ({e})") from None
        from elmoc.config import check_workflow_config

        # the workflow's config_dump passes the config Snakemake validated with the same schema
        check_workflow_config(config, "--section-json (workflow config)", required=False)
        with atomic_file(args.output) as f:
            f.write("# The effective workflow config of this run (config files + --config overrides)\n")
            yaml.safe_dump(config, f, sort_keys=False, allow_unicode=True)
    elif args.kind == "pretrain":
        from elmoc.tables.flat import pretrain_view
        from elmoc.tables.render import to_markdown, write_files

        _need(args, "inputs", "output")
        table = pretrain_view(args.inputs)
        write_files(table, md=args.output, csv=args.csv)
        if args.plot:
            from elmoc.tables.plot import learning_curves

            learning_curves(args.inputs, args.plot)
        print(to_markdown(table))
    else:
        from elmoc.tables.flat import downstream_view
        from elmoc.tables.render import to_markdown, write_files

        _need(args, "inputs", "output")
        table, runs = downstream_view(args.inputs)
        write_files(table, md=args.output, csv=args.csv)
        write_files(runs, csv=args.runs_csv)
        print(to_markdown(table))
    return 0
