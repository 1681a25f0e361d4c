"""``elmoc with-gpus``: run a command on GPUs no other job of the workflow uses."""
from __future__ import annotations

import argparse

NAME = "with-gpus"
HELP = "run a command with N GPUs of its own (sets CUDA_VISIBLE_DEVICES from lock-file slots)"
DESCRIPTION = (
    "Takes N free GPU slots (one lock file per device under --lock-dir, held until the command "
    "ends, however it ends), sets CUDA_VISIBLE_DEVICES to those devices and runs the command in "
    "place of this process; waits while too few are free. The devices on offer are the entries "
    "of CUDA_VISIBLE_DEVICES if set, else every CUDA device. Inside a SLURM job the job's own "
    "GPUs pass through untouched; N = 0 hides every GPU. Example: "
    "elmoc with-gpus 2 -- torchrun --standalone --nproc-per-node 2 -m elmoc.cli train ..."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "elmoc with-gpus [--lock-dir DIR] N -- COMMAND [ARGS...]"
    parser.add_argument("--lock-dir", default=".snakemake/gpu-slots",
                        help="folder of slot lock files shared by competing jobs (default .snakemake/gpu-slots);"
                             " options go before N")
    parser.add_argument("gpus", type=int, metavar="N", help="number of GPUs the command needs (0 = none)")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments")


def run(args: argparse.Namespace) -> int:
    from elmoc.devices import exec_with_gpus

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    exec_with_gpus(args.gpus, argv, args.lock_dir)
    return 0  # not reached: exec_with_gpus replaces this process
