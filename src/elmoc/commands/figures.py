"""`elmoc figures`: the run's figures (heldout curves, speed bars, memory)."""
from __future__ import annotations

import argparse

NAME = "figures"
HELP = "draw the figures (heldout metric curves, speed bars ours vs paper, S2 memory) as PNG and PDF"
DESCRIPTION = (
    "Into --out-dir: heldout_curves (heldout metric vs tokens and wall time, from --heldout), "
    "speed_table4 and speed_table5 (ours vs the paper's, from --bench) and memory_s2 (memory vs batch), "
    "each as .png and .pdf; prints the paths written."
)


INPUTS = ('heldout', 'bench')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('out_dir',)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heldout", nargs="*", default=[], help="results/lm/*/*/heldout.json")
    parser.add_argument("--bench", help="bench.json of `elmoc bench` (an absent file: gaps)")
    parser.add_argument("--out-dir", required=True, help="output folder, e.g. results/figures")


def run(args: argparse.Namespace) -> int:
    from elmoc.tables.plot import all_figures

    for path in all_figures(args.heldout, args.bench, args.out_dir):
        print(path)
    return 0
