"""`elmoc tables`: result JSON files -> Markdown/CSV tables, ours beside the paper's."""
from __future__ import annotations

import argparse

NAME = "tables"
HELP = "build the results tables (pretraining, downstream Table 2/3) from result JSON files"
DESCRIPTION = (
    "pretrain: heldout metric of every LM checkpoint (heldout.json files). "
    "downstream: Table 2/3 layout, mean±std over seeds per (variant, task), with the "
    "paper's published value beside each cell (task JSON files)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=["pretrain", "downstream"], help="which table")
    parser.add_argument("--inputs", nargs="+", required=True, help="result JSON files")
    parser.add_argument("--output", required=True, help="Markdown file to write")
    parser.add_argument("--csv", help="also write the table as CSV here")
    parser.add_argument("--runs-csv", help="downstream: also write every single run as CSV here")
    parser.add_argument("--plot", help="pretrain: also draw learning curves (PNG) from the train_log.jsonl files")


def run(args: argparse.Namespace) -> int:
    from elmoc.data.atomic import atomic_file
    from elmoc.tables.build import downstream_table, pretrain_table, write_table

    if args.kind == "pretrain":
        df = pretrain_table(args.inputs)
        notes = ["cosine: mean cosine between predicted and target vectors (higher is better); "
                 "perplexity: full-softmax heldout perplexity (lower is better).",
                 "constant_baseline: mean cosine of the best constant prediction on the same heldout "
                 "tokens; a CONT model must beat it (tiny-corpus FastText tables make it close to 1)."]
        write_table(df, args.output, args.csv, title="Pretraining: heldout metric per LM", notes=notes)
        if args.plot:
            from elmoc.tables.plot import learning_curves

            learning_curves(args.inputs, args.plot)
    else:
        df, runs = downstream_table(args.inputs)
        notes = ["Cells: our test score in %, mean±std over seeds (n runs), then the paper's Table 2/3 value.",
                 "[demo] marks toy-scale data or models; [cpu] real data splits with CPU-sized models: neither is comparable with the paper."]
        write_table(df, args.output, args.csv, title="Downstream tasks (Table 2/3 layout)", notes=notes)
        if args.runs_csv:
            with atomic_file(args.runs_csv) as f:
                runs.to_csv(f, index=False)
    print(open(args.output, encoding="utf-8").read())
    return 0
