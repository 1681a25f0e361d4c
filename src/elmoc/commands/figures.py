"""`elmoc figures`: the run's figures (heldout curves, speed bars, memory)."""
from __future__ import annotations

import argparse

from elmoc.commands._options import DIR, add_output

NAME = "figures"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc figures --heldout results/demo/lm/*/*/heldout.json --output-dir results/demo/figures'
HELP = "draw the figures (heldout metric curves, speed bars ours vs paper, S2 memory) as PNG and PDF"
DESCRIPTION = (
    "Into --output-dir: heldout_curves (heldout metric vs tokens and wall time, from --heldout), "
    "speed_table4 and speed_table5 (ours vs the paper's, from --bench) and memory_s2 (memory vs batch), "
    "each as .png and .pdf; prints the paths written."
)


INPUTS = ('heldout', 'bench')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heldout", nargs="*", default=[], help="results/demo/lm/*/*/heldout.json")
    parser.add_argument("--bench", help="bench.json of `elmoc bench` (an absent file: gaps)")
    add_output(parser, DIR, "output folder, e.g. results/demo/figures", old=("--out-dir",))


def run(args: argparse.Namespace) -> int:
    from elmoc.tables.plot import all_figures

    for path in all_figures(args.heldout, args.bench, args.output_dir):
        print(path)
    return 0
